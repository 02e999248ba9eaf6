// blockmm's ways of spreading a product over ranks under a real mpiexec, each byte-identical to
// the plain run: simulated nodes, rows shared with neighbouring ranks, teams of backends in a
// rank, the ranks of a node reading one shared copy of B (and what it leaves in /dev/shm), and
// ranks building whole inputs; with their collective errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "e2e/mpi/mpi_fixture.hpp"
#include "support/dense_reference.hpp"

namespace blockmm::e2e {
namespace {

TEST_F(Mpi, SimulatedNodesGiveIdenticalFilesBinaryAndHdf5) {
  std::mt19937_64 rng(1616);
  std::vector<std::pair<std::string, testing::RandomSpec>> cases;
  cases.emplace_back("random", testing::random_spec(rng, 24));
  testing::RandomSpec ones;
  ones.n = 200;
  ones.m = 1;
  ones.density = 0.05;
  cases.emplace_back("m = 1", ones);
  testing::RandomSpec saturating;  // every value 65535: two products already exceed 2^32 - 1
  saturating.n = 96;
  saturating.m = 3;
  saturating.density = 0.3;
  cases.emplace_back("saturating", saturating);
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name + ": n=" + std::to_string(spec.n) + " m=" + std::to_string(spec.m));
    InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    if (name == "saturating") {
      saturate(a);
      saturate(b);
    }
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const OutputRecords oracle = sparse_oracle(a, b);
    if (name == "saturating") {
      bool saturated = false;
      for (std::int64_t q = 0; q < oracle.size() && !saturated; ++q) saturated = oracle.values(q)[0] == 0xFFFFFFFFu;
      ASSERT_TRUE(saturated) << "the saturating case does not saturate";
    }
    const std::vector<std::byte> expected = encode(oracle);
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (const auto& env : kNodeModes) expect_identical(pa, pb, plain, rank_counts({1, 2, 3, 4, 5}), {}, env);

    // HDF5 in and out. HDF5 stamps object headers with the time (two plain runs differ in
    // those bytes), so the products are compared as their COL380 conversion, byte for byte.
    const std::string ha = in_dir + "/a.h5", hb = in_dir + "/b.h5";
    convert(pa, ha);
    convert(pb, hb);
    for (const auto& env : kNodeModes) {
      for (int n : rank_counts({1, 2, 3, 5})) {
        SCOPED_TRACE("HDF5, mpiexec -n " + std::to_string(n) + " " + env.front());
        const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
        ASSERT_TRUE(mpi_succeeded(run_mpi(n, {"-q", "--threads", "1", ha, hb, out}, env)));
        convert(out, back);
        EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product under " << n << " ranks differs from the plain run";
        std::remove(out.c_str());
        std::remove(back.c_str());
      }
    }
    std::remove(ha.c_str());
    std::remove(hb.c_str());
  }
}

// Ranks of one node share the rows at the ends of their panels (driver/shared_rows.hpp): a
// neighbour may compute them and writes them at their place in the file. BLOCKMM_SHARE_ROWS=give
// makes each rank claim its neighbours' regions before its own panel, so that most shared tiles
// are computed by the neighbour; the files must be the plain run's all the same, binary and
// HDF5, whatever the chunk size (granules follow it), and --stats says who computed what.
TEST_F(Mpi, RowsSharedWithNeighboursGiveIdenticalFiles) {
  std::mt19937_64 rng(3131);
  std::vector<std::pair<std::string, testing::RandomSpec>> cases;
  testing::RandomSpec four;
  four.n = 1020;
  four.m = 4;
  four.density = 0.03;
  four.max_value = 65535;
  cases.emplace_back("m = 4", four);
  testing::RandomSpec saturating;  // m = 8, every value 65535: sums saturate
  saturating.n = 400;
  saturating.m = 8;
  saturating.density = 0.1;
  cases.emplace_back("saturating m = 8", saturating);
  testing::RandomSpec awkward;
  awkward.n = 335;  // 67 block-rows
  awkward.m = 5;
  awkward.density = 0.08;
  awkward.zero_block_fraction = 0.1;
  cases.emplace_back("m = 5, zero blocks", awkward);
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    const CaseFiles files = case_files(name, spec, rng);
    const InputRecords &a = files.a, &b = files.b;
    const std::string &pa = files.pa, &pb = files.pb;
    const std::vector<std::byte>& plain = files.plain;
    for (const char* chunk : {"16K", "4M"}) {
      if (name != "m = 4" && std::string(chunk) == "4M") continue;  // one case covers large chunks
      SCOPED_TRACE(std::string("--chunk-size ") + chunk);
      expect_identical(pa, pb, plain, rank_counts({2, 3, 4}), {"--chunk-size", chunk}, {"BLOCKMM_SHARE_ROWS=give"});
    }
    // Who computed what: with "give", neighbours computed shared tiles; with sharing off, none.
    for (const char* mode : {"give", "0"}) {
      SCOPED_TRACE(std::string("BLOCKMM_SHARE_ROWS=") + mode);
      const std::string out = out_dir + "/C.bin";
      const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--stats=json", pa, pb, out},
                               {std::string("BLOCKMM_SHARE_ROWS=") + mode});
      ASSERT_TRUE(mpi_succeeded(m));
      EXPECT_TRUE(read_bytes(out) == plain);
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      const bool sharing = std::string(mode) == "give";
      EXPECT_EQ(j.at("shared_rows").get<bool>(), sharing);
      std::int64_t helped = 0;
      for (const auto& entry : j.at("per_rank")) helped += entry.at("tiles_for_neighbours").get<std::int64_t>();
      if (sharing) {
        EXPECT_GT(helped, 0);
      } else {
        EXPECT_EQ(helped, 0);
      }
      EXPECT_LT(helped, static_cast<std::int64_t>(sparse_oracle(a, b).size()));
      std::remove(out.c_str());
    }
    // HDF5: the products compared as their COL380 conversion (HDF5 stamps times in its headers).
    for (int n : {2, 3}) {
      SCOPED_TRACE("HDF5, mpiexec -n " + std::to_string(n));
      const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
      ASSERT_TRUE(mpi_succeeded(run_mpi(n, {"-q", "--threads", "1", "--chunk-size", "16K", pa, pb, out},
                                        {"BLOCKMM_SHARE_ROWS=give"})));
      convert(out, back);
      EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product under " << n << " ranks differs from the plain run";
      std::remove(out.c_str());
      std::remove(back.c_str());
    }
  }
}

// A rank that drives several backends (a team: one a GPU; BLOCKMM_WORKERS runs the same paths
// with host backends) splits its rows over them, or B's block-columns into panels
// (BLOCKMM_B_PANELS; more panels than backends: streamed, built twice). Every layout gives the
// plain run's bytes: 1 to 3 ranks, nodes simulated or not, cpu and reference backends, m from 1
// to 64, skewed rows, saturation, empty rows and columns, and HDF5.
TEST_F(Mpi, TeamsOfBackendsGiveIdenticalFiles) {
  std::mt19937_64 rng(39);
  const std::vector<std::vector<std::string>> layouts{{"BLOCKMM_WORKERS=2"},
                                                      {"BLOCKMM_WORKERS=3", "BLOCKMM_B_PANELS=3"},
                                                      {"BLOCKMM_WORKERS=2", "BLOCKMM_B_PANELS=5"},
                                                      {"BLOCKMM_B_PANELS=4"}};
  struct Case {
    std::string name;
    InputRecords a, b;
  };
  std::vector<Case> cases;
  for (const std::int32_t m : {1, 5, 64}) {
    testing::RandomSpec spec;
    spec.m = m;
    spec.n = m * (m >= 64 ? 6 : 40);
    spec.density = 0.2;
    spec.empty_row_fraction = 0.2;
    spec.empty_col_fraction = 0.2;
    spec.zero_block_fraction = 0.1;
    cases.push_back({"m=" + std::to_string(m), testing::random_blocks(spec, rng), testing::random_blocks(spec, rng)});
  }
  cases.push_back({"skewed", skewed_blocks(512, 4, 1.2, 1500, 0, 65535, rng), skewed_blocks(512, 4, 0.8, 1200, 1, 1023, rng)});
  {
    testing::RandomSpec spec = testing::random_spec(rng, 24);
    Case c{"saturating", testing::random_blocks(spec, rng), testing::random_blocks(spec, rng)};
    saturate(c.a);
    saturate(c.b);
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string pa = put("a.bin", c.a), pb = put("b.bin", c.b);
    const std::vector<std::byte> expected = encode(sparse_oracle(c.a, c.b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (const std::vector<std::string>& layout : layouts) {
      SCOPED_TRACE(layout.back());
      for (const char* backend : {"cpu", "reference"}) {
        if (std::string(backend) == "reference" && c.name != "m=5") continue;  // the oracle is slow
        expect_identical(pa, pb, plain, rank_counts({1, 3}), {"--backend", backend}, layout);
      }
      std::vector<std::string> simulated = layout;
      simulated.push_back("BLOCKMM_SIMULATE_NODES=1");
      expect_identical(pa, pb, plain, rank_counts({2}), {}, simulated);
    }
  }
  // HDF5: the team's writes through the HDF5 writer, read back as the binary product.
  const Case& c = cases[1];
  const std::string pa = put("a.bin", c.a), pb = put("b.bin", c.b);
  const std::vector<std::byte> plain = plain_product(pa, pb);
  for (int n : rank_counts({1, 2})) {
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", pa, pb, out_dir + "/C.h5"}, {"BLOCKMM_WORKERS=3", "BLOCKMM_B_PANELS=7"});
    ASSERT_TRUE(mpi_succeeded(m));
    convert(out_dir + "/C.h5", out_dir + "/C.bin");
    EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == plain) << n << " ranks";
    std::remove((out_dir + "/C.h5").c_str());
    std::remove((out_dir + "/C.bin").c_str());
  }
}

// Random layouts of the one rank pipeline (issue 51), each the plain run's bytes: 1 to 4 ranks,
// nodes simulated or not, rows shared with the neighbours or not (given first), one copy of B a
// node or not, teams of 1 to 3 backends, B in panels asked for, a --host-memory that B is past
// (read from its file in panels), whole inputs (the reference backend's), HDF5 inputs (whose
// reads are not thread-safe), cpu and reference backends; the plan combines what it can and
// refuses the rest, so every layout runs. A few featured layouts first (each capability taken
// at least once, and with the others), then random ones; the stats say what each took.
TEST_F(Mpi, RandomLayoutsOfTheRankPipelineGiveThePlainRunsBytes) {
  std::mt19937_64 rng(5151);
  const auto pick = [&rng](std::initializer_list<const char*> choices) {
    return std::string(*(choices.begin() + static_cast<std::ptrdiff_t>(rng() % choices.size())));
  };
  struct Layout {
    int ranks;
    std::string backend, nodes, rows, share_b, workers, panels, whole;
    bool past_memory, hdf5;
  };
  // The first case's A reaches every row of B (so that a node may share B), the others' is thinner
  // (so that a host memory may hold A and not B).
  const std::vector<std::vector<Layout>> featured{
      {{3, "cpu", "0", "give", "1", "1", "", "0", false, false},     // rows shared
       {2, "cpu", "0", "0", "1", "2", "", "0", false, false},        // one B a node, read by a team
       {3, "reference", "0", "1", "1", "1", "", "1", false, false}}, // whole inputs (rows refused)
      {{2, "cpu", "0", "1", "1", "1", "", "0", true, false},         // B from its file (sharing refused)
       {4, "cpu", "1", "0", "1", "3", "", "0", true, true},          // across nodes: panels from its records
       {2, "cpu", "1", "give", "1", "3", "5", "0", false, true}},    // panels asked of a team
      {{1, "cpu", "0", "0", "1", "2", "", "0", true, true}}};        // one rank, a team, B from an HDF5 file
  int streamed = 0, shared_rows = 0, shared_b = 0, whole = 0, teams = 0;
  const std::vector<int> counts = rank_counts({1, 2, 3, 4});
  for (int c = 0; c < 3; ++c) {
    testing::RandomSpec spec = testing::random_spec(rng, 30);
    spec.n = std::max(spec.n, 16 * spec.m);  // enough rows for a thin A to hold blocks
    spec.density = std::max(spec.density, 0.2);
    if (c == 0) spec.density = 0.5, spec.empty_col_fraction = spec.empty_row_fraction = spec.zero_value_fraction = 0;
    testing::RandomSpec thin = spec;
    thin.density = c == 0 ? spec.density : spec.density / 4;
    const InputRecords a = testing::random_blocks(thin, rng), b = testing::random_blocks(spec, rng);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const OutputRecords product = sparse_oracle(a, b);
    ASSERT_GT(product.size(), 0) << "an empty product tests no layout";
    const std::vector<std::byte> expected = encode(product);
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    const std::string hb = in_dir + "/b.h5";
    convert(pb, hb);
    for (int trial = 0; trial < 7; ++trial) {
      const std::size_t f = static_cast<std::size_t>(trial);
      const Layout l = f < featured[static_cast<std::size_t>(c)].size() ? featured[static_cast<std::size_t>(c)][f]
                                           : Layout{counts[rng() % counts.size()], pick({"cpu", "cpu", "reference"}),
                                                    pick({"0", "0", "1"}), pick({"0", "1", "give"}), pick({"0", "1"}),
                                                    pick({"1", "1", "2", "3"}), pick({"", "", "2", "5"}), pick({"0", "1"}),
                                                    rng() % 2 == 0, rng() % 4 == 0};
      if (std::find(counts.begin(), counts.end(), l.ranks) == counts.end()) continue;
      const std::vector<std::string> env{"BLOCKMM_SIMULATE_NODES=" + l.nodes, "BLOCKMM_SHARE_ROWS=" + l.rows,
                                         "BLOCKMM_SHARE_B=" + l.share_b,      "BLOCKMM_WORKERS=" + l.workers,
                                         "BLOCKMM_B_PANELS=" + l.panels,      "BLOCKMM_WHOLE_INPUTS=" + l.whole};
      std::vector<std::string> args{"-q", "--threads", "1", "--chunk-size", "16K", "--backend", l.backend, "--stats=json"};
      if (l.past_memory) {  // room for A's build (at most 4 bytes a record byte, 16 a block-row), two
        // chunks and a quarter of B's records: B's build (at least twice its records) is past it
        const auto bytes = [](const std::string& path) { return static_cast<std::int64_t>(read_bytes(path).size()); };
        args.insert(args.end(), {"--host-memory", std::to_string(5 * bytes(pa) + 48 * (spec.n / spec.m) + 2 * 16384 + bytes(pb) / 4)});
      }
      args.insert(args.end(), {pa, l.hdf5 ? hb : pb, out_dir + "/C.bin"});
      std::string described = std::to_string(l.ranks) + " ranks:";
      for (const std::string& word : env) described += " " + word;
      for (const std::string& word : args) described += " " + word;
      SCOPED_TRACE(described);
      const MpiRun m = run_mpi(l.ranks, args, env);
      ASSERT_TRUE(mpi_succeeded(m));
      EXPECT_TRUE(read_bytes(out_dir + "/C.bin") == plain) << "the product differs from the plain run";
      std::remove((out_dir + "/C.bin").c_str());
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      const std::string layout = j.at("team").at("layout");
      streamed += layout.find("read from its file") != std::string::npos ? 1 : 0;
      teams += j.at("team").at("backends").size() > 1 ? 1 : 0;
      shared_rows += j.at("shared_rows").get<bool>() ? 1 : 0;
      shared_b += j.at("b_shared_on_node").get<bool>() ? 1 : 0;
      whole += j.at("distribution") == "whole inputs on every rank" ? 1 : 0;
    }
  }
  std::cout << "[ info ] B from its file " << streamed << ", teams " << teams << ", rows shared " << shared_rows
            << ", B shared on a node " << shared_b << ", whole inputs " << whole << "\n";
  EXPECT_GT(streamed, 0);
  EXPECT_GT(teams, 0);
#ifndef BLOCKMM_TEST_ASAN  // (which runs 2 and 4 ranks only)
  EXPECT_GT(shared_rows, 0);
  EXPECT_GT(shared_b, 0);
  EXPECT_GT(whole, 0);
#endif
}

// Files named blockmm-* in /dev/shm that are there now and still a second later.
std::vector<std::string> lasting_shared_files() {
  const auto list = [] {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec))
      if (entry.path().filename().string().rfind("blockmm-", 0) == 0) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> first = list();
  if (first.empty()) return first;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::vector<std::string> second = list();
  std::vector<std::string> both;
  std::set_intersection(first.begin(), first.end(), second.begin(), second.end(), std::back_inserter(both));
  return both;
}

// Ranks of one node that each need all of B read one copy of it, read and built by the node's
// first rank alone (driver/shared_right_operand.hpp): the plain run's bytes on 2-4 ranks (m = 8,
// m = 3 with zero blocks, m = 1, and saturating sums), --stats says so (and what each rank read
// of B), and it is off with
// BLOCKMM_SHARE_B=0, with one node a rank, and where ranks need only part of B (a banded A); a
// duplicate in B stops every rank with the plain run's message.
TEST_F(Mpi, RanksOfANodeReadOneSharedB) {
  std::mt19937_64 rng(2121);
  // Dense enough that every rank's A rows reach every row of B.
  const auto dense = [](std::int32_t n, std::int32_t m, double density) {
    testing::RandomSpec spec;
    spec.n = n;
    spec.m = m;
    spec.density = density;
    return spec;
  };
  const testing::RandomSpec eight = dense(8 * 48, 8, 0.5);
  testing::RandomSpec three = dense(3 * 61, 3, 0.6);
  three.zero_block_fraction = 0.1;
  three.max_value = 1023;
  const std::vector<std::pair<std::string, testing::RandomSpec>> cases = {
      {"m = 8", eight}, {"m = 3, zero blocks", three}, {"m = 1", dense(300, 1, 0.5)}, {"saturating m = 8", dense(8 * 30, 8, 0.7)}};
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    const CaseFiles files = case_files(name, spec, rng);
    const std::string &pa = files.pa, &pb = files.pb;
    const std::vector<std::byte>& plain = files.plain;
    expect_identical(pa, pb, plain, rank_counts({2, 3, 4}));
    struct Mode {
      std::vector<std::string> env;
      bool shared;
    };
    const Mode modes[] = {{{}, true}, {{"BLOCKMM_SHARE_B=0"}, false}, {{"BLOCKMM_SIMULATE_NODES=1"}, false}};
    for (const Mode& mode : modes) {
      for (int n : rank_counts({2, 3})) {
        SCOPED_TRACE("mpiexec -n " + std::to_string(n) + (mode.env.empty() ? "" : " " + mode.env.front()));
        const std::string out = out_dir + "/C.bin";
        const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out}, mode.env);
        ASSERT_TRUE(mpi_succeeded(m)) << m.describe();
        EXPECT_TRUE(read_bytes(out) == plain);
        nlohmann::json j;
        ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
        EXPECT_EQ(j.at("b_shared_on_node").get<bool>(), mode.shared);
        // Sharing, only the node's first rank reads B; otherwise every rank holds all of it: the
        // file's records where it scans the file, the non-zero blocks the owners send across nodes.
        const bool across_nodes = !mode.env.empty() && mode.env.front() == "BLOCKMM_SIMULATE_NODES=1";
        const auto b_records = j.at("blocks").at(across_nodes ? "b_nonzero_used" : "b_records").get<std::int64_t>();
        for (const nlohmann::json& rank : j.at("per_rank")) {
          const std::int64_t expected = mode.shared && rank.at("rank").get<int>() > 0 ? 0 : b_records;
          EXPECT_EQ(rank.at("b_records").get<std::int64_t>(), expected) << "rank " << rank.at("rank");
        }
        std::remove(out.c_str());
        // The shared copy has no name in /dev/shm (comm/node_shared_memory.hpp): none outlives a
        // run (names seen twice a second apart, so that another program's passing file is not
        // counted; tests/e2e/mpi/node_memory_test.cpp checks that none is made at all).
        EXPECT_EQ(lasting_shared_files(), std::vector<std::string>{});
      }
    }
  }
  // A banded A: each rank needs only the rows of B near its panel, whose counts may agree; every
  // rank builds its own B, and the bytes are the plain run's.
  {
    SCOPED_TRACE("banded A");
    const std::int32_t m = 4, p = 60;
    std::vector<std::tuple<int, int, std::vector<std::uint16_t>>> band, full;
    for (int i = 0; i < p; ++i) {
      for (int j = std::max(0, i - 1); j <= std::min(p - 1, i + 1); ++j)
        band.emplace_back(i, j, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(1 + (i * 7 + j) % 1000)));
      for (int j = 0; j < p; j += 3)
        full.emplace_back(i, j, std::vector<std::uint16_t>(static_cast<std::size_t>(m) * m, static_cast<std::uint16_t>(1 + (i + j) % 500)));
    }
    const InputRecords a = testing::make_records(m * p, m, band), b = testing::make_records(m * p, m, full);
    const std::string pa = put("a.bin", a), pb = put("b.bin", b);
    const std::vector<std::byte> expected = encode(sparse_oracle(a, b));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    for (int n : rank_counts({2, 3, 4})) {
      SCOPED_TRACE("mpiexec -n " + std::to_string(n));
      const std::string out = out_dir + "/C.bin";
      const MpiRun run = run_mpi(n, {"-q", "--threads", "1", "--stats=json", pa, pb, out});
      ASSERT_TRUE(mpi_succeeded(run)) << run.describe();
      EXPECT_TRUE(read_bytes(out) == plain);
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(run.run.out)) << run.run.out;
      EXPECT_FALSE(j.at("b_shared_on_node").get<bool>());
      std::remove(out.c_str());
    }
  }
  // A duplicate in B: the plain run's message from every rank.
  const InputRecords good_a = testing::random_blocks(eight, rng);
  InputRecords bad_b = testing::random_blocks(eight, rng);
  const std::int64_t last = bad_b.size() - 1;
  const std::int32_t i = record_row(bad_b.record(0)), j = record_col(bad_b.record(0));
  set_record_index(bad_b.record(last), i, j);
  const std::string pa = put("a.bin", good_a), pbad = put("dup.bin", bad_b);
  const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
  ASSERT_EQ(plain.exit_code, 3) << plain.describe();
  const std::string plain_line = split_lines(plain.err).at(0);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  for (int n : rank_counts({2, 3})) {
    SCOPED_TRACE("duplicate in B, mpiexec -n " + std::to_string(n));
    const MpiRun m = run_mpi(n, {"-q", "--threads", "1", pa, pbad, out_dir + "/C.bin"});
    EXPECT_TRUE(every_rank_failed(m, 3, pbad, {"duplicate", pair}, out_dir));
    EXPECT_NE(m.run.err.find(plain_line), std::string::npos) << m.describe();
  }
}

// Ranks whose backend builds whole inputs (driver/whole_inputs.hpp: the cuda backend's path on a
// GPU node, taken here by the reference backend, BLOCKMM_WHOLE_INPUTS=1): the plain run's bytes
// on 2-4 ranks, binary and HDF5 out, no input moved between ranks, and a duplicate in either
// input stops every rank with the plain run's message.
TEST_F(Mpi, RanksBuildingWholeInputsGiveIdenticalFiles) {
  std::mt19937_64 rng(1414);
  const std::vector<std::string> whole{"BLOCKMM_WHOLE_INPUTS=1"};
  const std::vector<std::string> reference{"--backend", "reference"};
  testing::RandomSpec saturating;  // every value 65535
  saturating.n = 96;
  saturating.m = 3;
  saturating.density = 0.3;
  std::vector<std::pair<InputRecords, InputRecords>> cases;
  const testing::RandomSpec spec = testing::random_spec(rng, 24);
  cases.emplace_back(testing::random_blocks(spec, rng), testing::random_blocks(spec, rng));
  cases.emplace_back(medium_input(21), medium_input(22));
  cases.emplace_back(testing::random_blocks(saturating, rng), testing::random_blocks(saturating, rng));
  saturate(cases.back().first);
  saturate(cases.back().second);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const std::string pa = put("a.bin", cases[c].first), pb = put("b.bin", cases[c].second);
    const std::vector<std::byte> expected = encode(sparse_oracle(cases[c].first, cases[c].second));
    const std::vector<std::byte> plain = plain_product(pa, pb, &expected);
    expect_identical(pa, pb, plain, rank_counts({2, 3, 4}), reference, whole);
    if (c != 1) continue;
    // HDF5 out, compared as its COL380 conversion (HDF5 stamps times into object headers).
    const std::string out = out_dir + "/C.h5", back = scratch / "C-from-h5.bin";
    ASSERT_TRUE(mpi_succeeded(run_mpi(3, {"-q", "--threads", "1", "--backend", "reference", pa, pb, out}, whole)));
    convert(out, back);
    EXPECT_TRUE(read_bytes(back) == plain) << "HDF5 product differs from the plain run";
    std::remove(out.c_str());
    std::remove(back.c_str());
    // --stats: the method, nothing moved, the ranks' work adding up to the product's.
    for (const bool on : {true, false}) {
      const MpiRun m = run_mpi(3, {"-q", "--threads", "1", "--backend", "reference", "--stats=json", pa, pb,
                                   out_dir + "/C.bin"}, on ? whole : std::vector<std::string>{"BLOCKMM_WHOLE_INPUTS=0"});
      ASSERT_TRUE(mpi_succeeded(m));
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(m.run.out)) << m.run.out;
      EXPECT_EQ(j.at("distribution"), on ? "whole inputs on every rank" : "rows scanned from the files");
      for (const char* where : {"within_node", "between_nodes"})
        for (const char* what : {"records", "index"}) EXPECT_EQ(j.at("input_bytes_moved").at(where).at(what), 0);
      std::int64_t work = 0;
      for (const auto& rank : j.at("per_rank")) work += rank.at("work").get<std::int64_t>();
      EXPECT_EQ(work, j.at("block_products").get<std::int64_t>());
      std::remove((out_dir + "/C.bin").c_str());
    }
  }
  // A duplicate block in A, then in B: every rank stops with the plain run's line, nothing written.
  const InputRecords good = medium_input(23);
  InputRecords bad = good;
  const std::int32_t i = record_row(bad.record(0)), j = record_col(bad.record(0));
  set_record_index(bad.record(bad.size() - 1), i, j);
  const std::string pgood = put("good.bin", good), pbad = put("dup.bin", bad);
  const std::string pair = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
  for (const bool in_a : {true, false}) {
    const std::string pa = in_a ? pbad : pgood, pb = in_a ? pgood : pbad;
    const RunResult plain = run_blockmm({"-q", "--threads", "1", pa, pb, out_dir + "/C.bin"});
    ASSERT_EQ(plain.exit_code, 3) << plain.describe();
    const std::string plain_line = split_lines(plain.err).at(0);
    for (int n : rank_counts({2, 3})) {
      SCOPED_TRACE(std::string(in_a ? "A" : "B") + ", mpiexec -n " + std::to_string(n));
      const MpiRun m = run_mpi(n, {"-q", "--threads", "1", "--backend", "reference", pa, pb, out_dir + "/C.bin"}, whole);
      EXPECT_TRUE(every_rank_failed(m, 3, pbad, {"duplicate", pair, "0", std::to_string(bad.size() - 1)}, out_dir));
      EXPECT_NE(m.run.err.find(plain_line), std::string::npos) << "not the plain run's message: " << plain_line << "\n"
                                                               << m.describe();
    }
  }
}

}  // namespace
}  // namespace blockmm::e2e
