// multiply::multiply on one rank, in process: inputs written as COL380 files and read by the
// real readers, a team of 1 to 3 host backends (rows split, or B in block-column panels as a
// GPU team splits a B too large for one device, or as a host memory too small for B reads it
// from its file panel by panel), compact labels, the real binary writer; each product read back
// and compared with the harness's oracle (support/harness.hpp: no code shared with src/kernels
// or src/partition), and the report's counts with the files'. plan_test.cpp has the plan's
// combinations; tests/e2e/mpi those of several ranks.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"
#include "kernels/backend.hpp"
#include "multiply/multiply.hpp"
#include "operands/host_build.hpp"
#include "support/harness.hpp"
#include "support/random_blocks.hpp"

namespace blockmm {
namespace {

struct Layout {
  std::string name;
  int backends = 1;
  int b_panels = 0;  // 0: as memory requires (host backends: B whole)
  bool reference = false;
  std::string team_layout;  // the beginning of what the report names
  double b_room = 0;        // > 0: the host memory leaves this fraction of B's build room (B from its file)
  partition::RelabelMode relabel = partition::RelabelMode::automatic;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all{
      {"one cpu backend", 1, 0, false, "one backend"},
      {"the reference backend", 1, 0, true, "one backend"},
      {"two backends, rows split", 2, 0, false, "rows split over 2 cpu"},
      {"three backends, B in three panels", 3, 3, false, "B split by block-columns into 3 panels over 3 cpu"},
      {"one backend, B in four panels", 1, 4, false, "B split by block-columns into 4 panels over 1 cpu"},
      {"one backend, B a third of the host memory", 1, 0, false, "B split by block-columns into", 0.34},
      {"two backends, B past the host memory", 2, 0, false, "B split by block-columns into", 0.9},
      {"three backends, B in five panels from its file", 3, 5, false, "B split by block-columns into 5 panels over 3 cpu", 0.1},
      {"compact labels, B from its file", 1, 0, true, "B split by block-columns into", 0.5, partition::RelabelMode::on}};
  return all;
}

class Multiply : public ::testing::Test {
 protected:
  // The product of the files a and b under `layout`, read back from the output file.
  OutputRecords run(const InputRecords& a, const InputRecords& b, const Layout& layout, std::int64_t chunk_bytes,
                    multiply::Report* report = nullptr) {
    const std::string a_path = scratch_ / "A.bin", b_path = scratch_ / "B.bin", out = scratch_ / "C.bin";
    e2e::write_bytes(a_path, e2e::encode(a));
    e2e::write_bytes(b_path, e2e::encode(b));
    const std::unique_ptr<io::InputFile> a_file = io::open_input(a_path, comm_);
    const std::unique_ptr<io::InputFile> b_file = io::open_input(b_path, comm_);
    const std::unique_ptr<io::ProductWriter> writer =
        io::make_product_writer(io::OutputFormat::binary, out, comm_, io::OutputPolicy{});
    multiply::Options options;
    options.chunk_bytes = chunk_bytes;
    options.b_panels = layout.b_panels;
    options.relabel = layout.relabel;
    if (layout.b_room > 0) {  // A, two chunks and a fraction of B (as this build of B takes it) a backend
      const std::int32_t p = a.shape.block_rows();
      options.host_memory = operands::build_bytes(a.shape, a.size(), p) + 2 * chunk_bytes +
                            static_cast<std::int64_t>(layout.b_room * layout.backends * operands::build_bytes(b.shape, b.size(), p)) + 1;
      options.host_memory_asked = true;
    }
    const multiply::TeamFactory team = [&](const kernels::WorkEstimate&) {
      multiply::Team backends;
      for (int w = 0; w < layout.backends; ++w)
        backends.push_back(layout.reference ? kernels::make_reference_backend() : kernels::make_cpu_backend({2}));
      return backends;
    };
    multiply::Observer quiet;
    const multiply::Report done = multiply::multiply(*a_file, *b_file, team, *writer, comm_, options, quiet);
    writer->finish();
    if (report != nullptr) *report = done;
    OutputRecords product;
    const std::string problem = e2e::load(out, product);
    EXPECT_EQ(problem, "") << layout.name;
    EXPECT_EQ(e2e::check_canonical(product), "") << layout.name;
    return product;
  }

  e2e::ScratchDir scratch_{"blockmm-multiply"};
  const comm::Communicator comm_{comm::CommunicatorOptions{}};
};

TEST_F(Multiply, EveryLayoutMatchesTheOracleOnRandomCases) {
  std::mt19937_64 rng(38);
  for (int trial = 0; trial < 12; ++trial) {
    const testing::RandomSpec spec = testing::random_spec(rng, 20);  // odd m, empty rows, saturation
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const OutputRecords expected = e2e::sparse_oracle(a, b);
    for (const Layout& layout : layouts()) {
      SCOPED_TRACE(layout.name + ", trial " + std::to_string(trial) + ": n = " + std::to_string(spec.n) +
                   ", m = " + std::to_string(spec.m));
      const std::int64_t chunk_bytes = trial % 2 == 0 ? std::int64_t{256} << 20 : 1;  // one chunk, or a row a chunk
      ASSERT_TRUE(e2e::encode(run(a, b, layout, chunk_bytes)) == e2e::encode(expected));
    }
  }
}

TEST_F(Multiply, ReportCountsWhatTheFilesHold) {
  std::mt19937_64 rng(7);
  testing::RandomSpec spec;
  spec.n = 96;
  spec.m = 3;
  spec.density = 0.25;
  spec.empty_row_fraction = 0.2;
  const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
  const OutputRecords expected = e2e::sparse_oracle(a, b);
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(layout.name);
    multiply::Report report;
    ASSERT_TRUE(e2e::encode(run(a, b, layout, std::int64_t{256} << 20, &report)) == e2e::encode(expected));
    EXPECT_EQ(report.c_blocks, expected.size());
    EXPECT_EQ(report.team_layout.rfind(layout.team_layout, 0), 0u) << report.team_layout;
    // The records' bytes, read once (the headers are not records).
    EXPECT_EQ(report.input_bytes_read, static_cast<std::int64_t>(a.bytes.size() + b.bytes.size()));
  }
}

TEST_F(Multiply, EmptyOperandsGiveTheEmptyProduct) {
  std::mt19937_64 rng(3);
  testing::RandomSpec spec;
  spec.n = 40;
  spec.m = 1;
  const InputRecords full = testing::random_blocks(spec, rng);
  const InputRecords none = testing::make_records(40, 1, {});
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(layout.name);
    EXPECT_EQ(run(none, full, layout, 1).size(), 0);
    EXPECT_EQ(run(full, none, layout, 1).size(), 0);
  }
}

}  // namespace
}  // namespace blockmm
