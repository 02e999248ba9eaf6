// What the cli suite's tests of the blockmm executable share (input_rules_test.cpp,
// usage_test.cpp, cli_test.cpp): small operands, the check that a run failed cleanly (its exit
// code, one message naming the file, nothing written), and the Cli fixture's scratch folders.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "support/harness.hpp"

namespace blockmm::e2e {

inline constexpr const char* kErrorPrefix = "blockmm: error: ";

// Numbers that appear after the first "record" in `message`.
inline std::vector<long long> numbers_after_record(const std::string& message) {
  std::vector<long long> numbers;
  const std::size_t at = message.find("record");
  if (at == std::string::npos) return numbers;
  const std::string rest = message.substr(at);
  static const std::regex number(R"(-?\d+)");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), number); it != std::sregex_iterator(); ++it)
    numbers.push_back(std::stoll(it->str()));
  return numbers;
}

// A failed run: the exit code, exactly one stderr line "blockmm: error: <file>: ..." holding
// every fragment (and, for `records`, the record indices after the word "record"), nothing on
// stdout, and `out_dir` holding exactly `out_dir_entries` (no output, no temporary file).
inline ::testing::AssertionResult failed_cleanly(const RunResult& run, int code, const std::string& file,
                                                 const std::vector<std::string>& fragments, const std::string& out_dir,
                                                 const std::vector<std::string>& out_dir_entries = {},
                                                 const std::vector<long long>& records = {}) {
  auto failure = [&](const std::string& what) {
    return ::testing::AssertionFailure() << what << "\n" << run.describe();
  };
  if (run.timed_out) return failure("timed out");
  if (run.exit_code != code) return failure("expected exit code " + std::to_string(code));
  // One line, besides the run's log lines (the header a run in a pipe prints as it starts).
  const std::vector<std::string> lines = message_lines(run.err);
  if (lines.size() != 1)
    return failure("expected exactly one message line on stderr, got " + std::to_string(lines.size()));
  const std::string& line = lines[0];
  const std::string head = kErrorPrefix + file + ": ";
  if (line.rfind(head, 0) != 0) return failure("stderr does not start with '" + head + "'");
  for (const std::string& f : fragments)
    if (line.find(f) == std::string::npos) return failure("message lacks '" + f + "'");
  const std::vector<long long> numbers = numbers_after_record(line);
  for (long long r : records)
    if (std::find(numbers.begin(), numbers.end(), r) == numbers.end())
      return failure("message does not name record " + std::to_string(r));
  if (!run.out.empty()) return failure("unexpected stdout");
  const std::vector<std::string> entries = list_dir(out_dir);
  if (entries != out_dir_entries) {
    std::string listing;
    for (const auto& e : entries) listing += " '" + e + "'";
    return failure("output directory holds:" + listing);
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult succeeded(const RunResult& run) {
  if (run.exit_code == 0 && !run.timed_out && run.err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected success\n" << run.describe();
}

inline std::vector<std::uint16_t> fill(std::int32_t m, std::uint16_t v) { return std::vector<std::uint16_t>(m * m, v); }

// n = 16, m = 4 (p = 4), 6 records, shuffled order; B a different matrix of the same shape.
inline InputRecords small_a() {
  return make_records(16, 4, {{2, 1, fill(4, 3)}, {0, 0, fill(4, 1)}, {3, 3, fill(4, 7)},
                              {1, 2, fill(4, 2)}, {0, 3, fill(4, 5)}, {3, 0, fill(4, 65535)}});
}
inline InputRecords small_b() {
  return make_records(16, 4, {{0, 2, fill(4, 4)}, {3, 1, fill(4, 9)}, {1, 1, fill(4, 6)},
                              {2, 3, fill(4, 8)}, {0, 0, fill(4, 65535)}});
}

inline std::vector<std::byte> header_only(std::int32_t n, std::int32_t m, std::int32_t k) {
  return encode_with_header(n, m, k, {});
}

inline std::int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

class Cli : public ::testing::Test {
 protected:
  ScratchDir scratch{"blockmm-cli"};
  std::string in_dir = scratch.subdir("in");
  std::string out_dir = scratch.subdir("out");
  std::string out = out_dir + "/C.bin";
  std::string a = in_dir + "/A.bin";
  std::string b = in_dir + "/B.bin";

  void SetUp() override {
    write_bytes(a, encode(small_a()));
    write_bytes(b, encode(small_b()));
  }
  std::string put(const std::string& name, const std::vector<std::byte>& bytes) const {
    const std::string path = in_dir + "/" + name;
    write_bytes(path, bytes);
    return path;
  }
};

}  // namespace blockmm::e2e
