// HDF5 (BSR layout) end to end, label "hdf5": blockmm-convert round trips for inputs and
// products; blockmm's .h5 products against an independent oracle and against its binary
// products; 1..4 MPI ranks giving the same datasets; failed writes leaving no file. HDF5 inputs:
// hdf5_inputs_test.cpp; malformed ones: hdf5_refusals_test.cpp. HDF5 files are read and crafted
// here with the HDF5 C API directly (bsr_files.hpp), never through src/io, so that the checks
// share no code with what they check.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "e2e/hdf5/hdf5_fixture.hpp"
#include "support/sanitizers.hpp"

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// blockmm-convert round trips

template <typename Value>
void round_trip(const RecordBuffer<Value>& records, const std::string& dir, const std::string& tag) {
  SCOPED_TRACE(tag + ": n = " + std::to_string(records.shape.n) + ", m = " + std::to_string(records.shape.m) +
               ", k = " + std::to_string(records.size()));
  const std::string bin = dir + "/" + tag + ".bin";
  const std::string h5 = dir + "/" + tag + ".h5";
  const std::string back = dir + "/" + tag + "-back.bin";
  const std::string copy = dir + "/" + tag + "-copy.hdf5";
  write_bytes(bin, encode(records));
  const std::vector<std::string> width = {"--values", sizeof(Value) == 2 ? "u16" : "u32"};  // k = 0 fits both
  std::vector<std::string> args = width;
  args.insert(args.end(), {bin, h5});
  ASSERT_TRUE(succeeded(run_convert(args)));
  const Bsr expected = expected_bsr(records);
  const Bsr got = read_bsr(h5);
  EXPECT_TRUE(got == expected) << "the HDF5 datasets differ from the records";
  ASSERT_TRUE(succeeded(run_convert({h5, back})));
  EXPECT_TRUE(read_bytes(back) == encode(sorted(records))) << "h5 -> bin is not the sorted binary file";
  ASSERT_TRUE(succeeded(run_convert({"--to", "h5", h5, copy})));  // h5 -> h5 keeps the contents
  EXPECT_TRUE(read_bsr(copy) == expected);
}

TEST_F(Hdf5, ConvertRoundTripsInputs) {
  std::mt19937_64 rng(11);
  for (testing::RandomSpec spec : specs(rng, 12)) {
    spec.shuffle = (rng() & 1) != 0;
    round_trip(testing::random_blocks(spec, rng), work, "input");
  }
}

TEST_F(Hdf5, ConvertRoundTripsProducts) {
  std::mt19937_64 rng(12);
  for (const testing::RandomSpec& spec : specs(rng, 8)) {
    const InputRecords a = testing::random_blocks(spec, rng);
    const InputRecords b = testing::random_blocks(spec, rng);
    round_trip(sparse_oracle(a, b), work, "product");  // uint32, saturated values included
  }
}

TEST_F(Hdf5, SortedBinaryRoundTripIsByteIdentical) {
  std::mt19937_64 rng(13);
  testing::RandomSpec spec = spec_of(60, 3, 0.3, 0.2);
  spec.shuffle = false;  // random_blocks emits row-major order: a sorted file
  const InputRecords a = testing::random_blocks(spec, rng);
  const std::string bin = put("sorted.bin", a);
  ASSERT_TRUE(succeeded(run_convert({bin, work + "/s.h5"})));
  ASSERT_TRUE(succeeded(run_convert({"--to", "bin", work + "/s.h5", work + "/s.out"})));
  EXPECT_TRUE(read_bytes(bin) == read_bytes(work + "/s.out"));
}

TEST_F(Hdf5, ConvertRejectsDuplicatesAndBadFiles) {
  const InputRecords dup_adjacent = make_records(8, 4, {{0, 1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
                                                        {0, 1, std::vector<std::uint16_t>(16, 2)},
                                                        {1, 0, std::vector<std::uint16_t>(16, 3)}});
  const InputRecords dup_apart = make_records(8, 4, {{1, 1, std::vector<std::uint16_t>(16, 1)},
                                                     {0, 0, std::vector<std::uint16_t>(16, 2)},
                                                     {1, 1, std::vector<std::uint16_t>(16, 3)}});
  EXPECT_TRUE(failed_cleanly(run_convert({put("d1.bin", dup_adjacent), out_dir + "/x.h5"}), 3, "blockmm-convert",
                             in_dir + "/d1.bin", "duplicate block (0, 1) at records 0 and 1", out_dir));
  EXPECT_TRUE(failed_cleanly(run_convert({put("d2.bin", dup_apart), out_dir + "/x.h5"}), 3, "blockmm-convert",
                             in_dir + "/d2.bin", "duplicate block (1, 1) at records 0 and 2", out_dir));
  Craft bad = craft_from(dup_apart);  // unsorted indices inside an HDF5 file
  bad.indices = {0, 1, 0};
  bad.indptr = {0, 1, 3};
  write_craft(in_dir + "/bad.h5", bad);
  EXPECT_TRUE(failed_cleanly(run_convert({in_dir + "/bad.h5", out_dir + "/x.bin"}), 3, "blockmm-convert",
                             in_dir + "/bad.h5", "/indices[2] = 0 (block-row 1) is below", out_dir));
  EXPECT_EQ(run_convert({"--to", "pdf", in_dir + "/bad.h5", out_dir + "/x"}).exit_code, 2);
  EXPECT_TRUE(list_dir(out_dir).empty());
}

// blockmm-convert IN IN (a plain binary file) exited 0 and rewrote its input, sorted; a link to
// the input as OUT was replaced by the output (issue 52, item 3). Exit 2, one line, the input
// and the link as they were.
TEST_F(Hdf5, ConvertNeverWritesOverItsInput) {
  std::mt19937_64 rng(14);
  testing::RandomSpec spec = spec_of(40, 4, 0.4);
  spec.shuffle = true;  // unsorted: a rewrite would change its bytes
  const std::string in = put("in.bin", testing::random_blocks(spec, rng));
  const std::vector<std::byte> bytes = read_bytes(in);
  const std::string soft = in_dir + "/soft.bin", hard = in_dir + "/hard.bin";
  ASSERT_EQ(::symlink("in.bin", soft.c_str()), 0);
  ASSERT_EQ(::link(in.c_str(), hard.c_str()), 0);
  ASSERT_TRUE(succeeded(run_convert({in, work + "/in.h5"})));
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {in, in}, {in, soft}, {in, hard}, {soft, in}, {work + "/in.h5", work + "/in.h5"}}) {
    SCOPED_TRACE(from + " -> " + to);
    EXPECT_TRUE(failed_cleanly(run_convert({from, to}), 2, "blockmm-convert", to, "is the input", out_dir));
  }
  EXPECT_TRUE(read_bytes(in) == bytes);
  struct stat st {};
  EXPECT_TRUE(::lstat(soft.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) << "the link was replaced";
  EXPECT_EQ(list_dir(in_dir), (std::vector<std::string>{"hard.bin", "in.bin", "soft.bin"}));
}

// ---------------------------------------------------------------------------------------------
// Products

OutputRecords bsr_records(const Bsr& bsr) {
  OutputRecords out;
  out.shape = {static_cast<std::int32_t>(bsr.ints.at("n")), static_cast<std::int32_t>(bsr.ints.at("m"))};
  const std::int64_t mm = std::int64_t{out.shape.m} * out.shape.m;
  out.bytes.resize(bsr.indices.size() * static_cast<std::size_t>(out.stride()));
  for (std::size_t row = 0; row + 1 < bsr.indptr.size(); ++row)
    for (std::int64_t b = bsr.indptr[row]; b < bsr.indptr[row + 1]; ++b) {
      std::byte* rec = out.record(b);
      set_record_index(rec, static_cast<std::int32_t>(row), bsr.indices[b]);
      std::memcpy(rec + 8, bsr.data.data() + b * mm, static_cast<std::size_t>(4 * mm));
    }
  return out;
}

TEST_F(Hdf5, ProductsMatchOracleAndBinary) {
  std::mt19937_64 rng(21);
  int q = 0;
  for (const testing::RandomSpec& spec : specs(rng, 6)) {
    const InputRecords a = testing::random_blocks(spec, rng);
    const InputRecords b = testing::random_blocks(spec, rng);
    const std::string tag = std::to_string(q++);
    SCOPED_TRACE("case " + tag + ": n = " + std::to_string(spec.n) + ", m = " + std::to_string(spec.m));
    const std::string pa = put("A" + tag + ".bin", a);
    const std::string pb = put("B" + tag + ".bin", b);
    const OutputRecords oracle = sparse_oracle(a, b);
    const std::string backend = q % 2 ? "reference" : "cpu";
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, work + "/C.bin"})));
    ASSERT_TRUE(succeeded(run_blockmm({"-q", "--backend", backend, pa, pb, work + "/C.h5"})));
    const Bsr got = read_bsr(work + "/C.h5");
    EXPECT_TRUE(got == expected_bsr(oracle)) << "C.h5 differs from the oracle";
    EXPECT_EQ(got.value_bytes, 4u);
    EXPECT_EQ(bsr_records(got).bytes, oracle.bytes);
    ASSERT_TRUE(succeeded(run_convert({work + "/C.h5", work + "/C-from-h5.bin"})));
    EXPECT_TRUE(read_bytes(work + "/C.bin") == read_bytes(work + "/C-from-h5.bin"));
  }
}

TEST_F(Hdf5, FormatOptionAndExtensions) {
  std::mt19937_64 rng(22);
  const InputRecords a = testing::random_blocks(spec_of(24, 4, 0.4), rng);
  const std::string pa = put("A.bin", a);
  const Bsr expected = expected_bsr(sparse_oracle(a, a));
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", "h5", pa, pa, work + "/C.out"})));
  EXPECT_TRUE(read_bsr(work + "/C.out") == expected);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pa, work + "/C.hdf5"})));
  EXPECT_TRUE(read_bsr(work + "/C.hdf5") == expected);
  ASSERT_TRUE(succeeded(run_blockmm({"-q", "--format", "bin", pa, pa, work + "/C.h5"})));
  OutputRecords bin;
  EXPECT_EQ(load(work + "/C.h5", bin), "");  // --format bin wins over the extension
}

TEST_F(Hdf5, MpiRanksWriteIdenticalDatasets) {
  std::mt19937_64 rng(31);
  testing::RandomSpec spec = spec_of(66, 3, 0.25, 0.2);
  const InputRecords a = testing::random_blocks(spec, rng);
  const InputRecords b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  const Bsr expected = expected_bsr(sparse_oracle(a, b));
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string out = work + "/C" + std::to_string(ranks) + ".h5";
    ASSERT_TRUE(succeeded(run_mpi(ranks, {"-q", pa, pb, out})));
    EXPECT_TRUE(read_bsr(out) == expected);
  }
  // More ranks than block-rows: some ranks hold no rows and write nothing but metadata.
  const InputRecords tiny = testing::random_blocks(spec_of(6, 2, 0.7), rng);
  const std::string pt = put("T.bin", tiny);
  ASSERT_TRUE(succeeded(run_mpi(4, {"-q", pt, pt, work + "/T.h5"})));
  EXPECT_TRUE(read_bsr(work + "/T.h5") == expected_bsr(sparse_oracle(tiny, tiny)));
}

// Each rank copies indptr, indices and values into a shared map of the file with several
// threads (io/mapped_writer); the datasets are the oracle's for every thread count, chunk size
// and rank count, and the same as written through pwrite.
TEST_F(Hdf5, WriterThreadsAndChunkSizesGiveTheOracle) {
  std::mt19937_64 rng(1617);
  testing::RandomSpec spec = spec_of(768, 16, 0.5, 0.1);  // about 2 MB of values
  const InputRecords a = testing::random_blocks(spec, rng);
  const InputRecords b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a);
  const std::string pb = put("B.bin", b);
  const Bsr expected = expected_bsr(sparse_oracle(a, b));
  const std::string out = work + "/C.h5";
  for (const char* threads : testing::sweep({"1", "2", "8"})) {
    for (const char* chunk : {"4K", "1M", "256M"}) {
      SCOPED_TRACE(std::string(threads) + " writer threads, --chunk-size " + chunk);
      const std::string env = std::string("BLOCKMM_WRITE_THREADS=") + threads;
      RunOptions options;
      options.set_env = {env};
      ASSERT_TRUE(succeeded(run_blockmm({"-q", "--chunk-size", chunk, pa, pb, out}, options)));
      EXPECT_TRUE(read_bsr(out) == expected);
      for (int ranks : {2, 3}) {
        if (std::string(chunk) == "256M") continue;
        SCOPED_TRACE(std::to_string(ranks) + " ranks");
        ASSERT_TRUE(succeeded(run_mpi(ranks, {"-q", "--threads", "1", "--chunk-size", chunk, pa, pb, out}, {env})));
        EXPECT_TRUE(read_bsr(out) == expected);
      }
    }
  }
  RunOptions pwrite;
  pwrite.set_env = {"BLOCKMM_IO=pwrite"};
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pb, out}, pwrite)));
  EXPECT_TRUE(read_bsr(out) == expected);
  EXPECT_EQ(list_dir(work), std::vector<std::string>{"C.h5"}) << "a temporary file was left";
}

// ---------------------------------------------------------------------------------------------
// Failed writes leave nothing behind

// Runs `argv` with the file size limited to `blocks` * 512 bytes and SIGXFSZ ignored, so that
// writes past the limit fail with EFBIG instead of killing the process.
RunResult run_with_file_limit(int blocks, const std::vector<std::string>& argv) {
  std::vector<std::string> full{"/bin/sh", "-c", "trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec \"$@\"",
                                "sh"};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_process(full, with_mpi_env());
}

TEST_F(Hdf5, FailedWritesLeaveNoFile) {
  // The file size limit also binds mpiexec's own session files, so only plain runs are limited
  // here; under MPI a failed rank's error reaches every rank through the same agreement as any
  // other failure.
  std::mt19937_64 rng(51);
  const InputRecords a = testing::random_blocks(spec_of(400, 8, 0.3), rng);  // a product of about 640 kB
  const std::string pa = put("A.bin", a);
  const std::string out = out_dir + "/C.h5";
  for (int blocks : {1, 16, 256}) {  // metadata fails to fit, then the datasets' storage
    SCOPED_TRACE(std::to_string(blocks) + " blocks of 512 bytes");
    EXPECT_TRUE(failed_cleanly(run_with_file_limit(blocks, {blockmm_bin(), "-q", pa, pa, out}), 4, "blockmm", out,
                               "File too large", out_dir));
  }
  ASSERT_TRUE(succeeded(run_blockmm({"-q", pa, pa, work + "/C.bin"})));
  EXPECT_TRUE(failed_cleanly(run_with_file_limit(256, {convert_bin(), work + "/C.bin", out}), 4, "blockmm-convert",
                             out, "File too large", out_dir));
}

}  // namespace
}  // namespace blockmm::e2e
