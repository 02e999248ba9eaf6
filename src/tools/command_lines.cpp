// The command lines of blockmm-gen, blockmm-cmp, blockmm-info and blockmm-convert, and the entry
// point they share (options, --help and --version, failures mapped to exit codes and one-line
// messages, as the blockmm driver does). One translation unit on purpose: CLI11 2.1 is header-only
// and each file that builds a CLI::App pays a long compilation of its templates.
#include "tools/command_lines.hpp"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <new>
#include <string>

#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "core/thread_limit.hpp"
#include "io/atomic_output.hpp"
#include "io/binary_format.hpp"
#include "io/file_access.hpp"
#include "io/library_guard.hpp"
#include "io/product_writer.hpp"
#include "io/same_file.hpp"
#include "tools/compare.hpp"
#include "tools/convert.hpp"
#include "tools/file_summary.hpp"
#include "tools/generator.hpp"
#include "tools/mapped_file.hpp"
#include "settings/settings.hpp"

#ifndef BLOCKMM_VERSION
#define BLOCKMM_VERSION "unknown"
#endif

namespace blockmm::tools {
namespace {

// The exit codes of every tool: 0 success, 2 usage, 3 bad input, 4 output failure (stdout
// included), 5 out of memory, 1 anything else. blockmm-cmp adds 1 for "the files differ"; a
// failure of its own still prints an error line, so the two are told apart by the message.

// The tool's settings, read by run_tool before the command runs.
settings::Settings g_settings;

// Parses argv with `app` (--help and --version exit 0, parse errors exit 2), then runs `body`
// and returns its exit code, reporting any failure as one line on stderr.
int run_tool(const char* tool, CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  const auto fail = [&](const char* what, ExitCode code) {
    std::fprintf(stderr, "%s: error: %s\n", tool, escape_control_characters(what).c_str());
    return static_cast<int>(code);
  };
  io::install_cleanup_handlers();
  app.name(tool);  // the usage line and the man page name the tool, not the path it was run by
  app.set_version_flag("--version", std::string(tool) + " " + BLOCKMM_VERSION);  // the same version as blockmm's
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      const int code = app.exit(e);
      try {
        io::flush_standard_output();
      } catch (const Error& error) {
        return fail(error.what(), error.code());
      }
      return code;
    }
    // One line, as every error: the pointer to --help rides on it.
    // CLI11's message quotes the value given: cut as every quoted value is.
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", tool, quoted_value(e.what(), 2 * kQuotedValueBytes).c_str(),
                 tool);
    return static_cast<int>(ExitCode::usage);
  }
  try {
    g_settings = settings::Settings::read(settings::process_environment());
    io::LibraryGuard::set_metadata_timeout_seconds(g_settings.library_timeout);
    const int code = body();
    io::flush_standard_output();
    return code;
  } catch (const Error& e) {
    return fail(e.what(), e.code());
  } catch (const std::bad_alloc&) {
    return fail("out of memory", ExitCode::resource);
  } catch (const std::exception& e) {
    return fail(e.what(), ExitCode::other);
  }
}

const char* order_name(RecordOrder order) {
  switch (order) {
    case RecordOrder::sorted: return "sorted";
    case RecordOrder::reverse: return "reverse";
    default: return "shuffled";
  }
}

const char* width_name(io::ValueWidth w) {
  return w == io::ValueWidth::u16 ? "uint16 values (an input matrix)" : "uint32 values (a product)";
}

}  // namespace

int gen_command(int argc, char** argv) {
  CLI::App app{"blockmm-gen: write a random COL380 input matrix (uint16 blocks).\n"
               "The file depends only on the options (not on --threads): the same seed gives the same bytes."};
  GenSpec spec;
  std::string out;
  std::int64_t k = -1;
  double density = -1;
  std::string order = "shuffled";
  std::string threads = "0";
  bool quiet = false;
  app.add_option("OUT", out, "output file (written to a temporary name, renamed when complete)")->required();
  app.add_option("-n,--n", spec.n, "matrix order")->required();
  app.add_option("-m,--m,--block-size", spec.m, "block order (must divide n)")->required();
  auto* k_option = app.add_option("-k,--k", k, "number of distinct blocks, 0 <= k <= (n/m)^2");
  auto* density_option = app.add_option("--density", density, "fraction of the (n/m)^2 blocks present: k = round(D * (n/m)^2)");
  k_option->excludes(density_option);
  density_option->excludes(k_option);
  app.add_option("--min-value", spec.min_value, "smallest value")->capture_default_str();
  app.add_option("--max-value", spec.max_value,
                 "largest value, at most 65535; the default keeps a product's sums of up to 4104 terms below "
                 "2^32 - 1 (the course's generator's range), 65535 saturates almost every product")
      ->capture_default_str();
  app.add_option("--seed", spec.seed, "random seed")->capture_default_str();
  app.add_option("--order", order, "record order: shuffled (a seeded permutation), sorted (row-major) or reverse")
      ->check(CLI::IsMember({"shuffled", "sorted", "reverse"}))
      ->capture_default_str();
  app.add_option("--skew", spec.skew,
                 "power-law block-row skew: row i gets a share of k proportional to (i+1)^-ALPHA, capped at n/m "
                 "(0: even rows)")
      ->capture_default_str();
  app.add_option("--zero-blocks", spec.zero_blocks, "fraction of the k blocks that are all zero (the rest never are)")
      ->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads, 0 to 1024 (default 0: OMP_NUM_THREADS or all cores)")
      ->option_text("N");
  app.add_flag("-q,--quiet", quiet, "no summary line");
  app.footer("Exit codes: 0 success, 1 other failure, 2 usage, 4 output failure, 5 out of memory.");

  return run_tool("blockmm-gen", app, argc, argv, [&] {
    if (k_option->count() == 0 && density_option->count() == 0)
      throw UsageError("give the number of blocks, --k K or --density D");
    if (spec.n > 0 && spec.m > 0 && spec.n % spec.m == 0) {
      const double p = static_cast<double>(spec.n / spec.m);
      if (density_option->count() > 0) {
        if (!(density >= 0 && density <= 1))
          throw UsageError("--density " + std::to_string(density) + " must lie in [0, 1]");
        k = std::llround(density * p * p);
      }
    }
    spec.k = k;
    spec.order = order == "sorted" ? RecordOrder::sorted : order == "reverse" ? RecordOrder::reverse : RecordOrder::shuffled;
    check_spec(spec);
    if (spec.m > kMaxSupportedBlockOrder)
      throw UsageError("--m " + std::to_string(spec.m) + " exceeds the largest block order blockmm supports, " +
                                std::to_string(kMaxSupportedBlockOrder) + " (a block of m*m uint16 values stays below 4 GiB)");
    const int thread_count = parse_thread_count(threads, "--threads");
    if (thread_count == 0) check_omp_num_threads(g_settings.omp_num_threads);
    if (thread_count > 0) omp_set_num_threads(thread_count);

    const auto start = std::chrono::steady_clock::now();
    const GenResult result = generate(spec, out);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!quiet) {
      const double p = static_cast<double>(spec.n / spec.m);
      std::printf("blockmm-gen: %s: n = %d, m = %d, k = %lld (density %.4g), values [%u, %u], seed %llu, %s, skew %g, "
                  "%lld all-zero blocks; %lld bytes in %.2f s\n",
                  escape_control_characters(out).c_str(), spec.n, spec.m, static_cast<long long>(spec.k),
                  static_cast<double>(spec.k) / (p * p),
                  spec.min_value, spec.max_value, static_cast<unsigned long long>(spec.seed), order_name(spec.order),
                  spec.skew, static_cast<long long>(result.zero_blocks), static_cast<long long>(result.bytes), seconds);
    }
    return 0;
  });
}

int cmp_command(int argc, char** argv) {
  using io::BinaryFileInfo;
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
  app.footer("Exit codes: 0 equal, 1 different, 2 usage, 3 unreadable or malformed file, 4 output failure,\n"
             "5 out of memory (a failure prints 'blockmm-cmp: error: ...').");

  return run_tool("blockmm-cmp", app, argc, argv, [&] {
    check_omp_num_threads(g_settings.omp_num_threads);  // libgomp dies without a word on absurd counts
    const std::unique_ptr<MappedFile> expected = MappedFile::open(expected_path);
    const std::unique_ptr<MappedFile> actual = MappedFile::open(actual_path);
    const BinaryFileInfo& e = expected->info();
    const BinaryFileInfo& a = actual->info();
    // A file without blocks fits either width (an empty binary file reads as uint16).
    if (e.width != a.width && e.header.k > 0 && a.header.k > 0)
      throw UsageError(actual_path + ": holds " + width_name(a.width) + ", but " + expected_path + " holds " +
                                width_name(e.width));
    const Comparison c = compare_files(*expected, *actual, strict);
    if (c.equal()) {
      if (!quiet)
        std::printf("blockmm-cmp: equal: n = %d, m = %d, %lld non-zero blocks%s\n", e.header.n, e.header.m,
                    static_cast<long long>(c.expected_blocks), strict ? " (strict)" : "");
      return 0;
    }
    if (!quiet) {
      if (!c.shape_differs.empty()) {
        std::printf("blockmm-cmp: %s and %s differ: %s\n", escape_control_characters(expected_path).c_str(),
                    escape_control_characters(actual_path).c_str(),
                    c.shape_differs.c_str());
      } else {
        if (!c.first_difference.empty())
          std::printf("blockmm-cmp: %s and %s differ: first at %s\n", escape_control_characters(expected_path).c_str(),
                      escape_control_characters(actual_path).c_str(),
                      c.first_difference.c_str());
        if (!c.strict_problem.empty()) std::printf("blockmm-cmp: --strict: %s\n", c.strict_problem.c_str());
        std::printf("blockmm-cmp: %s\n", summarize(c).c_str());
      }
    }
    return 1;
  });
}

int info_command(int argc, char** argv) {
  CLI::App app{"blockmm-info: header, value width, order, duplicates, all-zero blocks, value range and\n"
               "blocks per block-row of a matrix file (input or product): COL380 binary, or HDF5 (BSR layout),\n"
               "told apart by the signature. Picture of the block pattern: blockmm-spy."};
  std::string path;
  bool json = false;
  app.add_option("FILE", path, "COL380 binary or HDF5 file")->required();
  app.add_flag("--json", json, "print one JSON object");
  app.footer("Exit codes: 0 success, 1 other failure, 2 usage, 3 unreadable or malformed file, 4 output failure,\n"
             "5 out of memory.");

  return run_tool("blockmm-info", app, argc, argv, [&] {
    check_omp_num_threads(g_settings.omp_num_threads);  // libgomp dies without a word on absurd counts
    const std::unique_ptr<MappedFile> file = MappedFile::open(path);
    const FileSummary summary = summarize_file(*file);
    const std::string text = json ? summary_json(summary) + "\n" : summary_text(summary);
    std::fputs(text.c_str(), stdout);
    return 0;
  });
}

int convert_command(int argc, char** argv) {
  CLI::App app{"blockmm-convert: convert a block matrix between the COL380 binary format and HDF5 (BSR layout,\n"
               "readable by scipy.sparse.bsr_matrix), losslessly, for inputs (uint16) and products (uint32)."};
  std::string in_path;
  std::string out_path;
  std::string to = "auto";
  std::string values = "auto";
  app.add_option("IN", in_path, "file to convert (binary or HDF5, told apart by its signature)")->required();
  app.add_option("OUT", out_path, "file to write")->required();
  app.add_option("--to", to, "output format: h5, bin, or auto (h5 when OUT ends in .h5 or .hdf5)")
      ->check(CLI::IsMember({"auto", "h5", "hdf5", "bin", "binary"}));
  app.add_option("--values", values,
                 "value width of the input: u16 (input matrix), u32 (product), or auto (binary: from the file size; "
                 "an empty binary file counts as u16)")
      ->check(CLI::IsMember({"auto", "u16", "u32"}));
  app.footer("Exit codes: 0 success, 1 other failure, 2 usage, 3 unreadable or malformed input, 4 output failure,\n"
             "5 out of memory.");

  return run_tool("blockmm-convert", app, argc, argv, [&] {
    io::check_not_an_input(out_path, "output", {in_path});
    const io::OutputFormat format = io::choose_output_format(out_path, to);
    const std::string warning = io::output_name_warning(out_path, format);
    if (!warning.empty())
      std::fprintf(stderr, "blockmm-convert: warning: %s\n", escape_control_characters(warning).c_str());
    convert_matrix(in_path, out_path, format, values);
    return 0;
  });
}

}  // namespace tools
