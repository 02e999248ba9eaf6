// blockmm-info: what a matrix file (COL380 binary or HDF5) holds (tools/file_summary.hpp). Exit 3 on a bad file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "core/thread_limit.hpp"
#include "tools/file_summary.hpp"
#include "tools/mapped_file.hpp"
#include "tools/tool_main.hpp"

int main(int argc, char** argv) {
  CLI::App app{"blockmm-info: header, value width, order, duplicates, all-zero blocks, value range and\n"
               "blocks per block-row of a matrix file (input or product): COL380 binary, or HDF5 (BSR layout),\n"
               "told apart by the signature. Picture of the block pattern: blockmm-spy."};
  std::string path;
  bool json = false;
  app.add_option("FILE", path, "COL380 binary or HDF5 file")->required();
  app.add_flag("--json", json, "print one JSON object");
  app.footer("Exit codes: 0 success, 2 usage, 3 unreadable or malformed file.");

  return blockmm::tools::run_tool("blockmm-info", app, argc, argv, [&] {
    blockmm::check_omp_num_threads_environment();  // libgomp dies without a word on absurd counts
    const std::unique_ptr<blockmm::tools::MappedFile> file = blockmm::tools::MappedFile::open(path);
    const blockmm::tools::FileSummary summary = blockmm::tools::summarize_file(*file);
    const std::string text = json ? blockmm::tools::summary_json(summary) + "\n" : blockmm::tools::summary_text(summary);
    std::fputs(text.c_str(), stdout);
    return 0;
  });
}
