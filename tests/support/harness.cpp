#include "support/harness.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace blockmm::e2e {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("test harness: " + what); }

std::string errno_text() { return std::strerror(errno); }

bool is_launcher_variable(const std::string& entry) {
  static const char* prefixes[] = {"OMPI_COMM_WORLD_", "PMIX_RANK=", "PMIX_NAMESPACE=", "PMI_RANK=", "PMI_SIZE=",
                                   "MV2_COMM_WORLD_", "SLURM_STEP_NUM_TASKS=", "SLURM_PROCID=", "BLOCKMM_MPI="};
  for (const char* p : prefixes)
    if (entry.rfind(p, 0) == 0) return true;
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ---------- environment and scratch space ----------

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string blockmm_bin() {
  const std::string bin = env_or("BLOCKMM_BIN");
  if (bin.empty()) fail("BLOCKMM_BIN is not set (run the tests through ctest)");
  return bin;
}

ScratchDir::ScratchDir(const std::string& tag) {
  std::string pattern = env_or("TMPDIR", "/tmp") + "/" + tag + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp " + pattern + ": " + errno_text());
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  // Give back any permissions a test took away so that everything can be removed.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  ::chmod(path_.c_str(), 0700);
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::subdir(const std::string& name) const {
  const std::string p = path_ + "/" + name;
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) fail("mkdir " + p + ": " + errno_text());
  return p;
}

// ---------- child processes ----------

std::string RunResult::describe() const {
  std::ostringstream s;
  s << "exit code " << exit_code << (timed_out ? " (timed out)" : "") << " after " << seconds << " s\n--- stdout ---\n"
    << out.substr(0, 4000) << "\n--- stderr ---\n" << err.substr(0, 4000);
  return s.str();
}

pid_t spawn_process(const std::vector<std::string>& argv, const RunOptions& options, const std::string& out_path,
                    const std::string& err_path) {
  if (argv.empty()) fail("spawn_process: empty argv");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (options.strip_launcher_env && is_launcher_variable(entry)) continue;
    bool overridden = false;
    for (const std::string& s : options.set_env) {
      const std::string name = s.substr(0, s.find('=') + 1);
      if (entry.rfind(name, 0) == 0) overridden = true;
    }
    if (!overridden) env_strings.push_back(entry);
  }
  for (const std::string& s : options.set_env) env_strings.push_back(s);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own group, so that a deadline kills all of it; default dispositions and no blocked signals,
  // so that a test may signal the child even when started from a shell that ignores SIGINT.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);

  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

RunResult run_process(const std::vector<std::string>& argv, const RunOptions& options) {
  // Captures live in their own directory, never beside the files under test.
  ScratchDir capture("blockmm-capture");
  const std::string out_path = capture / "stdout";
  const std::string err_path = capture / "stderr";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = spawn_process(argv, options, out_path, err_path);

  RunResult result;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) fail("waitpid: " + errno_text());
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_seconds && !result.timed_out) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

RunResult run_blockmm(const std::vector<std::string>& args, const RunOptions& options) {
  std::vector<std::string> argv{blockmm_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, options);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// ---------- files ----------

std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("cannot read " + path);
  const std::streamoff size = in.tellg();
  in.seekg(0);
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) fail("cannot read " + path);
  return bytes;
}

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write " + path);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) fail("cannot write " + path);
}

bool date_back(const std::string& path, long seconds) {
  const struct timespec when = {std::time(nullptr) - seconds, 0};
  const struct timespec times[2] = {when, when};
  return ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) fail("opendir " + dir + ": " + errno_text());
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::byte> encode_with_header(std::int32_t n, std::int32_t m, std::int32_t k,
                                          const std::vector<std::byte>& record_bytes) {
  std::vector<std::byte> bytes(12 + record_bytes.size());
  const std::int32_t header[3] = {n, m, k};
  std::memcpy(bytes.data(), header, 12);
  if (!record_bytes.empty()) std::memcpy(bytes.data() + 12, record_bytes.data(), record_bytes.size());
  return bytes;
}

template <typename Value>
std::vector<std::byte> encode(const RecordBuffer<Value>& records) {
  return encode_with_header(records.shape.n, records.shape.m, static_cast<std::int32_t>(records.size()),
                            std::vector<std::byte>(records.bytes.begin(), records.bytes.end()));
}

template <typename Value>
std::string parse(const std::vector<std::byte>& bytes, RecordBuffer<Value>& out) {
  if (bytes.size() < 12) return "file of " + std::to_string(bytes.size()) + " bytes has no header";
  std::int32_t header[3];
  std::memcpy(header, bytes.data(), 12);
  const std::int64_t n = header[0], m = header[1], k = header[2];
  if (n <= 0 || m <= 0 || n % m != 0 || k < 0) return "bad header";
  const std::int64_t stride = 8 + static_cast<std::int64_t>(sizeof(Value)) * m * m;
  if (static_cast<std::int64_t>(bytes.size()) != 12 + k * stride)
    return "size " + std::to_string(bytes.size()) + " != 12 + k*(8+" + std::to_string(sizeof(Value)) + "m^2) with k = " +
           std::to_string(k);
  out.shape = {header[0], header[1]};
  out.bytes.assign(bytes.begin() + 12, bytes.end());
  const std::int64_t p = n / m;
  for (std::int64_t q = 0; q < k; ++q) {
    const std::int32_t i = record_row(out.record(q)), j = record_col(out.record(q));
    if (i < 0 || i >= p || j < 0 || j >= p)
      return "record " + std::to_string(q) + " has index (" + std::to_string(i) + ", " + std::to_string(j) + ")";
  }
  return "";
}

template <typename Value>
std::string load(const std::string& path, RecordBuffer<Value>& out) {
  if (!path_exists(path)) return path + " does not exist";
  const std::string why = parse(read_bytes(path), out);
  return why.empty() ? "" : path + ": " + why;
}

template std::vector<std::byte> encode(const RecordBuffer<std::uint16_t>&);
template std::vector<std::byte> encode(const RecordBuffer<std::uint32_t>&);
template std::string parse(const std::vector<std::byte>&, RecordBuffer<std::uint16_t>&);
template std::string parse(const std::vector<std::byte>&, RecordBuffer<std::uint32_t>&);
template std::string load(const std::string&, RecordBuffer<std::uint16_t>&);
template std::string load(const std::string&, RecordBuffer<std::uint32_t>&);

std::string check_canonical(const OutputRecords& out) {
  const std::int32_t p = out.shape.block_rows();
  const std::int64_t mm = out.shape.block_values();
  for (std::int64_t q = 0; q < out.size(); ++q) {
    const std::int32_t i = record_row(out.record(q)), j = record_col(out.record(q));
    const std::string where = "record " + std::to_string(q) + " (" + std::to_string(i) + ", " + std::to_string(j) + ")";
    if (i < 0 || i >= p || j < 0 || j >= p) return where + ": index outside [0, " + std::to_string(p) + ")";
    if (q > 0) {
      const std::int32_t pi = record_row(out.record(q - 1)), pj = record_col(out.record(q - 1));
      if (!(pi < i || (pi == i && pj < j)))
        return where + ": not after (" + std::to_string(pi) + ", " + std::to_string(pj) + ") in (i, j) order";
    }
    const std::uint32_t* v = out.values(q);
    if (std::all_of(v, v + mm, [](std::uint32_t x) { return x == 0; })) return where + ": all-zero block written";
  }
  return "";
}

// ---------- inputs and the oracle ----------

InputRecords skewed_blocks(std::int32_t n, std::int32_t m, double alpha, std::int64_t total_blocks,
                           std::int32_t min_per_row, std::uint32_t max_value, std::mt19937_64& rng) {
  const std::int32_t p = n / m;
  double weight_sum = 0;
  for (std::int32_t i = 0; i < p; ++i) weight_sum += std::pow(static_cast<double>(i + 1), -alpha);
  std::vector<std::pair<std::int32_t, std::int32_t>> where;
  std::vector<std::int32_t> columns(static_cast<std::size_t>(p));
  for (std::int32_t i = 0; i < p; ++i) {
    const double share = std::pow(static_cast<double>(i + 1), -alpha) / weight_sum;
    const std::int64_t want = std::llround(static_cast<double>(total_blocks) * share);
    const std::int32_t count = static_cast<std::int32_t>(std::clamp<std::int64_t>(want, min_per_row, p));
    for (std::int32_t c = 0; c < p; ++c) columns[c] = c;
    for (std::int32_t c = 0; c < count; ++c) {  // partial Fisher-Yates: distinct columns
      std::swap(columns[c], columns[std::uniform_int_distribution<std::int32_t>(c, p - 1)(rng)]);
      where.emplace_back(i, columns[c]);
    }
  }
  std::shuffle(where.begin(), where.end(), rng);
  InputRecords r;
  r.shape = {n, m};
  r.bytes.resize(where.size() * static_cast<std::size_t>(r.stride()));
  std::uniform_int_distribution<std::uint32_t> value(1, std::max<std::uint32_t>(1, max_value));
  for (std::size_t q = 0; q < where.size(); ++q) {
    std::byte* rec = r.record(static_cast<std::int64_t>(q));
    set_record_index(rec, where[q].first, where[q].second);
    for (std::int64_t e = 0; e < std::int64_t{m} * m; ++e) {
      const std::uint16_t v = static_cast<std::uint16_t>(value(rng));
      std::memcpy(rec + 8 + 2 * e, &v, 2);
    }
  }
  return r;
}

namespace {

// Record indices of each block-row.
std::vector<std::vector<std::int64_t>> by_row(const InputRecords& r) {
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(r.shape.block_rows()));
  for (std::int64_t q = 0; q < r.size(); ++q) rows[record_row(r.record(q))].push_back(q);
  return rows;
}

bool all_zero(const InputRecords& r, std::int64_t q) {
  const std::uint16_t* v = r.values(q);
  return std::all_of(v, v + r.shape.block_values(), [](std::uint16_t x) { return x == 0; });
}

}  // namespace

OutputRecords sparse_oracle(const InputRecords& a, const InputRecords& b) {
  if (a.shape != b.shape) fail("sparse_oracle: shapes differ");
  const std::int32_t m = a.shape.m;
  const std::int32_t p = a.shape.block_rows();
  const std::int64_t mm = std::int64_t{m} * m;
  const auto a_rows = by_row(a);
  const auto b_rows = by_row(b);
  std::vector<std::uint64_t> acc(static_cast<std::size_t>(p) * static_cast<std::size_t>(mm), 0);
  std::vector<char> touched(static_cast<std::size_t>(p), 0);
  std::vector<std::int32_t> cols;
  OutputRecords out;
  out.shape = a.shape;
  const std::int64_t stride = out.stride();
  for (std::int32_t i = 0; i < p; ++i) {
    cols.clear();
    for (std::int64_t qa : a_rows[i]) {
      const std::int32_t k = record_col(a.record(qa));
      const std::uint16_t* av = a.values(qa);
      for (std::int64_t qb : b_rows[k]) {
        const std::int32_t j = record_col(b.record(qb));
        const std::uint16_t* bv = b.values(qb);
        if (!touched[j]) {
          touched[j] = 1;
          cols.push_back(j);
        }
        std::uint64_t* c = acc.data() + static_cast<std::size_t>(j) * mm;
        for (std::int32_t r = 0; r < m; ++r)
          for (std::int32_t l = 0; l < m; ++l) {
            const std::uint64_t x = av[r * m + l];
            if (x == 0) continue;
            for (std::int32_t s = 0; s < m; ++s) c[r * m + s] += x * bv[l * m + s];
          }
      }
    }
    std::sort(cols.begin(), cols.end());
    for (std::int32_t j : cols) {
      std::uint64_t* c = acc.data() + static_cast<std::size_t>(j) * mm;
      if (std::any_of(c, c + mm, [](std::uint64_t x) { return x != 0; })) {
        const std::size_t at = out.bytes.size();
        out.bytes.resize(at + static_cast<std::size_t>(stride));
        set_record_index(out.bytes.data() + at, i, j);
        for (std::int64_t e = 0; e < mm; ++e) {
          const std::uint32_t v = c[e] > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(c[e]);
          std::memcpy(out.bytes.data() + at + 8 + 4 * e, &v, 4);
        }
      }
      std::fill(c, c + mm, 0);
      touched[j] = 0;
    }
  }
  return out;
}

OutputRecords pair_oracle(const InputRecords& a, const InputRecords& b) {
  if (a.shape != b.shape) fail("pair_oracle: shapes differ");
  const std::int32_t m = a.shape.m;
  const std::int64_t mm = std::int64_t{m} * m;
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::uint64_t>> sums;
  for (std::int64_t qa = 0; qa < a.size(); ++qa)
    for (std::int64_t qb = 0; qb < b.size(); ++qb) {
      if (record_col(a.record(qa)) != record_row(b.record(qb))) continue;
      std::vector<std::uint64_t>& c = sums[{record_row(a.record(qa)), record_col(b.record(qb))}];
      c.resize(static_cast<std::size_t>(mm), 0);
      const std::uint16_t* av = a.values(qa);
      const std::uint16_t* bv = b.values(qb);
      for (std::int32_t r = 0; r < m; ++r)
        for (std::int32_t s = 0; s < m; ++s)
          for (std::int32_t l = 0; l < m; ++l) c[r * m + s] += std::uint64_t{av[r * m + l]} * bv[l * m + s];
    }
  OutputRecords out;
  out.shape = a.shape;
  const std::int64_t stride = out.stride();
  for (const auto& [ij, c] : sums) {  // std::map: (i, j) order
    if (std::all_of(c.begin(), c.end(), [](std::uint64_t x) { return x == 0; })) continue;
    const std::size_t at = out.bytes.size();
    out.bytes.resize(at + static_cast<std::size_t>(stride));
    set_record_index(out.bytes.data() + at, ij.first, ij.second);
    for (std::int64_t e = 0; e < mm; ++e) {
      const std::uint32_t v = c[e] > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(c[e]);
      std::memcpy(out.bytes.data() + at + 8 + 4 * e, &v, 4);
    }
  }
  return out;
}

InputRecords blocks_among(std::int32_t n, std::int32_t m, const std::vector<std::int32_t>& indices, std::int64_t count,
                          std::mt19937_64& rng) {
  if (static_cast<std::int64_t>(indices.size()) * static_cast<std::int64_t>(indices.size()) < count)
    fail("blocks_among: fewer distinct blocks than asked for");
  InputRecords r;
  r.shape = {n, m};
  std::set<std::pair<std::int32_t, std::int32_t>> seen;
  std::uniform_int_distribution<std::size_t> pick(0, indices.size() - 1);
  std::uniform_int_distribution<int> kind(0, 7);
  std::uniform_int_distribution<std::uint32_t> value(0, 65535), high(65000, 65535);
  const std::int64_t stride = r.stride();
  while (static_cast<std::int64_t>(seen.size()) < count) {
    const std::pair<std::int32_t, std::int32_t> ij{indices[pick(rng)], indices[pick(rng)]};
    if (!seen.insert(ij).second) continue;
    const std::size_t at = r.bytes.size();
    r.bytes.resize(at + static_cast<std::size_t>(stride));
    std::byte* rec = r.bytes.data() + at;
    set_record_index(rec, ij.first, ij.second);
    const int k = kind(rng);  // 0: all zero, 1: near 65535, else uniform
    for (std::int64_t e = 0; e < std::int64_t{m} * m; ++e) {
      const std::uint16_t v = static_cast<std::uint16_t>(k == 0 ? 0 : k == 1 ? high(rng) : value(rng));
      std::memcpy(rec + 8 + 2 * e, &v, 2);
    }
  }
  return r;
}

std::vector<std::int64_t> row_products(const InputRecords& a, const InputRecords& b) {
  const std::int32_t p = a.shape.block_rows();
  std::vector<std::int64_t> b_count(static_cast<std::size_t>(p), 0);
  for (std::int64_t q = 0; q < b.size(); ++q)
    if (!all_zero(b, q)) ++b_count[record_row(b.record(q))];
  std::vector<std::int64_t> work(static_cast<std::size_t>(p), 0);
  for (std::int64_t q = 0; q < a.size(); ++q)
    if (!all_zero(a, q)) work[record_row(a.record(q))] += b_count[record_col(a.record(q))];
  return work;
}

double imbalance_of(const std::vector<std::int64_t>& row_work, const std::vector<std::int64_t>& bounds) {
  std::vector<std::int64_t> parts;
  std::int64_t total = 0;
  for (std::size_t r = 0; r + 1 < bounds.size(); ++r) {
    std::int64_t w = 0;
    for (std::int64_t i = bounds[r]; i < bounds[r + 1]; ++i) w += row_work[static_cast<std::size_t>(i)];
    parts.push_back(w);
    total += w;
  }
  if (parts.empty() || total == 0) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(parts.size());
  return static_cast<double>(*std::max_element(parts.begin(), parts.end())) / mean;
}

}  // namespace blockmm::e2e
