// libFuzzer target for blockmm's input readers: the bytes become a file, which goes through the
// path a run takes (io::open_input, read_records in one share and in several, as ranks would,
// then the CSR build with duplicate detection of operands/host_build.hpp), on one rank without MPI.
//
// Built twice: fuzz_binary_input (COL380 binary; inputs that start with the HDF5 signature are
// rejected) and fuzz_hdf5_input (BSR layout; inputs must start with the signature). A clean
// blockmm::Error with exit code 3 (bad input) or 4 (I/O) is the expected way to refuse a file;
// anything else (a crash, a sanitizer report, another exception or code, a broken invariant of
// what the readers promise) aborts and is a finding.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "core/block_matrix.hpp"
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "operands/host_build.hpp"

#if BLOCKMM_FUZZ_HDF5
#include <hdf5.h>
#endif

namespace {

using namespace blockmm;

// The CSR build's memory is O(p) by design (row pointers, histograms): a legitimate 12-byte file
// may declare p = 2^31 - 1 empty block-rows. Reading is bounded by the file's size whatever its
// header says; the build is skipped above this p so that the fuzzer measures the readers.
constexpr std::int32_t kMaxBuildRows = 1 << 12;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A new file (new inode) for every input, removed afterwards: libhdf5 recognises a file it still
// holds open by device and inode, and would serve the previous input's cached metadata for a file
// rewritten in place, making findings depend on the inputs before them. In BLOCKMM_FUZZ_SCRATCH
// when set (fuzz_run.py's own folder, removed after the run: the input in flight when libhdf5
// crashes the process is never unlinked here), else /dev/shm or TMPDIR.
class ScratchFile {
 public:
  ScratchFile() {
    static const std::string base = [] {
      const char* tmp = std::getenv("TMPDIR");
      const char* scratch = std::getenv("BLOCKMM_FUZZ_SCRATCH");
      const std::string dir = scratch != nullptr && *scratch != '\0'       ? scratch
                              : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                              : tmp != nullptr                  ? tmp
                                                                : "/tmp";
      return dir + "/blockmm-fuzz-" + std::to_string(::getpid()) + "-";
    }();
    static unsigned long long counter = 0;
    path_ = base + std::to_string(counter++) + (BLOCKMM_FUZZ_HDF5 ? ".h5" : ".bin");
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) finding("harness: cannot create " + path);
  if (size > 0 && std::fwrite(data, 1, size, f) != size) finding("harness: cannot write " + path);
  if (std::fclose(f) != 0) finding("harness: cannot close " + path);
}

// Runs `step`; true when it returned, false when it threw a clean input or I/O error. Anything
// else is a finding.
template <typename Step>
bool clean(const char* what, Step&& step) {
  try {
    step();
    return true;
  } catch (const Error& e) {
    if (e.code() == ExitCode::bad_input || e.code() == ExitCode::output_failure) {
      const std::string message = e.what();
      const bool control = std::any_of(message.begin(), message.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      });
      if (message.empty() || control)
        finding(std::string(what) + ": error message is empty or holds control characters (not one clean line)");
      return false;
    }
    finding(std::string(what) + ": blockmm::Error with exit code " + std::to_string(static_cast<int>(e.code())) +
            ": " + e.what());
  } catch (const std::bad_alloc&) {
    finding(std::string(what) + ": std::bad_alloc (allocation sized from unchecked data?)");
  } catch (const std::exception& e) {
    finding(std::string(what) + ": unexpected exception: " + e.what());
  } catch (...) {
    finding(std::string(what) + ": unexpected non-standard exception");
  }
}

// What every successfully read set of records must satisfy.
void check_records(const InputRecords& records, const FileHeader& header, std::int64_t expected) {
  if (records.shape != header.shape()) finding("records carry a shape other than the header's");
  if (records.size() != expected)
    finding("read " + std::to_string(records.size()) + " records, expected " + std::to_string(expected));
  if (static_cast<std::int64_t>(records.bytes.size()) != expected * records.stride())
    finding("record buffer size is not a whole number of records");
  const std::int32_t p = header.shape().block_rows();
  for (std::int64_t r = 0; r < records.size(); ++r) {
    const std::int32_t i = record_row(records.record(r));
    const std::int32_t j = record_col(records.record(r));
    if (i < 0 || i >= p || j < 0 || j >= p)
      finding("record " + std::to_string(r) + " passed validation with block (" + std::to_string(i) + ", " +
              std::to_string(j) + ") outside [0, " + std::to_string(p) + ")");
  }
}

bool has_duplicate(const InputRecords& records) {
  std::vector<std::pair<std::int32_t, std::int32_t>> ij;
  ij.reserve(static_cast<std::size_t>(records.size()));
  for (std::int64_t r = 0; r < records.size(); ++r) ij.emplace_back(record_row(records.record(r)), record_col(records.record(r)));
  std::sort(ij.begin(), ij.end());
  return std::adjacent_find(ij.begin(), ij.end()) != ij.end();
}

void run_one(const std::uint8_t* data, std::size_t size) {
  static const comm::Communicator single{comm::CommunicatorOptions{}};
  const ScratchFile scratch;
  const std::string& path = scratch.path();
  write_file(path, data, size);

  std::unique_ptr<io::InputFile> file;
  if (!clean("open_input", [&] { file = io::open_input(path, single); })) return;
  if (file == nullptr) finding("open_input returned null");

  // The header a reader accepted must hold what the rest of the program relies on.
  const FileHeader h = file->header();
  if (h.n <= 0 || h.m <= 0 || h.n % h.m != 0) finding("accepted header n = " + std::to_string(h.n) + ", m = " + std::to_string(h.m));
  const std::int64_t p = h.n / h.m;
  if (h.k < 0 || h.k > p * p) finding("accepted header k = " + std::to_string(h.k));
  // Whatever a header claims, a binary file must hold every record it promises (HDF5 datasets
  // may be compressed, so only the readers' allocations bound them there: -malloc_limit_mb).
  __extension__ typedef __int128 Wide;
  if (!BLOCKMM_FUZZ_HDF5 && 12 + Wide{h.k} * (8 + 2 * Wide{h.m} * h.m) != static_cast<Wide>(size))
    finding("accepted k = " + std::to_string(h.k) + " blocks of m = " + std::to_string(h.m) + " from a " +
            std::to_string(size) + "-byte file");
  if (file->format_name() != (BLOCKMM_FUZZ_HDF5 ? "hdf5" : "binary")) finding("format " + file->format_name());

  // All records at once, as one rank reads them.
  InputRecords whole;
  const bool whole_ok = clean("read_records (one share)", [&] { whole = file->read_records(io::record_share(h.k, 0, 1)); });
  if (whole_ok) check_records(whole, h, h.k);

  // The same records in the shares of 2..4 ranks (the share boundaries matter to the HDF5
  // reader's ordering checks): each share must agree with the whole read.
  const int ranks = 2 + static_cast<int>(size % 3);
  InputRecords joined;
  joined.shape = h.shape();
  bool shares_ok = true;
  for (int r = 0; r < ranks && shares_ok; ++r) {
    const io::RecordRange range = io::record_share(h.k, r, ranks);
    InputRecords part;
    shares_ok = clean("read_records (a share)", [&] { part = file->read_records(range); });
    if (shares_ok) {
      check_records(part, h, range.count);
      joined.bytes.insert(joined.bytes.end(), part.bytes.begin(), part.bytes.end());
    }
  }
  if (shares_ok != whole_ok)
    finding(std::string("reading in ") + std::to_string(ranks) + " shares " + (shares_ok ? "passed" : "failed") +
            " where one share " + (whole_ok ? "passed" : "failed"));
  if (!whole_ok) return;
  if (joined.bytes.size() != whole.bytes.size() ||
      (!whole.bytes.empty() && std::memcmp(joined.bytes.data(), whole.bytes.data(), whole.bytes.size()) != 0))
    finding("records read in shares differ from the records read at once");

  // CSR (and CSC, as for a right operand) with duplicate detection.
  if (p > kMaxBuildRows) return;
  const bool duplicate = has_duplicate(whole);
  if (BLOCKMM_FUZZ_HDF5 && duplicate) finding("the HDF5 reader passed a duplicate block");
  const auto message = [&](std::int32_t i, std::int32_t j) {
    return file->path() + ": duplicate block (" + std::to_string(i) + ", " + std::to_string(j) + ")" +
           file->locate_duplicate(i, j);
  };
  BlockMatrix matrix;
  const bool built = clean("build_block_matrix", [&] {
    matrix = operands::build_block_matrix(whole, 0, static_cast<std::int32_t>(p), operands::OperandRole::right, message);
  });
  if (built == duplicate)
    finding(std::string("build_block_matrix ") + (built ? "accepted" : "rejected") + " records that " +
            (duplicate ? "hold" : "hold no") + " duplicate block");
  if (!built) return;
  if (static_cast<std::int64_t>(matrix.row_ptr.size()) != p + 1 || matrix.row_ptr[0] != 0 || matrix.blocks() > h.k)
    finding("malformed CSR");
  for (std::int64_t r = 0; r < p; ++r) {
    if (matrix.row_ptr[r + 1] < matrix.row_ptr[r]) finding("CSR row pointers decrease");
    for (std::int64_t b = matrix.row_ptr[r] + 1; b < matrix.row_ptr[r + 1]; ++b)
      if (matrix.col[b] <= matrix.col[b - 1]) finding("CSR columns not strictly ascending");
  }
  if (matrix.col_ptr.size() != static_cast<std::size_t>(p + 1) || matrix.col_ptr[p] != matrix.blocks())
    finding("malformed CSC");
}

}  // namespace

#if BLOCKMM_FUZZ_HDF5
// libhdf5 (1.10.8 here) leaks parts of object headers it fails to decode in corrupt files: not
// ours to fix. Handles that blockmm leaves open are caught by the object count below instead.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const bool hdf5 = size >= 8 && std::memcmp(data, kSignature, 8) == 0;
  if (hdf5 != static_cast<bool>(BLOCKMM_FUZZ_HDF5)) return -1;  // the other target's input: not kept
  run_one(data, size);
#if BLOCKMM_FUZZ_HDF5
  // Every HDF5 object the reader opened must be closed again (RAII on every error path).
  const ssize_t open_objects = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open_objects != 0) finding(std::to_string(open_objects) + " HDF5 objects left open");
#endif
  return 0;
}
