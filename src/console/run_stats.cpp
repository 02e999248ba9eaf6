#include "console/run_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/backend_steps.hpp"
#include "core/json_text.hpp"

namespace blockmm::console {
namespace {

nlohmann::json phases_json(const PhaseTimes& t) {
  return {{"read", t.read},       {"exchange", t.exchange}, {"build", t.build},
          {"setup", t.setup},     {"symbolic", t.symbolic}, {"numeric", t.numeric},
          {"numeric_compute", t.numeric_compute},           {"write", t.write},
          {"commit", t.commit},   {"total", t.total}};
}

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

// "12.3 MB", "4.56 GB": decimal units, as file sizes are usually read.
std::string bytes_text(double bytes) {
  if (bytes >= 1e12) return fixed(bytes / 1e12, 2) + " TB";
  if (bytes >= 1e9) return fixed(bytes / 1e9, 2) + " GB";
  if (bytes >= 1e6) return fixed(bytes / 1e6, 1) + " MB";
  if (bytes >= 1e3) return fixed(bytes / 1e3, 1) + " kB";
  return with_thousands(static_cast<std::int64_t>(bytes)) + " B";
}

// One phase line: name, seconds, and what it contains.
std::string phase_line(const char* name, double seconds, const std::string& note = "") {
  char head[64];
  std::snprintf(head, sizeof head, "    %-10s %9.3f s", name, seconds);
  return std::string(head) + (note.empty() ? "" : "   " + note) + "\n";
}

// Every string of `j`, keys included, as json_text.
void make_text_utf8(nlohmann::json& j) {
  if (j.is_string()) {
    j = json_text(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (nlohmann::json& element : j) make_text_utf8(element);
  } else if (j.is_object()) {
    nlohmann::json fixed = nlohmann::json::object();
    for (auto& [key, value] : j.items()) {
      make_text_utf8(value);
      fixed[json_text(key)] = std::move(value);
    }
    j = std::move(fixed);
  }
}

}  // namespace

std::string with_thousands(std::int64_t value) {
  const bool negative = value < 0;
  std::string digits = std::to_string(negative ? -static_cast<unsigned long long>(value) : static_cast<unsigned long long>(value));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string stats_json(const RunStats& s) {
  nlohmann::json j;
  j["version"] = s.version;
  j["command_line"] = s.command_line;
  nlohmann::json inputs = nlohmann::json::array();
  for (const InputDescription& in : s.inputs) inputs.push_back({{"path", in.path}, {"format", in.format}, {"bytes", in.bytes}});
  j["inputs"] = inputs;
  j["output"] = s.output_path;
  j["host"] = s.host;
  j["date"] = s.started_utc;
  j["backend"] = s.backend;
  j["device"] = s.device;
  j["output_format"] = s.output_format;
  j["ranks"] = s.ranks;
  j["threads_per_rank"] = s.threads;
  // GPU names, one a rank, when the cuda backend ran (empty for cpu and reference).
  nlohmann::json gpus = nlohmann::json::array();
  if (s.backend == "cuda")
    for (const std::string& d : s.rank_devices) gpus.push_back(d);
  j["gpus"] = gpus;
  j["n"] = s.n;
  j["m"] = s.m;
  j["blocks"] = {{"a_records", s.a_records}, {"b_records", s.b_records}, {"a_nonzero", s.a_blocks},
                 {"b_nonzero_used", s.b_blocks}, {"c", s.c_blocks}};
  j["block_products"] = s.block_products;
  j["useful_macs"] = s.useful_macs();
  j["output_bytes"] = s.output_bytes;
  j["output_write"] = {{"parts", s.output_parts},           {"mapped", s.output_mapped},
                       {"threads", s.output_threads},       {"huge_extents", s.output_huge_extents},
                       {"extents", s.output_extents},       {"tmpfs", s.output_tmpfs}};
  j["seconds"] = phases_json(s.slowest);
  j["gmacs_per_second_numeric"] = s.slowest.numeric > 0 ? s.useful_macs() / s.slowest.numeric / 1e9 : 0.0;
  j["gmacs_per_second_total"] = s.slowest.total > 0 ? s.useful_macs() / s.slowest.total / 1e9 : 0.0;
  j["imbalance"] = s.imbalance;
  j["numeric_chunks"] = s.numeric_chunks;
  nlohmann::json steps = nlohmann::json::object();
  for (const NamedStep& step : named_steps())
    if ((s.backend_steps.*step.field).measured) steps[step.name] = (s.backend_steps.*step.field).seconds;
  if (!steps.empty()) j["backend_seconds"] = steps;
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < s.per_rank.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"block_rows", s.rank_rows.at(r)},
                     {"work", s.rank_work.at(r)},
                     {"bytes_exchanged", s.rank_bytes_exchanged.at(r)},
                     {"tiles_for_neighbours", r < s.rank_tiles_for_neighbours.size() ? s.rank_tiles_for_neighbours[r] : 0},
                     {"b_records", r < s.rank_b_records.size() ? s.rank_b_records[r] : 0},
                     {"seconds", phases_json(s.per_rank[r])}});
  }
  j["per_rank"] = ranks;
  // Rank 0's backends: one a GPU for cuda (the team), with each one's share and bytes moved.
  nlohmann::json team = nlohmann::json::array();
  for (const multiply::WorkerReport& w : s.workers)
    team.push_back({{"device", w.device},
                    {"device_memory",
                     {{"budget", w.device_memory.budget},
                      {"ledger_peak", w.device_memory.ledger_peak},
                      {"observed_peak", w.device_memory.observed_peak},
                      {"beyond_arrays_peak", w.device_memory.beyond_arrays_peak},
                      {"every_allocation", w.device_memory.every_allocation}}},
                    {"block_products", w.block_products},
                    {"block_rows", w.rows},
                    {"b_panels", w.b_panels},
                    {"b_columns", w.b_columns},
                    {"b_blocks", w.b_blocks},
                    {"tiles", w.tiles},
                    {"bytes_built", w.bytes_built},
                    {"bytes_from_peers", w.bytes_from_peers},
                    {"numeric_seconds", w.numeric_seconds},
                    {"setup_seconds", w.setup_seconds}});
  j["team"] = {{"layout", s.team_layout}, {"backends", team}, {"refused", s.plan_refused}};
  j["settings"] = s.settings;
  j["input_bytes_read"] = s.input_bytes_read;
  j["distribution"] = s.distribution;
  j["shared_rows"] = s.shared_rows;
  j["b_shared_on_node"] = s.b_shared_on_node;
  j["nodes"] = s.nodes;
  j["nodes_simulated"] = s.nodes_simulated;
  j["start_settings"] = s.start_settings;
  j["input_bytes_moved"] = {
      {"within_node", {{"records", s.record_bytes_within_node}, {"index", s.index_bytes_within_node}}},
      {"between_nodes", {{"records", s.record_bytes_between_nodes}, {"index", s.index_bytes_between_nodes}}}};
  // Written after the product's commit: nothing here may fail. Every string is UTF-8 by now; the
  // writer's own replacement of invalid bytes stays as a second guard.
  make_text_utf8(j);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string stats_text(const RunStats& s) {
  std::ostringstream out;
  const PhaseTimes& t = s.slowest;
  out << "blockmm stats: backend " << s.backend << " on " << s.device << "; " << s.ranks
      << (s.ranks == 1 ? " rank" : " ranks") << " x " << s.threads << (s.threads == 1 ? " thread" : " threads")
      << "; output " << s.output_format << "\n";
  out << "  matrix: n = " << with_thousands(s.n) << ", m = " << s.m << "\n";
  out << "  blocks: A " << with_thousands(s.a_blocks) << " non-zero of " << with_thousands(s.a_records) << ", B "
      << with_thousands(s.b_blocks) << " used of " << with_thousands(s.b_records) << ", C "
      << with_thousands(s.c_blocks) << " = " << bytes_text(static_cast<double>(s.output_bytes)) << "\n";
  out << "  output: " << (s.output_parts > 0 ? with_thousands(s.output_parts) + " part files beside the main file"
                                              : std::string("one file"))
      << ", " << (s.output_mapped ? "copied into shared maps by " + std::to_string(s.output_threads) +
                                        (s.output_threads == 1 ? " thread" : " threads")
                                  : std::string("written by pwrite"));
  if (s.output_extents > 0)
    out << ", " << with_thousands(s.output_huge_extents) << " of " << with_thousands(s.output_extents)
        << " 2 MiB extents in huge folios";
  if (!s.output_tmpfs.empty()) out << " (tmpfs: " << s.output_tmpfs << ")";
  out << "\n";
  out << "  work: " << with_thousands(s.block_products) << " block products = " << with_thousands(s.useful_macs())
      << " useful multiply-adds\n";
  out << "  rate: " << fixed(t.numeric > 0 ? s.useful_macs() / t.numeric / 1e9 : 0.0, 2) << " GMAC/s in numeric, "
      << fixed(t.total > 0 ? s.useful_macs() / t.total / 1e9 : 0.0, 2) << " GMAC/s end to end\n";
  out << "  seconds" << (s.ranks > 1 ? ", each phase its slowest rank:" : ":") << "\n";
  out << phase_line("read", t.read);
  if (s.ranks > 1) out << phase_line("exchange", t.exchange);
  out << phase_line("build", t.build) << phase_line("setup", t.setup) << phase_line("symbolic", t.symbolic);
  // Both sub-times lie inside numeric on every rank (the last write is waited for before the
  // phase ends), so neither exceeds it. Writing runs beside the kernels on another thread: it
  // overlaps them, so the two do not add up to numeric.
  out << phase_line("numeric", t.numeric,
                    "kernels busy " + fixed(t.numeric_compute, 3) + " s of it, " + with_thousands(s.numeric_chunks) +
                        (s.numeric_chunks == 1 ? " chunk" : " chunks"));
  out << phase_line("  writing", t.write, "inside numeric, beside the kernels: overlaps them across chunks");
  out << phase_line("commit", t.commit, "sync, close, rename") << phase_line("total", t.total);
  if (s.workers.size() > 1) {
    out << "  team: " << s.team_layout << "; input records read " << bytes_text(static_cast<double>(s.input_bytes_read))
        << "\n";
    for (const multiply::WorkerReport& w : s.workers)
      out << "    " << w.device << ": work " << with_thousands(w.block_products) << ", "
          << (w.b_panels > 0 ? std::to_string(w.b_panels) + " panels of B, " + with_thousands(w.b_columns) + " block-columns"
                             : with_thousands(w.rows) + " block-rows")
          << ", setup " << fixed(w.setup_seconds, 3) << " s, built from " << bytes_text(static_cast<double>(w.bytes_built))
          << ", copied in "
          << bytes_text(static_cast<double>(w.bytes_from_peers)) << ", numeric " << fixed(w.numeric_seconds, 3) << " s\n";
  }
  if (s.ranks > 1) {
    out << "  input moved: within nodes " << bytes_text(static_cast<double>(s.record_bytes_within_node))
        << " of records + " << bytes_text(static_cast<double>(s.index_bytes_within_node)) << " of row requests; between nodes "
        << bytes_text(static_cast<double>(s.record_bytes_between_nodes)) << " of records + "
        << bytes_text(static_cast<double>(s.index_bytes_between_nodes)) << " of row requests (" << s.nodes
        << (s.nodes == 1 ? " node" : " nodes") << (s.nodes_simulated ? ", simulated: BLOCKMM_SIMULATE_NODES" : "")
        << "; " << s.distribution << ")\n";
    out << "  balance: imbalance " << fixed(s.imbalance, 3) << " = max/mean work\n";
    for (std::size_t r = 0; r < s.per_rank.size(); ++r)
      out << "    rank " << r << ": " << with_thousands(s.rank_rows[r]) << " block-rows, work "
          << with_thousands(s.rank_work[r]) << ", exchanged " << bytes_text(static_cast<double>(s.rank_bytes_exchanged[r]))
          << (s.shared_rows && r < s.rank_tiles_for_neighbours.size()
                  ? ", computed " + with_thousands(s.rank_tiles_for_neighbours[r]) + " of its neighbours' tiles"
                  : std::string())
          << ", total " << fixed(s.per_rank[r].total, 3) << " s\n";
  }
  return out.str();
}

}  // namespace blockmm::console
