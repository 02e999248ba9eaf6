// io/mapped_pages' FileMap: a file's bytes at one reserved address range, its windows mapped in
// place when asked for and released once their expected bytes are written. A released window's
// file pages are unmapped and its range stays the reservation's (inaccessible), so that nothing
// else of the process can be mapped inside it; map() then refuses it. The file holds what was
// written through the windows.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/mapped_pages.hpp"
#include "io/temp_file.hpp"

namespace blockmm::io {
namespace {

constexpr std::int64_t kWindow = mapped::kHugeBytes;

// The permissions /proc/self/maps gives the mapping holding `address` ("rw-s", "---p"), or "".
std::string protection_at(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, perms;
    fields >> range >> perms;
    const std::size_t dash = range.find('-');
    const std::uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= lo && at < hi) return perms;
  }
  return "";
}

TEST(FileMap, WindowsAreReleasedAsTheyFillAndTheReservationStaysWhole) {
  for (const std::string& dir : test_dirs()) {
    SCOPED_TRACE(dir);
    TempFile file(dir);
    const std::int64_t size = 5 * kWindow / 2 + 100;  // three windows, the last one short
    ASSERT_EQ(::ftruncate(file.dup(), size), 0);
    const int fd = file.dup();
    mapped::FileMap map(fd, size, kWindow);
    ASSERT_TRUE(map.valid());
    const std::int64_t lo = 1000, hi = size - 10;
    map.expect(lo, hi - lo);
    std::mt19937_64 rng(5);
    std::vector<unsigned char> expected(static_cast<std::size_t>(size), 0);
    const auto write = [&](std::int64_t offset, std::int64_t bytes) {
      std::byte* at = map.map(offset, bytes);
      ASSERT_NE(at, nullptr);
      ASSERT_EQ(at, map.at(offset));
      for (std::int64_t b = 0; b < bytes; ++b) expected[static_cast<std::size_t>(offset + b)] = static_cast<unsigned char>(rng());
      std::memcpy(at, expected.data() + offset, static_cast<std::size_t>(bytes));
      ASSERT_EQ(map.written(offset, bytes), 0);
    };
    write(lo, 100);
    EXPECT_FALSE(map.released(lo)) << "released before its bytes were all written";
    EXPECT_EQ(protection_at(map.at(lo)), "rw-s");
    write(kWindow - 50, 300);  // across the first windows' boundary
    write(lo + 100, kWindow - 50 - (lo + 100));
    EXPECT_TRUE(map.released(lo)) << "the first window is written";
    EXPECT_FALSE(map.released(kWindow)) << "the second is not";
    EXPECT_EQ(map.map(lo, 10), nullptr) << "a released window mapped again";
    EXPECT_EQ(protection_at(map.at(0)), "---p") << "the released window is not the reservation's again";
    write(kWindow + 250, hi - (kWindow + 250));
    EXPECT_TRUE(map.released(kWindow) && map.released(hi - 1));
    EXPECT_EQ(map.release(), 0);
    EXPECT_EQ(protection_at(map.at(lo)), "") << "the reservation outlived release()";
    ::close(fd);
    EXPECT_TRUE(file.contents() == expected) << "the file differs from the bytes written";
  }
}

// Windows that nothing was expected of are never released; map() refuses ranges outside the file.
TEST(FileMap, UnexpectedWindowsStayAndRangesOutsideAreRefused) {
  TempFile file;
  const std::int64_t size = 2 * kWindow;
  ASSERT_EQ(::ftruncate(file.dup(), size), 0);
  const int fd = file.dup();
  mapped::FileMap map(fd, size, kWindow);
  ASSERT_TRUE(map.valid());
  map.expect(0, kWindow);
  EXPECT_EQ(map.map(size - 1, 2), nullptr);
  EXPECT_EQ(map.map(-1, 1), nullptr);
  ASSERT_NE(map.map(kWindow, 10), nullptr);
  std::memset(map.at(kWindow), 1, 10);
  EXPECT_EQ(map.written(kWindow, 10), 0);
  EXPECT_FALSE(map.released(kWindow));
  EXPECT_EQ(map.release(), 0);
  ::close(fd);
}

}  // namespace
}  // namespace blockmm::io
