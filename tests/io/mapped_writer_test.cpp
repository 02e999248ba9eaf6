// io/mapped_writer: a reserved, shared-mapped file written by 1, 2 and 8 copying threads holds
// exactly the bytes written (random offsets and sizes, small writes done in place and large
// ones split across threads, checked against an in-memory copy by reading the file back with
// read(2)); the reservation fails with the file system's reason (a file-size limit: EFBIG, never
// SIGXFSZ or a SIGBUS later); a file that cannot be mapped yields no writer; the thread count
// follows BLOCKMM_WRITE_THREADS within its limits; fields scattered into the map (an HDF5
// output's) land where they say; on tmpfs the output goes into huge folios where the kernel can,
// and ranges said ahead are written through the file's one map, their pages prepared beside the
// writes, exactly as any other.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/mapped_writer.hpp"
#include "io/temp_file.hpp"

namespace blockmm::io {
namespace {

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~EnvVar() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

class MappedWriterThreads : public ::testing::TestWithParam<int> {};

// In TMPDIR (reserved by fallocate) and in /dev/shm where it is a tmpfs (size set, pages
// allocated by the copying threads).
TEST_P(MappedWriterThreads, RandomWritesLandExactlyWhereTheySay) {
  const int threads = GetParam();
  std::mt19937_64 rng(1600 + threads);
  const std::vector<std::string> dirs = test_dirs();
  for (const std::string& dir : dirs)
  for (const std::int64_t size : {std::int64_t{1}, std::int64_t{4095}, std::int64_t{12} << 20, (std::int64_t{37} << 20) + 13}) {
    SCOPED_TRACE(dir + ", " + std::to_string(size) + " bytes");
    TempFile file(dir);
    {
      const int fd = file.dup();
      ASSERT_TRUE(reserve_file_space(fd, size, "C.bin", file.path()));
      ::close(fd);
    }
    struct stat st {};
    ASSERT_EQ(::stat(file.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_size, size) << "the reservation did not set the file's size";

    std::vector<unsigned char> expected(static_cast<std::size_t>(size), 0);
    std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), size, threads, "C.bin");
    ASSERT_NE(writer, nullptr);
    // Disjoint pieces in random order (as ranks and chunks write), sizes from one byte to several MiB.
    std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
    for (std::int64_t at = 0; at < size;) {
      const std::int64_t limit = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 64 : (std::int64_t{6} << 20);
      const std::int64_t n = std::min(size - at, std::uniform_int_distribution<std::int64_t>(1, limit)(rng));
      pieces.emplace_back(at, n);
      at += n;
    }
    std::shuffle(pieces.begin(), pieces.end(), rng);
    std::vector<unsigned char> source;
    for (const auto& [offset, bytes] : pieces) {
      source.resize(static_cast<std::size_t>(bytes));
      for (unsigned char& c : source) c = static_cast<unsigned char>(rng());
      writer->write_at(offset, source.data(), bytes);
      std::copy(source.begin(), source.end(), expected.begin() + offset);
      std::fill(source.begin(), source.end(), 0);  // the writer must have copied, not kept a pointer
    }
    writer->sync_and_close();
    writer.reset();
    EXPECT_TRUE(file.contents() == expected) << "the file differs from the bytes written";
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, MappedWriterThreads, ::testing::Values(1, 2, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param); });

TEST(MappedWriter, WriteOutsideTheReservationIsAnInternalError) {
  TempFile file;
  ASSERT_TRUE(reserve_file_space(file.dup(), 100, "C.bin", file.path()));
  std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), 100, 2, "C.bin");
  ASSERT_NE(writer, nullptr);
  const char bytes[8] = {};
  EXPECT_THROW(writer->write_at(96, bytes, 8), Error);
  EXPECT_THROW(writer->write_at(-1, bytes, 1), Error);
  writer->write_at(92, bytes, 8);
  writer->sync_and_close();
}

// The file shrinks under the map (another process of the same user truncates it): a copy must
// be an OutputError, never a SIGBUS, where the kernel can say so (MADV_POPULATE_WRITE, 5.14).
TEST(MappedWriter, FileShrunkUnderTheMapIsAnErrorNotASigbus) {
#if !defined(MADV_POPULATE_WRITE)
  GTEST_SKIP() << "built without MADV_POPULATE_WRITE";
#else
  // Also into pages prepared ahead (tmpfs), which the copy then finds gone.
  for (const std::string& dir : test_dirs())
  for (const int threads : {1, 8}) {
    SCOPED_TRACE(dir + ", " + std::to_string(threads) + " threads");
    TempFile file(dir);
    const std::int64_t size = std::int64_t{8} << 20;
    ASSERT_TRUE(reserve_file_space(file.dup(), size, "C.bin", file.path()));
    std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), size, threads, "C.bin");
    ASSERT_NE(writer, nullptr);
    writer->prepare_ahead({{0, size}}, 2);
    std::vector<unsigned char> bytes(static_cast<std::size_t>(size), 7);
    writer->write_at(0, bytes.data(), 4096);
    ASSERT_EQ(::truncate(file.path().c_str(), 4096), 0);
    std::string message;
    try {
      writer->write_at(4096, bytes.data(), size - 4096);
    } catch (const OutputError& e) {
      message = e.what();
    }
    if (message.empty() && ::madvise(nullptr, 0, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
      GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
    EXPECT_NE(message.find("C.bin: cannot write bytes [4096, "), std::string::npos) << message;
  }
#endif
}

TEST(MappedWriter, ReservationPastAFileSizeLimitIsEfbig) {
  TempFile file;
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous), 0);  // as install_cleanup_handlers() does
  struct rlimit limited = old;
  limited.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  try {
    reserve_file_space(file.dup(), 1 << 20, "C.bin", file.path());
  } catch (const OutputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &previous, nullptr);
  EXPECT_NE(message.find("C.bin: cannot reserve 1048576 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EFBIG)), std::string::npos) << message;
  EXPECT_EQ(file.contents().size(), 0u) << "a failed reservation grew the file";
}

// tmpfs is not fallocated (the copying threads allocate its pages): the free space is checked
// when reserving, so a tmpfs too small is still an error before any write.
TEST(MappedWriter, ReservationLargerThanATmpfsIsEnospc) {
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  TempFile file("/dev/shm");
  std::string message;
  try {
    reserve_file_space(file.dup(), std::int64_t{1} << 50, "C.bin", file.path());
  } catch (const OutputError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(std::strerror(ENOSPC)), std::string::npos) << message;
  EXPECT_EQ(file.contents().size(), 0u) << "a failed reservation grew the file";
}

TEST(MappedWriter, AnUnmappableFileGivesNoWriter) {
  const int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(make_mapped_writer(fd, 4096, 2, "/dev/null"), nullptr);
  EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC) << "the descriptor was closed although no writer took it";
  ::close(fd);
}

TEST(MappedWriter, PolicyFollowsTheRequestWithinLimits) {
  // Not asked for: min(rank_threads, 8), at least 1, mapped where maps_output says so.
  EXPECT_EQ(write_policy(0, true, false, false, 1).threads, 1);
  EXPECT_EQ(write_policy(0, true, false, false, kMinDefaultMapThreads - 1).threads, kMinDefaultMapThreads - 1);
  EXPECT_EQ(write_policy(0, true, false, false, 64).threads, 8);
  EXPECT_EQ(write_policy(0, true, false, false, 0).threads, 1);
  EXPECT_FALSE(write_policy(0, true, false, false, 64).threads_forced);
  // Asked for by name: that many, mapped on any file system.
  EXPECT_EQ(write_policy(5, true, false, false, 1).threads, 5);
  EXPECT_TRUE(write_policy(5, true, false, false, 1).threads_forced);
  EXPECT_EQ(write_policy(1, true, false, false, 16).threads, 1);
  EXPECT_EQ(write_policy(99, true, false, false, 16).threads, kMaxWriteThreads);
  // The switches carried as given.
  EXPECT_FALSE(write_policy(0, false, false, false, 4).huge);
  EXPECT_TRUE(write_policy(0, true, true, false, 4).pwrite_only);
  EXPECT_TRUE(write_policy(0, true, false, true, 4).tmpfs_fallocate);
}

// Where the output is mapped (else one pwrite stream): bench/NOTES.md items 10 and 33.
TEST(MappedWriter, MapChoiceFollowsTheMeasurements) {
  MapChoice c;
  c.tmpfs = true;
  c.threads = kMinDefaultMapThreads;
  c.huge = true;
  EXPECT_TRUE(maps_output(c)) << "tmpfs in huge folios, enough threads: mapped";
  c.hdf5 = true;
  EXPECT_TRUE(maps_output(c)) << "HDF5 too, its fields scattered without a staging copy";
  c.threads = kMinDefaultMapThreads - 1;
  EXPECT_FALSE(maps_output(c)) << "few threads: pwrite, in huge folios too";
  c.threads = kMinDefaultMapThreads;
  c.huge = false;
  EXPECT_FALSE(maps_output(c)) << "4 KiB pages: HDF5 through pwrite";
  c.hdf5 = false;
  EXPECT_TRUE(maps_output(c)) << "4 KiB pages, binary, enough threads: mapped";
  c.threads = 1;
  EXPECT_FALSE(maps_output(c)) << "4 KiB pages, one thread: pwrite";
  c.threads = 16;
  c.tmpfs = false;
  EXPECT_FALSE(maps_output(c)) << "the local disk: pwrite";
  c.threads_forced = true;
  EXPECT_TRUE(maps_output(c)) << "BLOCKMM_WRITE_THREADS: mapped anywhere";
  c.pwrite_forced = true;
  EXPECT_FALSE(maps_output(c)) << "BLOCKMM_IO=pwrite wins";
  c.pwrite_forced = false;
  c.mappable = false;
  EXPECT_FALSE(maps_output(c)) << "not reserved, or MPI-IO";
}

// write_fields scatters each record's fields to their places (as an HDF5 output's block-columns
// and values), in random pieces, through the map and through the staging path alike, with and
// without huge folios and with pages prepared ahead; the file holds exactly what was written.
TEST(MappedWriter, ScatteredFieldsLandExactlyWhereTheySay) {
  std::mt19937_64 rng(4242);
  const std::vector<std::string> dirs = test_dirs();
  for (const std::string& dir : dirs)
    for (const bool huge : {false, true})
      for (const int threads : {1, 3}) {
        SCOPED_TRACE(dir + (huge ? ", huge" : ", 4 KiB") + ", " + std::to_string(threads) + " threads");
        const std::int64_t count = 50000, value_bytes = 100, stride = 8 + value_bytes;
        const std::int64_t index_at = 1000, data_at = index_at + 4 * count + 17;
        const std::int64_t size = data_at + value_bytes * count + 5;
        TempFile file(dir);
        ASSERT_TRUE(reserve_file_space(file.dup(), size, "C.h5", file.path()));
        std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), size, threads, "C.h5", huge);
        ASSERT_NE(writer, nullptr);
        writer->prepare_ahead({{index_at, 4 * count}, {data_at, value_bytes * count}}, 2);
        std::vector<unsigned char> expected(static_cast<std::size_t>(size), 0);
        std::vector<unsigned char> records;
        for (std::int64_t first = 0; first < count;) {
          const std::int64_t n = std::min(count - first, std::uniform_int_distribution<std::int64_t>(1, 9000)(rng));
          records.resize(static_cast<std::size_t>(n * stride));
          for (unsigned char& c : records) c = static_cast<unsigned char>(rng());
          const std::vector<FieldCopy> fields = {{4, 4, index_at + 4 * first}, {8, value_bytes, data_at + value_bytes * first}};
          writer->write_fields(reinterpret_cast<const std::byte*>(records.data()), n, stride, fields);
          for (std::int64_t t = 0; t < n; ++t) {
            std::copy_n(records.begin() + t * stride + 4, 4, expected.begin() + index_at + 4 * (first + t));
            std::copy_n(records.begin() + t * stride + 8, value_bytes, expected.begin() + data_at + value_bytes * (first + t));
          }
          first += n;
        }
        writer->sync_and_close();
        const WriterReport report = writer->report();
        writer.reset();
        EXPECT_TRUE(file.contents() == expected) << "the file differs from the fields written";
        EXPECT_TRUE(report.mapped);
        if (!huge) {
          EXPECT_EQ(report.huge_extents, 0);
        }
      }
}

// Ranges said ahead on tmpfs go through the file's one map, their pages prepared by threads of
// the writer beside the writes (mapped_writer.cpp), its windows released as they fill: writes in
// any order, from a byte to several MiB, inside the ranges or across their ends and the gap
// between them (those map their own range), land exactly where they say.
TEST(MappedWriter, WritesIntoRangesSaidAheadLandExactlyWhereTheySay) {
  std::string dir = default_dir();
  if (!is_tmpfs(dir)) dir = "/dev/shm";
  if (!is_tmpfs(dir)) GTEST_SKIP() << "no tmpfs here: ranges said ahead are prepared on tmpfs only";
  std::mt19937_64 rng(77);
  const std::int64_t size = (std::int64_t{66} << 20) + 4321;  // two windows of the file's map
  const std::int64_t gap_begin = (std::int64_t{30} << 20) + 17, gap_end = gap_begin + 5000;
  std::vector<unsigned char> pool(std::size_t{6} << 20);  // the bytes written: slices of it
  for (unsigned char& c : pool) c = static_cast<unsigned char>(rng());
  for (const auto& [huge, threads] : {std::pair<bool, int>{true, 3}, {false, 1}}) {
      SCOPED_TRACE(std::string(huge ? "huge" : "4 KiB") + ", " + std::to_string(threads) + " threads");
      TempFile file(dir);
      ASSERT_TRUE(reserve_file_space(file.dup(), size, "C.bin", file.path()));
      std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), size, threads, "C.bin", huge);
      ASSERT_NE(writer, nullptr);
      writer->prepare_ahead({{4109, gap_begin - 4109}, {gap_end, size - 999 - gap_end}}, 2);
      std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
      for (std::int64_t at = 0; at < size;) {
        const std::int64_t limit = std::uniform_int_distribution<int>(0, 4)(rng) == 0 ? 300 : (std::int64_t{5} << 20);
        std::int64_t n = std::min(size - at, std::uniform_int_distribution<std::int64_t>(1, limit)(rng));
        for (const std::int64_t edge : {std::int64_t{4109}, gap_begin, gap_end, size - 999})  // mostly inside one range
          if (at < edge && at + n > edge && rng() % 4 != 0) n = edge - at;
        pieces.emplace_back(at, n);
        at += n;
      }
      std::shuffle(pieces.begin(), pieces.end(), rng);
      std::vector<unsigned char> expected(static_cast<std::size_t>(size), 0);
      for (const auto& [offset, bytes] : pieces) {
        const unsigned char* source = pool.data() + rng() % (pool.size() - static_cast<std::size_t>(bytes));
        writer->write_at(offset, source, bytes);
        std::copy(source, source + bytes, expected.begin() + offset);
      }
      writer->sync_and_close();
      writer.reset();
      EXPECT_TRUE(file.contents() == expected) << "the file differs from the bytes written";
    }
}

// On tmpfs, where the kernel can (Linux 6.1), the written extents become huge folios, and the
// bytes are the same (item 33).
TEST(MappedWriter, TmpfsOutputGoesIntoHugeFolios) {
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  TempFile file("/dev/shm");
  if (!huge_folios_possible(file.dup())) GTEST_SKIP() << "no MADV_COLLAPSE here, or shmem_enabled = deny";
  const std::int64_t size = std::int64_t{24} << 20;
  ASSERT_TRUE(reserve_file_space(file.dup(), size, "C.bin", file.path()));
  std::unique_ptr<FileWriter> writer = make_mapped_writer(file.dup(), size, 2, "C.bin", true);
  ASSERT_NE(writer, nullptr);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  std::mt19937_64 rng(9);
  for (unsigned char& c : bytes) c = static_cast<unsigned char>(rng());
  writer->write_at(0, bytes.data(), size / 2 + 12345);
  writer->write_at(size / 2 + 12345, bytes.data() + size / 2 + 12345, size - (size / 2 + 12345));
  writer->sync_and_close();
  const WriterReport report = writer->report();
  writer.reset();
  EXPECT_TRUE(file.contents() == bytes);
  EXPECT_GT(report.huge_extents, 0) << report.small_extents << " extents stayed in 4 KiB pages";
  const int dir = ::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT_NE(tmpfs_huge_settings(dir).find("shmem_enabled="), std::string::npos);
  ::close(dir);
}

}  // namespace
}  // namespace blockmm::io
