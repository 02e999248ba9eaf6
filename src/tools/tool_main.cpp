#include "tools/tool_main.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <string>

#include "core/error.hpp"
#include "io/atomic_output.hpp"

#ifndef BLOCKMM_VERSION
#define BLOCKMM_VERSION "unknown"
#endif

namespace blockmm::tools {

int run_tool(const char* tool, CLI::App& app, int argc, char** argv, const std::function<int()>& body,
             ExitPolicy policy) {
  const auto fail = [&](const char* what, ExitCode code) {
    std::fprintf(stderr, "%s: error: %s\n", tool, escape_control_characters(what).c_str());
    return policy.trouble != 0 ? policy.trouble : static_cast<int>(code);
  };
  io::install_cleanup_handlers();
  app.set_version_flag("--version", std::string(tool) + " " + BLOCKMM_VERSION);  // the same version as blockmm's
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "%s: error: %s\nRun with --help for more information.\n", tool,
                 escape_control_characters(e.what()).c_str());
    return policy.trouble != 0 ? policy.trouble : static_cast<int>(ExitCode::usage);
  }
  try {
    return body();
  } catch (const Error& e) {
    return fail(e.what(), e.code());
  } catch (const std::bad_alloc&) {
    return fail("out of memory", ExitCode::resource);
  } catch (const std::exception& e) {
    return fail(e.what(), ExitCode::other);
  }
}

}  // namespace blockmm::tools
