#include "multiply/team.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "partition/distribute.hpp"
#include "partition/work.hpp"

namespace blockmm::multiply {
namespace {

// The records of `all` at `index`, in that order: one panel of B, read where a backend builds.
class IndexedRecordSource final : public RecordSource {
 public:
  IndexedRecordSource(std::shared_ptr<const InputRecords> all, std::vector<std::int64_t> index)
      : all_(std::move(all)), index_(std::move(index)) {}
  MatrixShape shape() const override { return all_->shape; }
  std::int64_t size() const override { return static_cast<std::int64_t>(index_.size()); }
  void read(std::int64_t first, std::int64_t count, std::byte* dest) const override {
    const std::int64_t stride = all_->stride();
    for (std::int64_t q = 0; q < count; ++q)
      std::memcpy(dest + q * stride, all_->record(index_[static_cast<std::size_t>(first + q)]), static_cast<std::size_t>(stride));
  }
  InputRecords take() override {
    InputRecords out;
    out.shape = shape();
    out.bytes.resize(static_cast<std::size_t>(size() * stride()));
    read(0, size(), out.bytes.data());
    return out;
  }

 private:
  std::shared_ptr<const InputRecords> all_;
  std::vector<std::int64_t> index_;
};

// The writer, one write at a time: the team's backends hand it their chunks from their own
// threads, and writers keep state between writes.
class SerialSink final : public RecordSink {
 public:
  explicit SerialSink(RecordSink& to) : to_(to) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    const std::lock_guard<std::mutex> hold(lock_);
    to_.write(first_tile, count, records);
  }

 private:
  RecordSink& to_;
  std::mutex lock_;
};

// A backend's tiles, numbered from 0 in its own pattern, at their places in the rank's panel:
// rows split, they follow each other (`shift`); columns split, each row's tiles of one panel sit
// at `row_start[r]` of the rank's row r, so a write is cut at the panel's row ends.
class PlacingSink final : public RecordSink {
 public:
  PlacingSink(RecordSink& to, std::int64_t record_bytes, std::int64_t shift) : to_(to), stride_(record_bytes), shift_(shift) {}
  PlacingSink(RecordSink& to, std::int64_t record_bytes, const std::vector<std::int64_t>* row_ptr,
              std::vector<std::int64_t> row_start)
      : to_(to), stride_(record_bytes), row_ptr_(row_ptr), row_start_(std::move(row_start)) {}
  void write(std::int64_t first_tile, std::int64_t count, const std::byte* records) override {
    if (row_ptr_ == nullptr) {
      to_.write(first_tile + shift_, count, records);
      return;
    }
    auto row = static_cast<std::size_t>(std::upper_bound(row_ptr_->begin(), row_ptr_->end(), first_tile) - row_ptr_->begin() - 1);
    for (std::int64_t done = 0; done < count; ++row) {
      const std::int64_t tile = first_tile + done;
      const std::int64_t in_row = std::min((*row_ptr_)[row + 1] - tile, count - done);
      if (in_row <= 0) continue;
      to_.write(row_start_[row] + (tile - (*row_ptr_)[row]), in_row, records + done * stride_);
      done += in_row;
    }
  }

 private:
  RecordSink& to_;
  std::int64_t stride_;
  std::int64_t shift_ = 0;
  const std::vector<std::int64_t>* row_ptr_ = nullptr;
  std::vector<std::int64_t> row_start_;
};

// Runs body(w) for each backend w on a thread of its own; the first failure is rethrown.
template <typename Body>
void on_each_backend(std::size_t backends, Body&& body) {
  std::vector<std::exception_ptr> failures(backends);
  std::vector<std::thread> threads;
  threads.reserve(backends);
  for (std::size_t w = 0; w < backends; ++w)
    threads.emplace_back([&, w] {
      try {
        body(w);
      } catch (...) {
        failures[w] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

// One panel of B for one backend: its columns, its records, and what the phases made of it.
struct ColumnPanel {
  std::int32_t col_begin = 0, col_end = 0;
  std::unique_ptr<IndexedRecordSource> records;
  std::unique_ptr<kernels::Operand> b;  // null while streamed out
  std::unique_ptr<kernels::ProductPattern> pattern;
};

struct Worker {
  std::unique_ptr<kernels::Operand> a;
  std::unique_ptr<kernels::Operand> b;                     // rows split
  std::unique_ptr<kernels::ProductPattern> pattern;        // rows split
  std::vector<ColumnPanel> panels;                         // columns split, in column order
  std::int64_t block_products = 0;
  std::int64_t first_tile = 0;  // rows split: its tiles' place in the rank's panel
  kernels::NumericReport numeric;
  std::atomic<std::int64_t> tiles_done{0};
  WorkerReport report;
};

std::string bytes_in_mib(std::int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

TeamPlan plan_team(int backends, std::int64_t a_bytes, std::int64_t b_bytes, std::int64_t room,
                   std::int64_t numeric_bytes, int panels_asked) {
  TeamPlan plan;
  if (panels_asked <= 0 && (room <= 0 || a_bytes + b_bytes + numeric_bytes <= room)) return plan;
  plan.split_columns = true;
  if (panels_asked > 0) {  // (tests: more panels than backends are streamed, one at a time)
    plan.panels = panels_asked;
    plan.resident_panels = 1;
    return plan;
  }
  std::int64_t left = room - a_bytes - numeric_bytes;
  if (left <= 0) {  // A stays in host memory, which the GPUs read: the room is the panels'
    plan.a_in_host_memory = true;
    left = room - numeric_bytes;
  }
  if (left <= 0)
    throw ResourceError("each GPU must hold a numeric chunk (" + bytes_in_mib(numeric_bytes) +
                        ") beside B's panels, more than its memory budget leaves (" + bytes_in_mib(room) +
                        "): raise --mem-budget");
  // Panels hold B's blocks unevenly (they are cut by work): a quarter to spare.
  const std::int64_t panel_bytes = std::max<std::int64_t>(1, left * 4 / 5);
  const std::int64_t needed = (b_bytes + panel_bytes - 1) / panel_bytes;
  const std::int64_t rounds = std::max<std::int64_t>(1, (needed + backends - 1) / backends);
  plan.panels = static_cast<int>(std::min<std::int64_t>(rounds * backends, 1 << 20));
  plan.resident_panels = 1;  // one round: each holds its one panel; more: streamed one at a time
  return plan;
}

void multiply_with_team(Team& team, io::InputFile* a_file, io::InputFile* b_file,
                        const std::shared_ptr<const std::vector<std::int32_t>>& labels, io::ProductWriter& writer,
                        const comm::Communicator& comm, const Options& options, Observer& observer, Report& report) {
  const std::size_t backends = team.size();
  const MatrixShape shape = a_file->header().shape();
  const MatrixShape file_shape{report.n, report.m};
  const std::int64_t stride = record_bytes<std::uint32_t>(shape.m);
  kernels::Backend& first = *team[0];

  // The rank's records: its output rows of A and the B rows they reach (one rank: the files).
  observer.phase_started(Phase::read);
  partition::Distribution dist = partition::distribute(*a_file, *b_file, comm);
  report.mine.read += dist.read_seconds;
  report.mine.exchange += dist.exchange_seconds;
  report.mine.build += dist.build_seconds;
  report.distribution = partition::to_string(dist.method);
  report.record_bytes_within_node = comm.sum(dist.exchanged.record_bytes_within_node);
  report.record_bytes_between_nodes = comm.sum(dist.exchanged.record_bytes_between_nodes);
  report.index_bytes_within_node = comm.sum(dist.exchanged.index_bytes_within_node);
  report.index_bytes_between_nodes = comm.sum(dist.exchanged.index_bytes_between_nodes);
  report.rank_bytes_exchanged = comm.gather_all(dist.exchanged.bytes_sent + dist.exchanged.bytes_received);
  report.rank_b_records = comm.gather_all(dist.b ? dist.b->size() : std::int64_t{0});
  report.input_bytes_read = comm.sum(((dist.a ? dist.a->size() : 0) + (dist.b ? dist.b->size() : 0)) *
                                     record_bytes<std::uint16_t>(shape.m));
  const std::int32_t row_begin = dist.bounds[comm.rank()], row_end = dist.bounds[comm.rank() + 1];

  std::vector<Worker> workers(backends);
  TeamPlan plan;
  comm.run_phase([&] {
    plan = plan_team(static_cast<int>(backends), first.operand_bytes(*dist.a, dist.a_spec),
                     first.operand_bytes(*dist.b, dist.b_spec), first.memory_room(), first.numeric_bytes_at_least(shape.m),
                     options.b_panels);
  });

  PhaseScope build(report.mine, observer, Phase::build);
  comm.run_phase([&] {
    if (!plan.split_columns) {
      // B on the first backend and all the rank's A on the second, built at once from the
      // records (each over its own host link); the second takes a copy of B, balances the
      // rows, and every backend copies its rows of A and B from those two.
      kernels::Backend& second = *team[1];
      std::unique_ptr<kernels::Operand> a;
      std::future<void> a_built = std::async(std::launch::async, [&] { a = second.build(*dist.a, dist.a_spec); });
      std::unique_ptr<kernels::Operand> b = first.build(*dist.b, dist.b_spec);  // B's error first, as one build reports
      a_built.get();
      std::unique_ptr<kernels::Operand> b_second = second.copy_operand(*b);
      std::vector<std::int32_t> bounds =
          partition::balanced_ranges(second.row_products(*a, *b_second), static_cast<int>(backends));
      for (std::int32_t& bound : bounds) bound += row_begin;
      for (std::size_t w = 0; w < backends; ++w) {
        Worker& worker = workers[w];
        std::unique_ptr<kernels::Operand> rows = second.slice_rows(*a, bounds[w], bounds[w + 1]);
        worker.a = w == 1 ? std::move(rows) : team[w]->copy_operand(*rows);
        worker.report.rows = bounds[w + 1] - bounds[w];
      }
      for (std::size_t w = 2; w < backends; ++w) workers[w].b = team[w]->copy_operand(*b);
      workers[1].b = std::move(b_second);
      workers[0].b = std::move(b);
      report.team_layout = "rows split over " + std::to_string(backends) + " " + first.name() +
                           " backends; B built on the first and A on the second at once, each copied to the others";
      return;
    }
    // B's records in host memory once, cut into panels of equal work: a column's work is its
    // blocks times the A blocks of the rows they meet (plus one, so empty columns still spread).
    const std::int32_t p = shape.block_rows();
    auto b_records = std::make_shared<InputRecords>(dist.b->take());
    dist.b.reset();
    InputRecords a_records = dist.a->take();
    std::vector<std::int64_t> a_in_col(static_cast<std::size_t>(p), 0);
    for (std::int64_t q = 0; q < a_records.size(); ++q) ++a_in_col[static_cast<std::size_t>(record_col(a_records.record(q)))];
    std::vector<std::int64_t> col_work(static_cast<std::size_t>(p), 0);
    for (std::int64_t q = 0; q < b_records->size(); ++q) {
      const std::byte* record = b_records->record(q);
      col_work[static_cast<std::size_t>(record_col(record))] += 1 + a_in_col[static_cast<std::size_t>(record_row(record))];
    }
    const std::vector<std::int32_t> cols = partition::balanced_ranges(col_work, plan.panels);
    std::vector<std::vector<std::int64_t>> index(static_cast<std::size_t>(plan.panels));
    std::vector<int> panel_of(static_cast<std::size_t>(p));
    for (int q = 0; q < plan.panels; ++q)
      for (std::int32_t j = cols[q]; j < cols[q + 1]; ++j) panel_of[static_cast<std::size_t>(j)] = q;
    for (std::int64_t q = 0; q < b_records->size(); ++q)
      index[static_cast<std::size_t>(panel_of[static_cast<std::size_t>(record_col(b_records->record(q)))])].push_back(q);
    // Panel q goes to backend q mod backends: each holds every backends-th panel, in column order.
    std::shared_ptr<const InputRecords> all_b = b_records;
    for (int q = 0; q < plan.panels; ++q) {
      ColumnPanel panel;
      panel.col_begin = cols[q];
      panel.col_end = cols[q + 1];
      panel.records = std::make_unique<IndexedRecordSource>(all_b, std::move(index[static_cast<std::size_t>(q)]));
      workers[static_cast<std::size_t>(q) % backends].panels.push_back(std::move(panel));
    }
    MemoryRecordSource a_source(std::move(a_records));
    OperandSpec a_spec = dist.a_spec;
    a_spec.in_host_memory = plan.a_in_host_memory;
    std::unique_ptr<kernels::Operand> a = first.build(a_source, a_spec);
    for (std::size_t w = 1; w < backends; ++w) workers[w].a = team[w]->copy_operand(*a);
    workers[0].a = std::move(a);
    report.team_layout = "B split by block-columns into " + std::to_string(plan.panels) + " panels over " +
                         std::to_string(backends) + " " + first.name() + " backends" +
                         (static_cast<int>(backends) * plan.resident_panels < plan.panels ? ", streamed" : "") +
                         (plan.a_in_host_memory ? "; A read from host memory" : "");
  });
  build.stop();
  dist.a.reset();
  dist.b.reset();

  // Symbolic phase, each backend on its thread; columns split: each panel's pattern, its B
  // freed again where the panels are streamed.
  const bool streamed = plan.split_columns && static_cast<int>(backends) * plan.resident_panels < plan.panels;
  const auto build_panel = [&](std::size_t w, ColumnPanel& panel) {
    const OperandSpec spec{dist.b_spec.row_begin, dist.b_spec.row_end, OperandRole::right, dist.b_spec.duplicate_message};
    panel.b = team[w]->build(*panel.records, spec);
  };
  {
    const PhaseScope symbolic(report.mine, observer, Phase::symbolic);
    comm.run_phase([&] {
      on_each_backend(backends, [&](std::size_t w) {
        Worker& worker = workers[w];
        if (!plan.split_columns) {
          worker.block_products = team[w]->block_products(*worker.a, *worker.b);
          worker.pattern = team[w]->symbolic(*worker.a, *worker.b);
          worker.report.b_blocks = worker.b->blocks();
          return;
        }
        for (ColumnPanel& panel : worker.panels) {
          build_panel(w, panel);
          worker.block_products += team[w]->block_products(*worker.a, *panel.b);
          panel.pattern = team[w]->symbolic(*worker.a, *panel.b);
          worker.report.b_blocks = std::max(worker.report.b_blocks, panel.b->blocks());
          if (streamed) panel.b.reset();
        }
      });
    });
  }

  // The rank's panel: per row, the backends' tiles (rows split) or the panels' (columns split).
  const std::int32_t rows = row_end - row_begin;
  OutputLayout layout;
  layout.row_begin = row_begin;
  layout.row_end = row_end;
  layout.row_ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<const ColumnPanel*> in_column_order;
  if (!plan.split_columns) {
    std::int64_t at = 0;
    std::int32_t r = 0;
    for (Worker& worker : workers) {
      worker.first_tile = at;
      const std::vector<std::int64_t>& own = worker.pattern->layout().row_ptr;
      for (std::size_t i = 0; i + 1 < own.size(); ++i, ++r)
        layout.row_ptr[static_cast<std::size_t>(r) + 1] = at + own[i + 1];
      at += worker.pattern->tiles();
    }
  } else {
    for (std::size_t q = 0; q < static_cast<std::size_t>(plan.panels); ++q)
      in_column_order.push_back(&workers[q % backends].panels[q / backends]);
    for (const ColumnPanel* panel : in_column_order) {
      const std::vector<std::int64_t>& own = panel->pattern->layout().row_ptr;
      for (std::int32_t r = 0; r < rows; ++r) layout.row_ptr[static_cast<std::size_t>(r) + 1] += own[r + 1] - own[r];
    }
    for (std::int32_t r = 0; r < rows; ++r) layout.row_ptr[static_cast<std::size_t>(r) + 1] += layout.row_ptr[r];
  }
  std::int64_t my_products = 0;
  for (const Worker& worker : workers) my_products += worker.block_products;
  report.block_products = comm.sum(my_products);
  report.rank_work = comm.gather_all(my_products);
  report.imbalance = partition::imbalance(report.rank_work);
  std::int64_t a_blocks = 0;  // the rank's: split by rows over the backends, or whole on each
  for (const Worker& worker : workers) a_blocks = plan.split_columns ? worker.a->blocks() : a_blocks + worker.a->blocks();
  report.a_blocks = comm.sum(a_blocks);
  std::int64_t b_blocks = 0;
  for (const Worker& worker : workers) b_blocks = std::max(b_blocks, worker.report.b_blocks);
  report.b_blocks = comm.max(b_blocks);
  std::int32_t file_row_begin = row_begin, file_row_end = row_end;
  if (labels) std::tie(file_row_begin, file_row_end) = partition::file_rows(*labels, file_shape.block_rows(), row_begin, row_end);
  report.rank_rows = comm.gather_all(static_cast<std::int64_t>(file_row_end - file_row_begin));
  const std::int64_t first_tile = comm.exclusive_prefix_sum(layout.tiles());
  report.c_blocks = comm.sum(layout.tiles());
  if (labels) {
    layout.labels = labels.get();
    layout.file_row_begin = file_row_begin;
    layout.file_row_end = file_row_end;
  }
  comm.run_phase([&] { writer.begin(file_shape, report.c_blocks, first_tile, layout); });

  // Where each panel's tiles go in the rank's rows: after the earlier panels' tiles of the row.
  std::vector<std::vector<std::int64_t>> panel_row_start(in_column_order.size());
  {
    std::vector<std::int64_t> filled(layout.row_ptr.begin(), layout.row_ptr.end() - 1);
    for (std::size_t q = 0; q < in_column_order.size(); ++q) {
      const std::vector<std::int64_t>& own = in_column_order[q]->pattern->layout().row_ptr;
      panel_row_start[q] = filled;
      for (std::int32_t r = 0; r < rows; ++r) filled[static_cast<std::size_t>(r)] += own[r + 1] - own[r];
    }
  }

  // Numeric phase, each backend on its thread, one write at a time.
  const PhaseScope numeric(report.mine, observer, Phase::numeric);
  observer.counting(layout.tiles(), layout.tiles() > 0 ? static_cast<double>(my_products) * shape.m * shape.m *
                                                             shape.m / static_cast<double>(layout.tiles())
                                                       : 0.0);
  SerialSink serial(writer);
  std::atomic<std::int64_t> all_done{0};
  comm.run_phase([&] {
    on_each_backend(backends, [&](std::size_t w) {
      Worker& worker = workers[w];
      kernels::NumericOptions numeric_options;
      numeric_options.chunk_bytes = options.chunk_bytes;
      numeric_options.tiles_computed = observer.tile_counter();
      std::int64_t reported = 0;  // this backend's tiles already added to all_done
      numeric_options.progress = [&](std::int64_t done) {
        const std::int64_t grown = done - reported;
        reported = done;
        observer.tiles_done(all_done += grown);
      };
      const auto add = [&](const kernels::NumericReport& part) {
        worker.numeric.compute_seconds += part.compute_seconds;
        worker.numeric.sink_seconds += part.sink_seconds;
        worker.numeric.chunks += part.chunks;
        worker.numeric.device = part.device;
      };
      const Stopwatch clock;
      if (!plan.split_columns) {
        PlacingSink sink(serial, stride, worker.first_tile);
        add(team[w]->numeric(*worker.a, *worker.b, *worker.pattern, sink, numeric_options));
      } else {
        for (std::size_t k = 0; k < worker.panels.size(); ++k) {
          ColumnPanel& panel = worker.panels[k];
          if (!panel.b) build_panel(w, panel);
          const std::size_t q = k * backends + w;  // the panel's place in column order
          reported = 0;
          PlacingSink sink(serial, stride, &panel.pattern->layout().row_ptr, panel_row_start[q]);
          add(team[w]->numeric(*worker.a, *panel.b, *panel.pattern, sink, numeric_options));
          if (streamed) panel.b.reset();
        }
      }
      worker.report.numeric_seconds = clock.seconds();
    });
  });

  // Reports: the rank's (its slowest backend's kernels, every write), and each backend's.
  kernels::NumericReport& total = workers[0].numeric;
  for (std::size_t w = 1; w < backends; ++w) {
    total.compute_seconds = std::max(total.compute_seconds, workers[w].numeric.compute_seconds);
    total.sink_seconds += workers[w].numeric.sink_seconds;
    total.chunks += workers[w].numeric.chunks;
  }
  report.mine.write = total.sink_seconds;
  report.mine.numeric_compute = total.compute_seconds;
  report.numeric_chunks = comm.max(total.chunks);
  report.device.clear();
  for (std::size_t w = 0; w < backends; ++w) {
    Worker& worker = workers[w];
    WorkerReport& out = worker.report;
    out.device = worker.numeric.device.empty() ? team[w]->name() : worker.numeric.device;
    report.device += (w == 0 ? "" : "; ") + out.device;
    const std::map<std::string, double> steps = team[w]->step_seconds();
    for (const char* step : {"setup: context (warm-up)", "setup: wait for the context"})
      if (const auto it = steps.find(step); it != steps.end()) out.setup_seconds += it->second;
    const kernels::BackendCounters counters = team[w]->counters();
    out.bytes_built = counters.bytes_built;
    out.bytes_from_peers = counters.bytes_from_peers;
    out.device_memory = counters.device_memory;
    out.block_products = worker.block_products;
    if (plan.split_columns) {
      out.b_panels = static_cast<std::int32_t>(worker.panels.size());
      for (const ColumnPanel& panel : worker.panels) {
        out.tiles += panel.pattern->tiles();
        out.b_columns += panel.col_end - panel.col_begin;
      }
    } else {
      out.tiles = worker.pattern->tiles();
    }
    // The backends' steps run side by side: each step's longest.
    for (const auto& [step, seconds] : team[w]->step_seconds())
      report.backend_steps[step] = std::max(report.backend_steps[step], seconds);
    report.workers.push_back(out);
  }
  if (options.kept_until_exit != nullptr)
    for (Worker& worker : workers) {
      options.kept_until_exit->push_back(std::move(worker.pattern));
      options.kept_until_exit->push_back(std::move(worker.a));
      options.kept_until_exit->push_back(std::move(worker.b));
      for (ColumnPanel& panel : worker.panels) {
        options.kept_until_exit->push_back(std::move(panel.pattern));
        options.kept_until_exit->push_back(std::move(panel.b));
      }
    }
}

}  // namespace blockmm::multiply
