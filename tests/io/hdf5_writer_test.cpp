// io/hdf5_writer: the HDF5 product writer's split copy and its check of the records, through each
// way of writing (one pwrite stream with cache-sized staging, the mapped writer with pages
// prepared ahead on tmpfs, part files): a random product handed over in random pieces reads back
// as the records written; a record that does not follow the panel's pattern (block-columns not
// ascending, the wrong block-row, a block-column past the matrix), deep inside a large write where
// the copying threads check it, is an internal error naming that tile, and nothing is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/record_layout.hpp"
#include "io/hdf5_bsr.hpp"
#include "io/mapped_writer.hpp"
#include "io/product_writer.hpp"
#include "io/output_parts.hpp"
#include "io/temp_file.hpp"

namespace blockmm::io {
namespace {

constexpr std::int32_t kM = 4;
constexpr std::int32_t kRows = 512;
const std::int64_t kStride = record_bytes<std::uint32_t>(kM);

// A random panel of all kRows rows (some empty), its tiles' records in order.
struct Product {
  OutputLayout layout;
  std::vector<std::byte> records;
  std::int64_t tiles() const { return layout.tiles(); }
  std::byte* record(std::int64_t t) { return records.data() + t * kStride; }
};

Product random_product(std::mt19937_64& rng) {
  Product product;
  product.layout.row_begin = 0;
  product.layout.row_end = kRows;
  product.layout.row_ptr.push_back(0);
  std::vector<std::int32_t> cols;
  for (std::int32_t r = 0; r < kRows; ++r) {
    cols.clear();
    for (std::int32_t j = 0; j < kRows; ++j)
      if (rng() % 16 == 0) cols.push_back(j);
    for (const std::int32_t j : cols) {
      product.records.resize(product.records.size() + static_cast<std::size_t>(kStride));
      std::byte* record = product.records.data() + product.records.size() - kStride;
      set_record_index(record, r, j);
      for (std::int64_t b = 8; b < kStride; ++b) record[b] = static_cast<std::byte>(rng());
    }
    product.layout.row_ptr.push_back(product.layout.row_ptr.back() + static_cast<std::int64_t>(cols.size()));
  }
  return product;
}

struct Way {
  const char* name;
  int threads;         // BLOCKMM_WRITE_THREADS (0: the policy's)
  int rank_threads;
  const char* parts;
};
// One pwrite stream; the mapped writer, its pages prepared ahead where the folder is a tmpfs; parts.
const Way kWays[] = {{"pwrite", 0, 1, "off"}, {"mapped", 3, 4, "off"}, {"parts", 3, 4, "3"}};

std::unique_ptr<ProductWriter> begin_writer(const Way& way, const std::string& target, const comm::Communicator& comm,
                                            const Product& product) {
  const OutputPolicy policy = output_policy(write_policy(way.threads, true, false, false, way.rank_threads), way.rank_threads, way.parts);
  std::unique_ptr<ProductWriter> writer = make_product_writer(OutputFormat::hdf5, target, comm, policy);
  writer->begin(MatrixShape{kRows * kM, kM}, product.tiles(), 0, product.layout);
  return writer;
}

TEST(Hdf5Writer, RandomPiecesReadBackAsTheRecordsWritten) {
  std::mt19937_64 rng(404);
  Product product = random_product(rng);
  comm::Communicator comm(comm::CommunicatorOptions{});
  for (const std::string& dir : test_dirs())
    for (const Way& way : kWays) {
      SCOPED_TRACE(dir + ", " + way.name);
      TempDir folder(dir);
      const std::string target = folder.path() + "/C.h5";
      {
        std::unique_ptr<ProductWriter> writer = begin_writer(way, target, comm, product);
        for (std::int64_t t = 0; t < product.tiles();) {
          const std::int64_t n = std::min(product.tiles() - t, std::uniform_int_distribution<std::int64_t>(1, 6000)(rng));
          writer->write(t, n, product.record(t));
          t += n;
        }
        writer->finish();
        EXPECT_EQ(writer->report().parts, way.parts == std::string("off") ? 0 : 3);
      }
      {
        BsrReader reader(target, BsrValues::input_or_product);
        ASSERT_EQ(reader.header().nnzb, product.tiles());
        const std::vector<std::byte> back = reader.read_records(0, product.tiles());
        EXPECT_TRUE(back == product.records) << "the file does not hold the records written";
      }
      EXPECT_EQ(folder.names().size(), way.parts == std::string("off") ? 1u : 4u) << "not the output and its parts alone";
    }
}

TEST(Hdf5Writer, ARecordOffThePatternIsAnInternalErrorNamingItsTile) {
  std::mt19937_64 rng(405);
  comm::Communicator comm(comm::CommunicatorOptions{});
  // How a record goes wrong: its block-column repeats the one before, its block-row is the next
  // row's, its block-column lies past the matrix.
  const std::vector<std::pair<const char*, int>> faults = {{"repeated column", 0}, {"wrong row", 1}, {"column past n/m", 2}};
  for (const std::string& dir : test_dirs())
    for (const Way& way : kWays)
      for (const auto& [fault, kind] : faults) {
        SCOPED_TRACE(dir + ", " + way.name + ", " + fault);
        Product product = random_product(rng);
        // A tile late in the product whose row holds the one before it: the second of its row.
        std::int64_t bad = product.tiles() * 3 / 4;
        while (record_row(product.record(bad - 1)) != record_row(product.record(bad))) ++bad;
        const std::int32_t i = record_row(product.record(bad)), j = record_col(product.record(bad - 1));
        set_record_index(product.record(bad), kind == 1 ? i + 1 : i, kind == 0 ? j : kind == 1 ? j + 1 : kRows + 5);
        TempDir folder(dir);
        const std::string target = folder.path() + "/C.h5";
        std::string message;
        try {
          std::unique_ptr<ProductWriter> writer = begin_writer(way, target, comm, product);
          const std::int64_t first = bad - bad / 3;  // one large write, the bad tile deep inside it
          writer->write(0, first, product.record(0));
          writer->write(first, product.tiles() - first, product.record(first));
          writer->finish();
        } catch (const Error& e) {
          message = e.what();
        }
        EXPECT_NE(message.find("internal error"), std::string::npos) << message;
        EXPECT_NE(message.find("output tile " + std::to_string(bad) + " is block ("), std::string::npos) << message;
        EXPECT_TRUE(folder.names().empty()) << "an output, a part or a temporary file was left";
      }
}

}  // namespace
}  // namespace blockmm::io
