// console::stats_json with names that are bytes, not text (issue 43, item 10): a name holding
// bytes that are not UTF-8 (a file name, an argument, a CUDA_VISIBLE_DEVICES entry, a host name)
// made the JSON writer throw after the product's commit. Every string field now carries its
// bytes: well-formed UTF-8 unchanged, any other byte as the character of the same number
// (U+0080-U+00FF); the result is valid JSON that nlohmann (strict) and the writer accept.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "console/run_stats.hpp"

namespace blockmm::console {
namespace {

// The expected text of `bytes`, written here independently of run_stats.cpp: a byte-by-byte
// decoder that accepts exactly the well-formed sequences of Unicode's table 3-7.
std::string expected_text(const std::string& bytes) {
  std::string out;
  std::size_t at = 0;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  while (at < bytes.size()) {
    const unsigned char b = byte(at);
    std::size_t length = 0;
    if (b < 0x80) length = 1;
    else if (b >= 0xC2 && b <= 0xDF) length = 2;
    else if (b >= 0xE0 && b <= 0xEF) length = 3;
    else if (b >= 0xF0 && b <= 0xF4) length = 4;
    bool ok = length > 0 && at + length <= bytes.size();
    for (std::size_t k = 1; ok && k < length; ++k) ok = byte(at + k) >= 0x80 && byte(at + k) <= 0xBF;
    if (ok && length >= 3) {
      const unsigned char second = byte(at + 1);
      if (b == 0xE0) ok = second >= 0xA0;
      if (b == 0xED) ok = second <= 0x9F;
      if (b == 0xF0) ok = second >= 0x90;
      if (b == 0xF4) ok = second <= 0x8F;
    }
    if (ok) {
      out += bytes.substr(at, length);
      at += length;
    } else {
      const unsigned code = b;  // U+0080..U+00FF in two bytes
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
      ++at;
    }
  }
  return out;
}

RunStats stats_with_names(const std::string& name) {
  RunStats s;
  s.version = "blockmm test";
  s.command_line = {"blockmm", name + "A.bin", name + "B.bin", name + "C.bin", "--stats=json"};
  s.inputs = {{name + "A.bin", "binary", 12}, {name + "B.bin", "binary", 12}};
  s.output_path = name + "C.bin";
  s.host = name + "host";
  s.started_utc = "2026-01-01T00:00:00Z";
  s.backend = "cuda";  // "gpus" lists rank_devices only for cuda
  s.rank_devices = {"GPU 0 [CUDA_VISIBLE_DEVICES=" + name + "]"};
  s.device = s.rank_devices[0];
  s.start_settings = {"CUDA_VISIBLE_DEVICES=" + name};
  s.per_rank.resize(1);
  s.rank_work = {0};
  s.rank_rows = {0};
  s.rank_bytes_exchanged = {0};
  s.backend_steps.predicted_dense.add(1.5);
  return s;
}

TEST(RunStats, NamesThatAreNotUtf8AreCarriedByTheJson) {
  const std::vector<std::string> names = {
      "plain",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",  // well-formed UTF-8: unchanged
      "\xff\xfe",                                     // never UTF-8
      "\xc3",                                         // a sequence cut short at the end
      "\xc3(",                                        // ... and in the middle
      "\xc0\xaf",                                     // an overlong '/'
      "\xed\xa0\x80",                                 // a surrogate
      "\xf4\x90\x80\x80",                             // past U+10FFFF
      "\xe9t\xe9 \x01\t\n\"\\",                       // Latin-1, control characters, JSON's own
  };
  for (const std::string& name : names) {
    SCOPED_TRACE(::testing::PrintToString(name));
    std::string text;
    ASSERT_NO_THROW(text = stats_json(stats_with_names(name)));
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << text;
    const std::string shown = expected_text(name);
    EXPECT_EQ(j.at("output").get<std::string>(), shown + "C.bin");
    EXPECT_EQ(j.at("inputs").at(0).at("path").get<std::string>(), shown + "A.bin");
    EXPECT_EQ(j.at("inputs").at(1).at("path").get<std::string>(), shown + "B.bin");
    EXPECT_EQ(j.at("command_line").at(3).get<std::string>(), shown + "C.bin");
    EXPECT_EQ(j.at("host").get<std::string>(), shown + "host");
    EXPECT_EQ(j.at("start_settings").at(0).get<std::string>(), "CUDA_VISIBLE_DEVICES=" + shown);
    EXPECT_EQ(j.at("gpus").at(0).get<std::string>(), "GPU 0 [CUDA_VISIBLE_DEVICES=" + shown + "]");
    EXPECT_EQ(j.at("backend_seconds").at("numeric: predicted dense path").get<double>(), 1.5);
    EXPECT_EQ(j.at("backend_seconds").size(), 1u);  // the steps measured, no others
  }
}

// Random bytes in every name: the JSON is always written and always parses, and UTF-8 text
// (every byte below 0x80 here) comes back byte for byte.
TEST(RunStats, RandomBytesAlwaysGiveValidJson) {
  std::mt19937_64 rng(4310);
  for (int round = 0; round < 2000; ++round) {
    std::string name(static_cast<std::size_t>(rng() % 12), '\0');
    for (char& c : name) c = static_cast<char>(rng() % 256);
    std::string text;
    ASSERT_NO_THROW(text = stats_json(stats_with_names(name))) << ::testing::PrintToString(name);
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << ::testing::PrintToString(name);
    EXPECT_EQ(j.at("output").get<std::string>(), expected_text(name) + "C.bin");
  }
  std::string ascii = "a\x01\x7f/\"z";
  EXPECT_EQ(nlohmann::json::parse(stats_json(stats_with_names(ascii))).at("output").get<std::string>(), ascii + "C.bin");
}

}  // namespace
}  // namespace blockmm::console
