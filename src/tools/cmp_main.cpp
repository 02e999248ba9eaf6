// blockmm-cmp: are two COL380 files the same matrix? (tools/compare.hpp). Exit 0 equal,
// 1 different, 2 trouble (usage, unreadable or malformed file), as cmp(1) and diff(1) do.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/thread_limit.hpp"
#include "io/binary_format.hpp"
#include "tools/compare.hpp"
#include "tools/mapped_file.hpp"
#include "tools/tool_main.hpp"

namespace {

const char* width_name(blockmm::io::ValueWidth w) {
  return w == blockmm::io::ValueWidth::u16 ? "uint16 values (an input matrix)" : "uint32 values (a product)";
}

}  // namespace

int main(int argc, char** argv) {
  using blockmm::io::BinaryFileInfo;
  CLI::App app{"blockmm-cmp: compare two matrix files (COL380 binary or HDF5, in any mix, told apart by their\n"
               "signature) as matrices: same n, m and (i, j) -> block values. Record order is free and all-zero\n"
               "blocks count as absent. Both files hold inputs (uint16) or both hold products (uint32); a binary\n"
               "file's width is told from its size, an HDF5 file's from /data."};
  std::string expected_path, actual_path;
  bool strict = false;
  bool quiet = false;
  app.add_option("EXPECTED", expected_path, "the reference file")->required();
  app.add_option("ACTUAL", actual_path, "the file under test")->required();
  app.add_flag("--strict", strict,
               "also require ACTUAL to be sorted by (i, j), without duplicates or all-zero blocks, as blockmm writes");
  app.add_flag("-q,--quiet", quiet, "print nothing; the exit code tells");
  app.footer("Exit codes: 0 equal, 1 different, 2 usage error or an unreadable or malformed file.");

  blockmm::tools::ExitPolicy policy;
  policy.trouble = 2;
  return blockmm::tools::run_tool("blockmm-cmp", app, argc, argv, [&] {
    blockmm::check_omp_num_threads_environment();  // libgomp dies without a word on absurd counts
    using blockmm::tools::MappedFile;
    const std::unique_ptr<MappedFile> expected = MappedFile::open(expected_path);
    const std::unique_ptr<MappedFile> actual = MappedFile::open(actual_path);
    const BinaryFileInfo& e = expected->info();
    const BinaryFileInfo& a = actual->info();
    // A file without blocks fits either width (an empty binary file reads as uint16).
    if (e.width != a.width && e.header.k > 0 && a.header.k > 0)
      throw blockmm::UsageError(actual_path + ": holds " + width_name(a.width) + ", but " + expected_path + " holds " +
                                width_name(e.width));
    const blockmm::tools::Comparison c = blockmm::tools::compare_files(*expected, *actual, strict);
    if (c.equal()) {
      if (!quiet)
        std::printf("blockmm-cmp: equal: n = %d, m = %d, %lld non-zero blocks%s\n", e.header.n, e.header.m,
                    static_cast<long long>(c.expected_blocks), strict ? " (strict)" : "");
      return 0;
    }
    if (!quiet) {
      if (!c.shape_differs.empty()) {
        std::printf("blockmm-cmp: %s and %s differ: %s\n", expected_path.c_str(), actual_path.c_str(),
                    c.shape_differs.c_str());
      } else {
        if (!c.first_difference.empty())
          std::printf("blockmm-cmp: %s and %s differ: first at %s\n", expected_path.c_str(), actual_path.c_str(),
                      c.first_difference.c_str());
        if (!c.strict_problem.empty()) std::printf("blockmm-cmp: --strict: %s\n", c.strict_problem.c_str());
        std::printf("blockmm-cmp: %s\n", blockmm::tools::summarize(c).c_str());
      }
    }
    return 1;
  }, policy);
}
