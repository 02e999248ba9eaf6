// core: the product's saturating arithmetic against uint64 sums, the record layout at odd
// offsets, LargeVector's mappings (aligned for huge pages, no more address space than asked),
// and json_text against nlohmann's strict UTF-8 check and a code-point encoder written
// here (the console's stats test covers the same function through the JSON it writes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/large_buffer.hpp"
#include "core/record_layout.hpp"
#include "core/thread_limit.hpp"
#include "core/saturate.hpp"

namespace blockmm {
namespace {

std::uint32_t saturated_sum(std::uint64_t x) {
  return x > std::numeric_limits<std::uint32_t>::max() ? std::numeric_limits<std::uint32_t>::max()
                                                       : static_cast<std::uint32_t>(x);
}

// A value a message quotes (issue 52, item 5): whole up to kQuotedValueBytes, else its first bytes
// and "…", never half a UTF-8 character; control characters escaped as names are.
TEST(QuotedValue, CutsLongValuesAtACharacterWithAnEllipsis) {
  const std::string ellipsis = "\xE2\x80\xA6";
  EXPECT_EQ(quoted_value("two"), "two");
  EXPECT_EQ(quoted_value("1\n2"), "1\\x0a2");
  EXPECT_EQ(quoted_value(std::string(kQuotedValueBytes, 'x')), std::string(kQuotedValueBytes, 'x'));
  EXPECT_EQ(quoted_value(std::string(kQuotedValueBytes + 1, 'x')), std::string(kQuotedValueBytes, 'x') + ellipsis);
  EXPECT_EQ(quoted_value(std::string(100000, 'x')).size(), kQuotedValueBytes + 3);
  EXPECT_EQ(quoted_value("abcdef", 4), "abcd" + ellipsis);
  // "é" is two bytes: a cut at an odd byte keeps the character before it whole.
  std::string accents;
  for (int c = 0; c < 100; ++c) accents += "\xc3\xa9";
  EXPECT_EQ(quoted_value(accents, 5), "\xc3\xa9\xc3\xa9" + ellipsis);
  EXPECT_EQ(quoted_value(accents, 6), "\xc3\xa9\xc3\xa9\xc3\xa9" + ellipsis);
  EXPECT_EQ(quoted_value(std::string(200, '\n'), 2), "\\x0a\\x0a" + ellipsis);
  // The thread counts' messages quote through it.
  for (const auto& check : {+[] { parse_thread_count(std::string(5000, '9'), "--threads"); },
                            +[] { parse_thread_count(std::string(5000, 'x'), "--threads"); },
                            +[] { check_omp_num_threads(std::string(5000, '9')); }}) {
    try {
      check();
      ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
      EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
      EXPECT_NE(std::string(e.what()).find(ellipsis), std::string::npos) << e.what();
    }
  }
}

TEST(Saturate, AddsAndClampsAsUint64SumsDo) {
  std::mt19937_64 rng(1);
  const std::uint32_t edges[] = {0, 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
  for (std::uint32_t x : edges)
    for (std::uint32_t y : edges) EXPECT_EQ(saturating_add(x, y), saturated_sum(std::uint64_t{x} + y)) << x << " + " << y;
  for (int t = 0; t < 100000; ++t) {
    const auto x = static_cast<std::uint32_t>(rng()), y = static_cast<std::uint32_t>(rng() >> (rng() % 33));
    ASSERT_EQ(saturating_add(x, y), saturated_sum(std::uint64_t{x} + y));
    const std::uint64_t wide = rng() >> (rng() % 64);
    ASSERT_EQ(saturate(wide), saturated_sum(wide));
  }
  EXPECT_EQ(product(65535, 65535), 4294836225u);  // (2^16 - 1)^2 fits uint32
}

TEST(RecordLayout, IndicesAtAnyOffset) {
  EXPECT_EQ(record_bytes<std::uint16_t>(3), 8 + 18);
  EXPECT_EQ(record_bytes<std::uint32_t>(46340), 8 + std::int64_t{4} * 46340 * 46340);
  std::vector<std::byte> bytes(64);
  for (std::size_t offset = 0; offset < 8; ++offset) {  // odd m puts records at odd offsets
    set_record_index(bytes.data() + offset, -7, std::numeric_limits<std::int32_t>::max());
    EXPECT_EQ(record_row(bytes.data() + offset), -7);
    EXPECT_EQ(record_col(bytes.data() + offset), std::numeric_limits<std::int32_t>::max());
  }
  EXPECT_EQ((MatrixShape{96, 4}.block_rows()), 24);
  EXPECT_EQ((MatrixShape{96, 0}.block_rows()), 0);
}

// UTF-8 of a code point, written here from the encoding's definition.
std::string utf8(std::uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

TEST(JsonText, WellFormedUtf8PassesUnchanged) {
  std::mt19937_64 rng(2);
  for (int t = 0; t < 2000; ++t) {
    std::string text;
    for (int k = 0; k < 12; ++k) {
      std::uint32_t c = static_cast<std::uint32_t>(rng() % 0x110000);
      if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;  // surrogates are no characters
      text += utf8(c);
    }
    ASSERT_EQ(json_text(text), text);
  }
}

TEST(JsonText, OtherBytesBecomeTheCharacterOfTheirNumber) {
  EXPECT_EQ(json_text("\xff"), utf8(0xFF));
  EXPECT_EQ(json_text("a\x80z"), "a" + utf8(0x80) + "z");
  EXPECT_EQ(json_text("\xc0\xaf"), utf8(0xC0) + utf8(0xAF));                  // overlong '/'
  EXPECT_EQ(json_text("\xed\xa0\x80"), utf8(0xED) + utf8(0xA0) + utf8(0x80));  // a surrogate
  EXPECT_EQ(json_text("\xf4\x90\x80\x80"), utf8(0xF4) + utf8(0x90) + utf8(0x80) + utf8(0x80));  // past U+10FFFF
  EXPECT_EQ(json_text("\xe2\x82"), utf8(0xE2) + utf8(0x82));                  // cut short
  EXPECT_EQ(json_text("\xe2\x82\xac"), "\xe2\x82\xac");                        // the euro sign itself
}

TEST(JsonText, AnyBytesMakeJsonThatAStrictWriterTakes) {
  std::mt19937_64 rng(3);
  for (int t = 0; t < 5000; ++t) {
    std::string bytes(static_cast<std::size_t>(rng() % 24), '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    const std::string text = json_text(bytes);
    std::string dumped;
    ASSERT_NO_THROW(dumped = nlohmann::json(text).dump());  // throws on invalid UTF-8
    ASSERT_EQ(nlohmann::json::parse(dumped).get<std::string>(), text);
    ASSERT_GE(text.size(), bytes.size());
    ASSERT_LE(text.size(), 2 * bytes.size());
  }
}

// The process's address space in bytes (VmSize), read without allocating: a heap allocation
// here could move the figure it measures.
std::int64_t address_space_bytes() {
  char text[8192];
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return -1;
  text[got] = '\0';
  const char* at = std::strstr(text, "VmSize:");
  return at == nullptr ? -1 : std::strtoll(at + 7, nullptr, 10) * 1024;
}

// Arrays from 2 MiB are mapped at 2 MiB boundaries (only whole aligned 2 MiB pages can be huge)
// and take the address space of their bytes rounded to pages, not more (issue 48's follow-up: a
// reservation at the old 32 MiB threshold took up to 16 times that and ran a product under
// `ulimit -v` out of memory); below 2 MiB they come from the heap.
TEST(LargeVector, MapsArraysFrom2MiBAlignedAndNoLargerThanAsked) {
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  for (std::size_t bytes : {std::size_t{2} << 20, (std::size_t{3} << 20) + 5, (std::size_t{5} << 20) - 8,
                            (std::size_t{9} << 20) + 4096}) {
    SCOPED_TRACE(bytes);
    const std::int64_t before = address_space_bytes();
    ASSERT_GT(before, 0);
    {
      LargeVector<std::uint64_t> array;
      array.resize(bytes / 8);
      const std::int64_t during = address_space_bytes();
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(array.data()) % (std::uintptr_t{2} << 20), 0u);
      EXPECT_EQ(during - before, static_cast<std::int64_t>(bytes / 8 * 8 + page - 1) / page * page);
      array.front() = 1;  // usable from end to end
      array.back() = 2;
      EXPECT_EQ(array.front() + array.back(), 3u);
    }
    EXPECT_EQ(address_space_bytes(), before);  // all of it given back
  }
  LargeVector<std::byte> small(std::size_t{1} << 20);  // the heap's
  small.back() = std::byte{7};
  EXPECT_EQ(small.back(), std::byte{7});
}

}  // namespace
}  // namespace blockmm
