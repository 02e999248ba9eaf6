// A parted output's part files while they are written (part_files.hpp).
#include "io/part_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <system_error>

#include "core/error.hpp"
#include "io/mapped_writer.hpp"
#include "io/output_parts.hpp"
#include "io/path_names.hpp"

namespace blockmm::io {
namespace {

// A part's line as its owner publishes it: "<index> <device> <inode> <indices> <data> <temporary>".
struct Published {
  std::uint64_t device = 0, inode = 0;
  BsrLayout layout;
  std::string temporary;
};

Published parse_published(const std::string& text) {
  Published p;
  std::istringstream line(text);
  std::size_t index = 0;
  line >> index >> p.device >> p.inode >> p.layout.indices >> p.layout.data;
  std::getline(line >> std::ws, p.temporary);
  return p;
}

}  // namespace

int parts_for_rank(const OutputPolicy& policy, int ranks, std::int64_t total_bytes, bool tmpfs, bool huge,
                   std::int64_t my_tiles, std::int64_t my_bytes) {
  if (my_tiles <= 0 || policy.parts == OutputPolicy::kPartsOff) return 0;
  std::int64_t want = 0;
  if (policy.parts == OutputPolicy::kPartsAuto) {
    if (!tmpfs || huge || total_bytes < kAutoPartsMinBytes || policy.prepare_ahead_threads <= 0) return 0;
    want = std::min<std::int64_t>(policy.write.threads, (my_bytes + kAutoPartBytes - 1) / kAutoPartBytes);
  } else {
    want = (policy.parts + ranks - 1) / std::max(1, ranks);
  }
  return static_cast<int>(std::clamp<std::int64_t>(want, 0, std::min<std::int64_t>(my_tiles, kMaxWriteThreads)));
}

struct PartFiles::Part {
  BsrHeader header;  // nnzb: the part's blocks
  BsrLayout layout;
  std::unique_ptr<AtomicOutput> output;  // own parts: the temporary, until committed
  std::unique_ptr<FileWriter> file;
  std::unique_ptr<BsrContentWriter> content;
  std::string final_path;
  std::uint64_t final_inode = 0;  // committed: the file now at final_path
  bool committed = false;
};

PartFiles::PartFiles(const std::string& target, const comm::Communicator& comm, const BsrHeader& header,
                     const std::vector<std::int64_t>& counts, const std::vector<std::int64_t>& first_tile,
                     const std::vector<std::int64_t>& tiles, const OutputPolicy& policy, bool huge)
    : comm_(comm), single_(comm::CommunicatorOptions{}), target_(target), header_(header), policy_(policy) {
  comm_.run_phase([&] {
    if (comm_.is_root()) generation_ = fresh_part_generation(target_);
  });
  comm_.broadcast(generation_, 0);
  // Every rank computes every part's blocks and name alike: rank r's tiles in counts[r] even shares.
  for (std::size_t r = 0; r < counts.size(); ++r)
    for (std::int64_t j = 0; j < counts[r]; ++j) {
      const std::int64_t lo = first_tile[r] + tiles[r] * j / counts[r];
      const std::int64_t hi = first_tile[r] + tiles[r] * (j + 1) / counts[r];
      specs_.push_back({part_name(base_name(target_), generation_, static_cast<int>(specs_.size())), lo, hi - lo});
      owner_.push_back(static_cast<int>(r));
    }
  published_.assign(specs_.size(), "");
  const int parts = static_cast<int>(specs_.size());
  const std::int64_t value_bytes = static_cast<std::int64_t>(header_.width) * header_.block_values();
  std::string mine;
  comm_.run_phase([&] {
    for (std::size_t k = 0; k < specs_.size(); ++k) {
      if (owner_[k] != comm_.rank()) continue;
      const BsrPartSpec& spec = specs_[k];
      auto part = std::make_unique<Part>();
      part->header = header_;
      part->header.nnzb = spec.blocks;
      part->final_path = directory_of(target_) + "/" + spec.name;
      part->output = std::make_unique<AtomicOutput>(part->final_path, single_);
      std::int64_t metadata = 0;
      part->layout = create_bsr_part_file(part->output->path_for_library(), part->final_path, part->header, generation_,
                                          static_cast<int>(k), parts, spec, &metadata);
      written_ += metadata;
      const std::int64_t end = std::max(part->layout.indices + 4 * spec.blocks, part->layout.data + value_bytes * spec.blocks);
      part->file = part->output->open_writer(end, policy_.write, true);
      part->content = std::make_unique<BsrContentWriter>(*part->file, part->header, part->layout);
      // Prepared by the rank's preparing threads (start_preparing), not threads of the part's own.
      part->file->prepare_ahead({{part->layout.indices, 4 * spec.blocks}, {part->layout.data, value_bytes * spec.blocks}}, 0);
      std::ostringstream line;
      line << k << ' ' << part->output->device() << ' ' << part->output->inode() << ' ' << part->layout.indices << ' '
           << part->layout.data << ' ' << part->output->temporary_path() << '\n';
      mine += line.str();
      parts_[k] = std::move(part);
    }
  });
  // Every part's temporary, for neighbours that write tiles of it (rows shared between ranks).
  for (int r = 0; r < comm_.size(); ++r) {
    std::string text = comm_.rank() == r ? mine : std::string();
    comm_.broadcast(text, r);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const std::size_t k = static_cast<std::size_t>(std::stoll(line));
      if (k >= published_.size()) continue;
      published_[k] = line;
      // Every rank removes every part's temporary on SIGTERM or SIGINT: the ranks a launcher ends
      // so also remove those of a rank that was killed outright.
      if (r != comm_.rank()) armed_.push_back(arm_temporary_cleanup(parse_published(line).temporary));
    }
  }
  start_preparing(huge);
}

void PartFiles::start_preparing(bool huge) {
  // Steps of the own parts in the order the preparing threads take them: where the pages go into
  // huge folios, front first across the parts (each part's steps, part after part: the pages the
  // writes reach next are ready first, as for one file); in 4 KiB pages, where one file's page
  // index is the bound, a step of each part in turn, so that the threads fill several files at once.
  std::vector<std::vector<std::pair<FileWriter*, std::int64_t>>> by_part;
  for (auto& [k, part] : parts_) {
    if (part->output == nullptr) continue;
    by_part.emplace_back();
    for (std::int64_t s = 0; s < part->file->ahead_steps(); ++s) by_part.back().emplace_back(part->file.get(), s);
  }
  for (std::size_t round = 0, left = 1; left > 0; ++round) {
    left = 0;
    for (auto& steps : by_part) {
      if (huge) {
        ahead_steps_.insert(ahead_steps_.end(), steps.begin(), steps.end());
        steps.clear();
      } else if (round < steps.size()) {
        ahead_steps_.push_back(steps[round]);
        left += round + 1 < steps.size() ? 1 : 0;
      }
    }
  }
  const std::int64_t threads = std::min<std::int64_t>(policy_.prepare_ahead_threads, static_cast<std::int64_t>(ahead_steps_.size()));
  for (std::int64_t t = 0; t < threads; ++t) {
    try {
      preparers_.emplace_back([this] {
        for (std::size_t s; !stop_preparing_.load(std::memory_order_relaxed) &&
                            (s = next_step_.fetch_add(1, std::memory_order_relaxed)) < ahead_steps_.size();)
          if (ahead_steps_[s].first->prepare_step(ahead_steps_[s].second) != 0) return;  // the writes meet it too
      });
    } catch (const std::system_error&) {
      break;  // fewer threads: the writes prepare their own pages
    }
  }
}

void PartFiles::stop_preparing() {
  stop_preparing_.store(true);
  for (std::thread& t : preparers_) t.join();
  preparers_.clear();
}

PartFiles::~PartFiles() {
  stop_preparing();
  for (int slot : armed_) disarm_temporary_cleanup(slot);
  if (!committed_ || confirmed_) return;
  // The main file never came: the parts renamed already go again (only the files renamed).
  for (auto& [k, part] : parts_) {
    struct stat st {};
    if (part->committed && ::lstat(part->final_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uint64_t>(st.st_ino) == part->final_inode)
      ::unlink(part->final_path.c_str());
  }
}

PartFiles::Part& PartFiles::part_for(std::size_t k) {
  auto found = parts_.find(k);
  if (found != parts_.end()) return *found->second;
  // A neighbour's part: its temporary opened by name, refusing anything but the file it made.
  const Published published = parse_published(published_.at(k));
  if (published.temporary.empty())
    throw Error(ExitCode::other, "internal error: " + target_ + ": part " + std::to_string(k) + " was not published");
  auto part = std::make_unique<Part>();
  part->layout = published.layout;
  part->header = header_;
  part->header.nnzb = specs_[k].blocks;
  part->final_path = directory_of(target_) + "/" + specs_[k].name;
  part->file = open_temporary_writer(published.temporary, part->final_path, single_, -1, published.device, published.inode);
  part->content = std::make_unique<BsrContentWriter>(*part->file, part->header, part->layout);
  return *(parts_[k] = std::move(part));
}

bool PartFiles::write(std::int64_t first, std::int64_t count, const std::byte* records, const RecordCheck& check) {
  const std::int64_t stride = header_.record_bytes();
  for (std::int64_t done = 0; count > 0;) {
    const auto k = static_cast<std::size_t>(
        std::upper_bound(specs_.begin(), specs_.end(), first, [](std::int64_t b, const BsrPartSpec& s) { return b < s.first; }) -
        specs_.begin() - 1);
    const BsrPartSpec& spec = specs_.at(k);
    const std::int64_t n = std::min(count, spec.first + spec.blocks - first);
    if (n <= 0) throw Error(ExitCode::other, "internal error: " + target_ + ": block " + std::to_string(first) + " in no part");
    RecordCheck in_part;  // the part's records are those from `done` on of this write
    if (check != nullptr)
      in_part = [&check, done](std::int64_t t, std::int64_t c, const std::byte* keys) { return check(done + t, c, keys); };
    if (!part_for(k).content->write_records(first - spec.first, n, records, in_part)) return false;
    written_ += n * (stride - 4);
    records += n * stride;
    first += n;
    count -= n;
    done += n;
  }
  return true;
}

void PartFiles::close() {
  stop_preparing();
  comm_.run_phase([&] {
    for (auto& [k, part] : parts_) part->file->sync_and_close();
  });
}

void PartFiles::commit(unsigned mode) {
  committed_ = true;  // from here on, the destructor removes what was renamed unless confirmed
  comm_.run_phase([&] {
    for (auto& [k, part] : parts_) {
      if (part->output == nullptr) continue;  // a neighbour's: its owner renames it
      AtomicOutput::CommitOptions options;
      options.replace = false;
      options.mode = static_cast<int>(mode);
      part->output->commit(options);
      part->committed = true;
      part->final_inode = part->output->inode();
    }
  });
}

OutputReport PartFiles::report() const {
  OutputReport report;
  report.parts = static_cast<int>(specs_.size());
  for (const auto& [k, part] : parts_) {
    if (part->output == nullptr || part->file == nullptr) continue;
    const WriterReport w = part->file->report();
    report.mapped = report.mapped || w.mapped;
    report.threads = std::max(report.threads, w.threads);
    report.huge_extents += w.huge_extents;
    report.small_extents += w.small_extents;
    if (report.tmpfs_settings.empty()) report.tmpfs_settings = part->output->tmpfs_huge_settings();
  }
  return report;
}

}  // namespace blockmm::io
