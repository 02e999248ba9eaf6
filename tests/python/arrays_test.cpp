// python/arrays.hpp and python/in_process.hpp without an interpreter: BSR arrays as an input file
// (records, keys, refusals), the array writer (indptr from the pattern, labels, writes in any
// order, cancellation), the in-process product against the dense oracle, and the kind of Python
// exception each failure becomes.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <numeric>
#include <new>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "multiply/plan.hpp"
#include "python/arrays.hpp"
#include "python/in_process.hpp"
#include "support/dense_reference.hpp"
#include "support/random_blocks.hpp"

namespace blockmm::python {
namespace {

// A BSR matrix held by the test: the arrays a scipy matrix would hold, in any block order within
// a row (scipy's canonical form sorts them; blockmm does not need it).
template <typename Index>
struct Bsr {
  std::int64_t n = 0, m = 0;
  std::vector<Index> indptr, indices;
  std::vector<std::uint16_t> data;
  BsrArrays arrays(const std::string& name = "A") const {
    BsrArrays a;
    a.name = name;
    a.n = n;
    a.m = m;
    a.indptr = {indptr.data(), sizeof(Index) == 8, static_cast<std::int64_t>(indptr.size())};
    a.indices = {indices.data(), sizeof(Index) == 8, static_cast<std::int64_t>(indices.size())};
    a.data = data.data();
    a.data_blocks = m > 0 ? static_cast<std::int64_t>(data.size()) / (m * m) : 0;
    return a;
  }
};

// A BSR matrix of the arrays given, every value `value`.
Bsr<std::int32_t> fixed_bsr(std::int64_t n, std::int64_t m, std::vector<std::int32_t> indptr,
                            std::vector<std::int32_t> indices, std::uint16_t value) {
  Bsr<std::int32_t> bsr;
  bsr.n = n;
  bsr.m = m;
  bsr.data.assign(indices.size() * static_cast<std::size_t>(m * m), value);
  bsr.indptr = std::move(indptr);
  bsr.indices = std::move(indices);
  return bsr;
}

// The records' blocks as BSR, rows in order, a row's blocks in the records' order.
template <typename Index>
Bsr<Index> to_bsr(const InputRecords& records) {
  Bsr<Index> bsr;
  bsr.n = records.shape.n;
  bsr.m = records.shape.m;
  const std::int32_t p = records.shape.block_rows();
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t x, std::int64_t y) { return record_row(records.record(x)) < record_row(records.record(y)); });
  bsr.indptr.assign(static_cast<std::size_t>(p) + 1, 0);
  const std::int64_t values = records.shape.block_values();
  for (const std::int64_t r : order) {
    ++bsr.indptr[static_cast<std::size_t>(record_row(records.record(r))) + 1];
    bsr.indices.push_back(static_cast<Index>(record_col(records.record(r))));
    bsr.data.insert(bsr.data.end(), records.values(r), records.values(r) + values);
  }
  for (std::int32_t i = 0; i < p; ++i) bsr.indptr[static_cast<std::size_t>(i) + 1] += bsr.indptr[static_cast<std::size_t>(i)];
  return bsr;
}

std::string refusal(const BsrArrays& arrays) {
  try {
    ArrayInputFile file(arrays);
    const InputRecords all = file.read_records({0, file.header().k});
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(ArrayInput, RecordsAndKeysAreTheArraysBlocksInAnyPieces) {
  std::mt19937_64 rng(50);
  for (int trial = 0; trial < 30; ++trial) {
    testing::RandomSpec spec = testing::random_spec(rng);
    spec.empty_row_fraction = trial % 3 == 0 ? 0.5 : 0;
    const InputRecords records = testing::random_blocks(spec, rng);
    const Bsr<std::int64_t> wide = to_bsr<std::int64_t>(records);
    const Bsr<std::int32_t> narrow = to_bsr<std::int32_t>(records);
    ArrayInputFile a(wide.arrays()), b(narrow.arrays());
    ASSERT_EQ(a.header().k, records.size());
    const std::int64_t k = a.header().k;
    const std::int64_t first = k > 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k)) : 0;
    const std::int64_t count = k - first > 0 ? 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k - first)) : 0;
    const InputRecords from_a = a.read_records({first, count}), from_b = b.read_records({first, count});
    ASSERT_EQ(from_a.bytes.size(), from_b.bytes.size());
    EXPECT_TRUE(from_a.bytes.empty() || std::memcmp(from_a.bytes.data(), from_b.bytes.data(), from_a.bytes.size()) == 0);
    std::vector<std::int32_t> keys(static_cast<std::size_t>(2 * count));
    a.read_keys({first, count}, keys.data());
    const std::int64_t values = records.shape.block_values();
    for (std::int64_t q = 0; q < count; ++q) {
      const std::int64_t block = first + q;
      const auto row = static_cast<std::int32_t>(std::upper_bound(wide.indptr.begin(), wide.indptr.end(), block) -
                                                 wide.indptr.begin() - 1);
      ASSERT_EQ(record_row(from_a.record(q)), row);
      ASSERT_EQ(record_col(from_a.record(q)), wide.indices[static_cast<std::size_t>(block)]);
      ASSERT_EQ(keys[static_cast<std::size_t>(2 * q)], row);
      ASSERT_EQ(keys[static_cast<std::size_t>(2 * q + 1)], record_col(from_a.record(q)));
      ASSERT_EQ(std::memcmp(from_a.values(q), wide.data.data() + block * values, static_cast<std::size_t>(values) * 2), 0);
    }
  }
}

TEST(ArrayInput, HostileArraysAreRefusedNamingTheOperand) {
  const Bsr<std::int32_t> good = fixed_bsr(6, 3, {0, 1, 2}, {1, 0}, 7);
  EXPECT_EQ(refusal(good.arrays()), "");
  const auto refused = [&](auto change, const std::string& expected) {
    Bsr<std::int32_t> bad = good;
    BsrArrays arrays = bad.arrays();
    change(bad, arrays);
    EXPECT_EQ(refusal(arrays), expected);
  };
  refused([](auto&, BsrArrays& a) { a.m = 0; }, "A: the block size m = 0 must be positive");
  refused([](auto&, BsrArrays& a) { a.m = 46341; },
          "A: the block size m = 46341 exceeds the largest block order blockmm supports, 46340");
  refused([](auto&, BsrArrays& a) { a.n = 7; }, "A: n = 7 is not a multiple of the block size m = 3");
  refused([](auto&, BsrArrays& a) { a.n = std::int64_t{3} << 31; },
          "A: n = 6442450944 is outside blockmm's [1, 2147483647]");
  refused([](auto&, BsrArrays& a) { a.n = 9; }, "A: indptr has 3 entries, n/m + 1 = 4 expected");
  refused([](auto& b, BsrArrays&) { b.indptr[0] = 1; }, "A: indptr starts at 1, not 0");
  refused([](auto& b, BsrArrays&) { b.indptr[1] = 3; }, "A: indptr decreases after block-row 1 (3 to 2)");
  refused([](auto& b, BsrArrays&) { b.indptr[2] = 3; }, "A: indptr ends at 3 blocks, but indices holds 2 and data 2");
  refused([](auto&, BsrArrays& a) { a.data_blocks = 1; }, "A: indptr ends at 2 blocks, but indices holds 2 and data 1");
  refused([](auto& b, BsrArrays&) { b.indices[1] = 2; }, "A: block 1 (block-row 1) has block-column 2, outside [0, 2)");
  refused([](auto& b, BsrArrays&) { b.indices[0] = -1; }, "A: block 0 (block-row 0) has block-column -1, outside [0, 2)");
  // A block count past int32 (the arrays claim it: nothing past the header is read).
  const std::vector<std::int64_t> huge = {0, std::int64_t{1} << 31};
  BsrArrays many = good.arrays("B");
  many.n = 3;
  many.indptr = {huge.data(), true, 2};
  many.indices.size = many.data_blocks = std::int64_t{1} << 31;
  EXPECT_EQ(refusal(many), "B: 2147483648 blocks, more than blockmm's int32 block count holds");
}

// The product of `a` and `b` by multiply_arrays, as output records in the arrays' order.
struct Product {
  std::vector<std::int32_t> indptr, indices;
  std::vector<std::uint32_t> data;
  multiply::Report report;
};
Product product(const BsrArrays& a, const BsrArrays& b, const ProductRequest& request,
                const Cancellation& cancellation = Cancellation()) {
  Product out;
  ArrayInputFile a_file(a), b_file(b);
  const std::int64_t p = a.n / a.m, mm = a.m * a.m;
  out.report = multiply_arrays(
      a_file, b_file, request,
      [&](std::int64_t blocks, bool wide) {
        EXPECT_FALSE(wide);
        out.indptr.assign(static_cast<std::size_t>(p + 1), -1);
        out.indices.assign(static_cast<std::size_t>(blocks), -1);
        out.data.assign(static_cast<std::size_t>(blocks * mm), 0);
        return OutputArrays{out.indptr.data(), out.indices.data(), out.data.data()};
      },
      cancellation);
  return out;
}

OutputRecords as_records(const Product& c, MatrixShape shape) {
  OutputRecords records;
  records.shape = shape;
  const std::int64_t stride = records.stride(), mm = shape.block_values();
  records.bytes.resize(static_cast<std::size_t>(c.indices.size()) * static_cast<std::size_t>(stride));
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(c.indptr.size()); ++i)
    for (std::int32_t t = c.indptr[static_cast<std::size_t>(i)]; t < c.indptr[static_cast<std::size_t>(i) + 1]; ++t) {
      set_record_index(records.record(t), i, c.indices[static_cast<std::size_t>(t)]);
      std::memcpy(records.record(t) + 8, c.data.data() + t * mm, static_cast<std::size_t>(mm) * 4);
    }
  return records;
}

TEST(InProcess, RandomProductsEqualTheDenseOracleCanonically) {
  std::mt19937_64 rng(51);
  for (int trial = 0; trial < 24; ++trial) {
    testing::RandomSpec spec = testing::random_spec(rng);
    const InputRecords a = testing::random_blocks(spec, rng), b = testing::random_blocks(spec, rng);
    const Bsr<std::int32_t> a_bsr = to_bsr<std::int32_t>(a);
    const Bsr<std::int64_t> b_bsr = to_bsr<std::int64_t>(b);
    ProductRequest request;
    request.backend = trial % 4 == 3 ? kernels::BackendKind::reference : kernels::BackendKind::cpu;
    request.threads = 1 + trial % 2;
    request.chunk_bytes = trial % 2 == 0 ? 1 : std::int64_t{1} << 20;  // one tile a chunk, or all
    const Product c = product(a_bsr.arrays("A"), b_bsr.arrays("B"), request);
    const OutputRecords expected = testing::dense_product(a, b);
    EXPECT_EQ(testing::compare_outputs(expected, as_records(c, a.shape)), "") << "trial " << trial << " m " << spec.m;
    // Canonical: every row's block-columns strictly ascending, indptr from 0 to the count.
    EXPECT_EQ(c.indptr.front(), 0);
    EXPECT_EQ(c.indptr.back(), static_cast<std::int32_t>(c.indices.size()));
    for (std::size_t i = 0; i + 1 < c.indptr.size(); ++i)
      for (std::int32_t t = c.indptr[i] + 1; t < c.indptr[i + 1]; ++t)
        ASSERT_LT(c.indices[static_cast<std::size_t>(t) - 1], c.indices[static_cast<std::size_t>(t)]);
  }
}

TEST(InProcess, EmptyOperandsGiveAnEmptyProductWithItsRowPointers) {
  const Bsr<std::int32_t> empty = fixed_bsr(8, 2, {0, 0, 0, 0, 0}, {}, 0), one = fixed_bsr(8, 2, {0, 1, 1, 1, 1}, {3}, 9);
  for (const auto& [a, b] : {std::pair{&empty, &one}, std::pair{&one, &empty}, std::pair{&one, &one}}) {
    ProductRequest request;
    request.backend = kernels::BackendKind::cpu;
    const Product c = product(a->arrays("A"), b->arrays("B"), request);
    EXPECT_EQ(c.indptr, std::vector<std::int32_t>(5, 0));  // A(0,3) B(0,3): no k meets
    EXPECT_TRUE(c.indices.empty());
  }
}

TEST(InProcess, DuplicateBlocksAndShapesThatDifferAreTheFilesMessages) {
  const Bsr<std::int32_t> twice = fixed_bsr(4, 2, {0, 2, 2}, {1, 1}, 1);
  ProductRequest request;
  request.backend = kernels::BackendKind::cpu;
  try {
    product(twice.arrays("A"), twice.arrays("B"), request);
    ADD_FAILURE() << "a duplicate block was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::bad_input);
    EXPECT_EQ(std::string(e.what()), "A: duplicate block (0, 1) at blocks 0 and 1 of its arrays (0-based)");
  }
  const Bsr<std::int32_t> other = fixed_bsr(6, 2, {0, 1, 1, 1}, {1}, 1);
  try {
    product(twice.arrays("A"), other.arrays("B"), request);
    ADD_FAILURE() << "shapes that differ were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::bad_input);
    EXPECT_EQ(std::string(e.what()), "B: n = 6, m = 2 does not match A (n = 4, m = 2)");
  }
}

// The kind of Python exception a failure becomes is told by its type: the plan's memory refusals
// (--host-memory, a GPU's budget) are MemoryError as an allocation refused is, a GPU's failure is
// RuntimeError whatever its text says (it once matched "out of memory" in the message).
TEST(InProcess, AFailuresKindIsToldByItsType) {
  const auto kind = [](const auto& e) { return describe_failure(std::make_exception_ptr(e)).kind; };
  multiply::PlacementFacts facts;
  facts.options.host_memory = 64 << 20;
  facts.options.host_memory_asked = true;
  facts.options.chunk_bytes = 16 << 20;
  facts.a_host_bytes = 60 << 20;
  std::exception_ptr refusal;
  try {
    multiply::plan_placement(facts);
  } catch (...) {
    refusal = std::current_exception();
  }
  ASSERT_TRUE(refusal);
  EXPECT_EQ(describe_failure(refusal).kind, FailureKind::memory) << describe_failure(refusal).message;
  multiply::LayoutFacts layout;
  layout.a_bytes = layout.b_bytes = 100 << 20;
  layout.numeric_bytes = 20 << 20;
  layout.room = 16 << 20;
  try {
    multiply::plan_layout(layout);
    ADD_FAILURE() << "no refusal";
  } catch (...) {
    EXPECT_EQ(describe_failure(std::current_exception()).kind, FailureKind::memory);
  }
  EXPECT_EQ(kind(std::bad_alloc()), FailureKind::memory);
  EXPECT_EQ(kind(std::system_error(std::make_error_code(std::errc::not_enough_memory))), FailureKind::memory);
  EXPECT_EQ(kind(InputError("A: value 70000")), FailureKind::value);
  EXPECT_EQ(kind(UsageError("BLOCKMM_RELABEL: x")), FailureKind::value);
  EXPECT_EQ(kind(ResourceError("CUDA: cudaMalloc: out of memory, said the text")), FailureKind::runtime);
  EXPECT_EQ(kind(ResourceError("--backend cuda: no usable GPU was found")), FailureKind::runtime);
  EXPECT_EQ(kind(std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again))),
            FailureKind::runtime);
  EXPECT_EQ(kind(Error(ExitCode::other, "internal error")), FailureKind::runtime);
  const Failure said = describe_failure(std::make_exception_ptr(OutOfMemoryError("the cuda backend needs 9 MiB")));
  EXPECT_EQ(said.kind, FailureKind::memory);
  EXPECT_EQ(said.message, "the cuda backend needs 9 MiB");
}

// The duplicate's place is looked for again on the error's path, without the GIL: arrays the
// caller changed since (an indptr past the blocks) make it look only at the k blocks checked. The
// indices end at a page that may not be read: a read past them ends the test.
TEST(ArrayInput, ADuplicatesPlaceIsLookedForWithinTheCheckedBlocks) {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* const mapped = ::mmap(nullptr, 2 * static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  ASSERT_EQ(::mprotect(static_cast<char*>(mapped) + page, static_cast<std::size_t>(page), PROT_NONE), 0);
  auto* const indices = reinterpret_cast<std::int32_t*>(static_cast<char*>(mapped) + page) - 2;
  indices[0] = 1;
  indices[1] = 0;
  Bsr<std::int32_t> bsr = fixed_bsr(4, 2, {0, 2, 2}, {1, 0}, 1);
  BsrArrays arrays = bsr.arrays();
  arrays.indices.data = indices;
  const ArrayInputFile file(arrays);
  bsr.indptr[1] = 1 << 30;  // changed by the caller after the checks
  EXPECT_EQ(file.locate_duplicate(0, 1), "");
  bsr.indptr[0] = -(1 << 30);
  EXPECT_EQ(file.locate_duplicate(0, 1), "");
  ::munmap(mapped, 2 * static_cast<std::size_t>(page));
}

TEST(InProcess, ACancelledProductStopsBeforeItsOutputIsWritten) {
  std::mt19937_64 rng(52);
  testing::RandomSpec spec;
  spec.n = 256;
  spec.m = 2;
  spec.density = 0.5;
  const InputRecords a = testing::random_blocks(spec, rng);
  const Bsr<std::int32_t> bsr = to_bsr<std::int32_t>(a);
  std::atomic<bool> flag{false};
  const Cancellation cancellation(&flag);
  ProductRequest request;
  request.backend = kernels::BackendKind::cpu;
  request.chunk_bytes = 1;
  std::int64_t allocated = -1;
  std::vector<std::uint32_t> data;
  std::vector<std::int32_t> indptr, indices;
  ArrayInputFile a_file(bsr.arrays("A")), b_file(bsr.arrays("B"));
  // Cancelled as the output is allocated: the numeric phase that follows writes nothing.
  EXPECT_THROW(multiply_arrays(
                   a_file, b_file, request,
                   [&](std::int64_t blocks, bool) {
                     allocated = blocks;
                     indptr.assign(129, 0);
                     indices.assign(static_cast<std::size_t>(blocks), -1);
                     data.assign(static_cast<std::size_t>(blocks) * 4, 0);
                     flag = true;
                     return OutputArrays{indptr.data(), indices.data(), data.data()};
                   },
                   cancellation),
               Error);
  EXPECT_TRUE(cancellation.requested());
  ASSERT_GT(allocated, 0);
  EXPECT_EQ(std::count(indices.begin(), indices.end(), -1), allocated);
  // Cancelled before it starts.
  EXPECT_THROW(product(bsr.arrays("A"), bsr.arrays("B"), request, cancellation), Error);
}

TEST(ArrayWriter, IndptrFollowsTheFilesRowsWithLabelsAndRecordsLandInAnyOrder) {
  // A panel over compact labels 0..2 standing for the file's block-rows 1, 4 and 5 of p = 6.
  const std::vector<std::int32_t> labels = {1, 4, 5};
  OutputLayout layout;
  layout.row_begin = 0;
  layout.row_end = 3;
  layout.row_ptr = {0, 2, 2, 3};
  layout.labels = &labels;
  layout.file_row_begin = 0;
  layout.file_row_end = 6;
  std::vector<std::int32_t> indptr(7), indices(3);
  std::vector<std::uint32_t> data(3);
  ArrayProductWriter writer([&](std::int64_t, bool) { return OutputArrays{indptr.data(), indices.data(), data.data()}; },
                            Cancellation());
  writer.begin({6, 1}, 3, 0, layout);
  EXPECT_EQ(indptr, (std::vector<std::int32_t>{0, 0, 2, 2, 2, 2, 3}));
  const auto record = [](std::int32_t row, std::int32_t col, std::uint32_t value) {
    std::vector<std::byte> r(12);
    set_record_index(r.data(), row, col);
    std::memcpy(r.data() + 8, &value, 4);
    return r;
  };
  writer.write(2, 1, record(2, 0, 30).data());  // label row 2 = file row 5, label col 0 = file col 1
  writer.write(0, 1, record(0, 1, 10).data());
  writer.write(1, 1, record(0, 2, 20).data());
  EXPECT_EQ(indices, (std::vector<std::int32_t>{4, 5, 1}));
  EXPECT_EQ(data, (std::vector<std::uint32_t>{10, 20, 30}));
  // A record in another row than indptr gives its tile is a wrong matrix: refused.
  EXPECT_THROW(writer.write(0, 1, record(2, 0, 1).data()), Error);
}

}  // namespace
}  // namespace blockmm::python
