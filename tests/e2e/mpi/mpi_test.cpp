// blockmm under a real mpiexec (1 to 5 ranks, oversubscribed), through mpirun_blockmm.sh: the
// output file is byte-identical for every rank count, to the run without mpiexec, to the
// reference backend, to an independent oracle and to the COL380 gold outputs; ranks without rows
// work; errors found by one rank end every rank with the same code and one message, leaving no
// file. The distribution methods: distribution_test.cpp; --stats: stats_test.cpp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "e2e/mpi/mpi_fixture.hpp"
#include "support/dense_reference.hpp"

#ifndef BLOCKMM_DEFAULT_COL380_DIR
#define BLOCKMM_DEFAULT_COL380_DIR ""
#endif

namespace blockmm::e2e {
namespace {

// ---------------------------------------------------------------------------------------------
// Identical outputs.

TEST_F(Mpi, RandomInputsGiveIdenticalFilesForOneToFourRanks) {
  std::mt19937_64 rng(4242);
  std::vector<testing::RandomSpec> specs;
  for (int c = 0; c < 3; ++c) specs.push_back(testing::random_spec(rng, 24));
  testing::RandomSpec medium;  // enough rows and blocks that every rank gets real work
  medium.n = 1020;
  medium.m = 4;
  medium.density = 0.03;
  medium.max_value = 65535;
  specs.push_back(medium);
  for (std::size_t c = 0; c < specs.size(); ++c) {
    const testing::RandomSpec& spec = specs[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m) +
                 " density=" + std::to_string(spec.density));
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    if (spec.n <= 200) {
      ASSERT_TRUE(encode(testing::dense_product(a, b)) == expected) << "the oracles disagree";
    }
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  }
}

// Each rank copies its panel into a shared map of the output with several threads
// (io/mapped_writer): ranks' ranges meet inside pages, chunks split across threads.
TEST_F(Mpi, WriterThreadsAndChunkSizesGiveIdenticalFiles) {
  std::mt19937_64 rng(1616);
  testing::RandomSpec spec;
  spec.n = 768;
  spec.m = 16;
  spec.density = 0.5;  // 2.4 MB of C: chunks large enough to split
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("A.bin", a), pb = put("B.bin", b);
  const OutputRecords oracle = sparse_oracle(a, b);
  const std::vector<std::byte> expected = encode(oracle);
  const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
  for (const char* threads : {"1", "2", "8"}) {
    for (const char* chunk : {"64K", "1M"}) {
      SCOPED_TRACE(std::string(threads) + " writer threads, --chunk-size " + chunk);
      expect_identical(pa, pb, plain, {2, 3}, {"--chunk-size", chunk},
                       {std::string("BLOCKMM_WRITE_THREADS=") + threads});
    }
  }
  // pwrite (the writer before the map) gives the same bytes.
  expect_identical(pa, pb, plain, {2}, {}, {"BLOCKMM_IO=pwrite"});
}

TEST_F(Mpi, SkewedInputsGiveIdenticalFiles) {
  std::mt19937_64 rng(99);
  const InputRecords a = skewed_blocks(512, 4, 1.2, 1500, 0, 65535, rng);  // row 0 heaviest, empty tail rows
  const InputRecords b = skewed_blocks(512, 4, 0.8, 1200, 1, 1023, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
  const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
  expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  // The same with the operands swapped (then B is the skewed one) and in small chunks.
  const std::vector<std::byte> swapped = plain_product(pb, pa);
  EXPECT_TRUE(swapped == encode(sparse_oracle(b, a)));
  expect_identical(pb, pa, swapped, {2, 4}, {"--chunk-size", "1K"});
}

TEST_F(Mpi, MoreRanksThanBlockRows) {
  std::mt19937_64 rng(5);
  testing::RandomSpec spec;
  spec.n = 16;
  spec.m = 4;  // 4 block-rows for 5 ranks
  spec.density = 0.7;
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const std::string pa = put("a.bin", a), pb = put("b.bin", b);
  const std::vector<std::byte> plain = plain_product(pa, pb, nullptr);
  EXPECT_TRUE(plain == encode(testing::dense_product(a, b)));
  expect_identical(pa, pb, plain, {5});
  // One block-row only: four of five ranks hold nothing.
  spec.n = 7;
  spec.m = 7;
  spec.density = 1;
  const InputRecords one_a = testing::random_blocks(spec, rng), one_b = testing::random_blocks(spec, rng);
  const std::string qa = put("one_a.bin", one_a), qb = put("one_b.bin", one_b);
  const std::vector<std::byte> one = plain_product(qa, qb, nullptr);
  EXPECT_TRUE(one == encode(testing::dense_product(one_a, one_b)));
  expect_identical(qa, qb, one, {5});
}

TEST_F(Mpi, EmptyInputsGiveAHeaderOnlyFile) {
  const InputRecords empty = make_records(16, 4, {});
  const InputRecords zeros = make_records(16, 4, {{1, 1, std::vector<std::uint16_t>(16, 0)}});
  const InputRecords some =
      make_records(16, 4, {{0, 1, std::vector<std::uint16_t>(16, 3)}, {1, 1, std::vector<std::uint16_t>(16, 5)}});
  const std::string pe = put("empty.bin", empty), pz = put("zeros.bin", zeros), ps = put("some.bin", some);
  const std::vector<std::byte> header_only = encode_with_header(16, 4, 0, {});
  for (const auto& [x, y] : std::vector<std::pair<std::string, std::string>>{{pe, pe}, {pe, ps}, {ps, pz}}) {
    SCOPED_TRACE(x + " x " + y);
    const std::vector<std::byte> plain = plain_product(x, y, &header_only);
    for (const auto& env : kNodeModes)
      expect_identical(x, y, plain, x == pe && y == pe ? rank_counts({1, 2, 3, 4}) : std::vector<int>{3}, {}, env);
  }
}

// Issue 17: a few hundred blocks of n = 2^27 (m = 1, 2, 4) run on compact labels of the indices
// in use; the files must be those of the oracle (over record pairs: memory by records), of the
// reference backend, and the same for 1, 2 and 3 ranks. HDF5 output at n = 2^22 (its /indptr
// holds n/m + 1 entries in the file), 1 rank and 2, read back through blockmm-convert.
TEST_F(Mpi, HugeNWithFewBlocksGivesIdenticalFiles) {
  std::mt19937_64 rng(1727);
  for (const std::int32_t m : {1, 2, 4}) {
    for (const std::int32_t n : {std::int32_t{1} << 27, std::int32_t{1} << 22}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", m = " + std::to_string(m));
      const std::int32_t p = n / m;
      std::vector<std::int32_t> pool = {0, p - 1};
      std::uniform_int_distribution<std::int32_t> any(1, p - 2);
      while (pool.size() < 20) pool.push_back(any(rng));
      const InputRecords a = blocks_among(n, m, pool, 150, rng), b = blocks_among(n, m, pool, 150, rng);
      const std::string pa = put("a.bin", a), pb = put("b.bin", b);
      const std::vector<std::byte> expected = encode(pair_oracle(a, b));
      if (n == std::int32_t{1} << 27) {
        const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
        expect_identical(pa, pb, plain, {2, 3});
        continue;
      }
      // The datasets, not the files' bytes, are compared: HDF5 stamps objects with their time.
      const std::string one = scratch / "one.h5", two = out_dir + "/two.h5";
      ASSERT_TRUE(plain_succeeded(run_blockmm({"-q", "--backend", "reference", pa, pb, one})));
      const MpiRun m2 = run_mpi(2, {"-q", "--threads", "1", pa, pb, two});
      ASSERT_TRUE(mpi_succeeded(m2));
      const std::string bin = blockmm_bin();
      for (const std::string& h5 : {one, two}) {
        const std::string back = scratch / "back.bin";
        const RunResult convert = run_process({bin.substr(0, bin.rfind('/') + 1) + "blockmm-convert", h5, back});
        ASSERT_EQ(convert.exit_code, 0) << convert.describe();
        EXPECT_TRUE(read_bytes(back) == expected) << h5 << ": the HDF5 product differs from the oracle";
        std::remove(back.c_str());
      }
      std::remove(two.c_str());
    }
  }
}

// BLOCKMM_RELABEL=on runs the relabelled pipeline on ordinary random inputs (odd m, empty rows,
// zero blocks, saturation): every file must be the one of the plain pipeline (off), for the
// cpu and reference backends and for 1 to 3 ranks.
TEST_F(Mpi, ForcedRelabellingGivesTheSameFiles) {
  std::mt19937_64 rng(1728);
  for (int c = 0; c < 4; ++c) {
    const testing::RandomSpec spec = testing::random_spec(rng, 24);
    SCOPED_TRACE("case " + std::to_string(c) + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m));
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    ::setenv("BLOCKMM_RELABEL", "off", 1);
    const std::vector<std::byte> off = plain_product(pa, pb, &expected);
    ::setenv("BLOCKMM_RELABEL", "on", 1);
    const std::vector<std::byte> on = plain_product(pa, pb, &expected);
    EXPECT_TRUE(on == off);
    expect_identical(pa, pb, off, {2, 3});
    ::unsetenv("BLOCKMM_RELABEL");
  }
}

// ---------------------------------------------------------------------------------------------
// The COL380 course data.

std::string col380_dir() { return env_or("BLOCKMM_COL380_DIR", BLOCKMM_DEFAULT_COL380_DIR); }

TEST_F(Mpi, Col380PairsGiveIdenticalFilesAndMatchTheGold) {
  const std::string dir = col380_dir();
  if (!path_exists(dir + "/pairs.tsv"))
    GTEST_SKIP() << "the shared COL380 data is absent (no " << dir << "/pairs.tsv; a user's clone has no ../shared)";
  struct Case {
    std::string a, b, gold;
  };
  // Every gold pair, an m = 8 pair without gold, and A x A from one file.
  const std::vector<Case> cases = {
      {"aniruddha-deb/test_A.mat", "aniruddha-deb/test_B.mat", "aniruddha-deb/test_C_gold.mat"},
      {"alexriderspy/m4_input1", "alexriderspy/m4_input2", "alexriderspy/m4_output1_gold"},
      {"alexriderspy/m2_input1.bin", "alexriderspy/m2_input2.bin", "alexriderspy/m2_out_true_gold.bin"},
      {"alexriderspy/m1_input1", "alexriderspy/m1_input2", "alexriderspy/m1_output1_gold"},
      {"nischaydiwan/98625ce_input1", "nischaydiwan/98625ce_input2", ""},
      {"nischaydiwan/4eeefc3_input2_n8192", "nischaydiwan/4eeefc3_input2_n8192", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a + " x " + c.b);
    const std::string pa = dir + "/" + c.a, pb = dir + "/" + c.b;
    InputRecords a, b;
    ASSERT_EQ(load(pa, a), "");
    ASSERT_EQ(load(pb, b), "");
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    if (!c.gold.empty()) {
      OutputRecords gold, got;
      ASSERT_EQ(load(dir + "/" + c.gold, gold), "");
      ASSERT_EQ(parse(plain, got), "");
      EXPECT_EQ(testing::compare_outputs(gold, got), "");
    }
    expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4}));
  }
}

// ---------------------------------------------------------------------------------------------
// Collective errors.

TEST_F(Mpi, OutOfRangeIndexInTheLastRecordStopsEveryRank) {
  const InputRecords good_a = medium_input(1), good_b = medium_input(2);
  const std::int64_t last = good_a.size() - 1;
  InputRecords bad = good_a;
  set_record_index(bad.record(last), 100, record_col(bad.record(last)));  // p = 100
  const std::string pa = put("a.bin", good_a), pb = put("b.bin", good_b), pbad = put("bad.bin", bad);
  for (int n : rank_counts({2, 3, 4})) {
    SCOPED_TRACE("mpiexec -n " + std::to_string(n));
    EXPECT_TRUE(every_rank_failed(run_mpi(n, {"-q", "--threads", "1", pbad, pb, out_dir + "/C.bin"}), 3, pbad,
                                  {"record " + std::to_string(last), "100"}, out_dir));
    EXPECT_TRUE(every_rank_failed(run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"}), 3, pbad,
                                  {"record " + std::to_string(last), "100"}, out_dir));
  }
}

TEST_F(Mpi, DuplicateReadByDifferentRanksStopsEveryRank) {
  const InputRecords good_a = medium_input(3), good_b = medium_input(4);
  const std::int64_t last = good_a.size() - 1;
  InputRecords bad = good_a;
  const std::int32_t i = record_row(bad.record(0)), j = record_col(bad.record(0));
  set_record_index(bad.record(last), i, j);  // record 0 is read by rank 0, the last by the last rank
  const std::string pa = put("a.bin", good_a), pb = put("b.bin", good_b), pbad = put("dup.bin", bad);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  // The message of a plain run, word for word, on every rank count and node mode.
  const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
  ASSERT_EQ(plain.exit_code, 3) << plain.describe();
  const std::string plain_line = split_lines(plain.err).at(0);
  for (const auto& env : kNodeModes) {
    for (int n : rank_counts({2, 3, 4})) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n) + " " + env.front());
      const MpiRun left = run_mpi(n, {"-q", "--threads", "1", pbad, pb, out_dir + "/C.bin"}, env);
      EXPECT_TRUE(every_rank_failed(left, 3, pbad, {"duplicate", pair, "0", std::to_string(last)}, out_dir));
      const MpiRun right = run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"}, env);
      EXPECT_TRUE(every_rank_failed(right, 3, pbad, {"duplicate", pair, "0", std::to_string(last)}, out_dir));
      EXPECT_NE(right.run.err.find(plain_line), std::string::npos) << "not the plain run's message: " << plain_line
                                                                   << "\n" << right.describe();
    }
  }
}

TEST_F(Mpi, HeaderAndOutputErrorsStopEveryRank) {
  const InputRecords a = medium_input(5);
  testing::RandomSpec other;
  other.n = 404;
  other.m = 4;
  std::mt19937_64 rng(6);
  const std::string pa = put("a.bin", a), pother = put("other.bin", testing::random_blocks(other, rng));
  std::vector<std::byte> truncated = encode(a);
  truncated.resize(truncated.size() - 3);
  const std::string ptrunc = in_dir + "/truncated.bin";
  write_bytes(ptrunc, truncated);
  const std::string out = out_dir + "/C.bin";
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, pother, out}), 3, pother, {pa}, out_dir));
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, ptrunc, out}), 3, ptrunc, {"truncated"}, out_dir));
  const std::string nowhere = out_dir + "/missing/C.bin";
  EXPECT_TRUE(every_rank_failed(run_mpi(3, {"-q", pa, pa, nowhere}), 4, nowhere, {}, out_dir));
}

}  // namespace
}  // namespace blockmm::e2e
