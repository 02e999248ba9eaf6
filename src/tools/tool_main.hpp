// The tools' shared entry point: command-line parsing and the mapping of failures to exit
// codes and one-line messages ("<tool>: error: <what>"), as the blockmm driver does.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace blockmm::tools {

// Exit codes of failures. By default a blockmm::Error exits with its own code (bad input 3,
// output failure 4, ...), out of memory 5, anything else 1. A comparison tool, whose 1 means
// "different", sets `trouble` so that every failure (usage included) exits with that code.
struct ExitPolicy {
  int trouble = 0;  // 0: by the kind of failure
};

// Parses argv with `app` (--help and --version exit 0, parse errors exit 2), then runs `body`
// and returns its exit code, reporting any failure as one line on stderr.
int run_tool(const char* tool, CLI::App& app, int argc, char** argv, const std::function<int()>& body,
             ExitPolicy policy = {});

}  // namespace blockmm::tools
