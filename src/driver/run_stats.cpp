#include "driver/run_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace blockmm::driver {
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

}  // namespace

std::string stats_json(const RunStats& s) {
  nlohmann::json j;
  j["backend"] = s.backend;
  j["device"] = s.device;
  j["output_format"] = s.output_format;
  j["ranks"] = s.ranks;
  j["threads_per_rank"] = s.threads;
  j["n"] = s.n;
  j["m"] = s.m;
  j["blocks"] = {{"a_records", s.a_records}, {"b_records", s.b_records}, {"a_nonzero", s.a_blocks},
                 {"b_nonzero_used", s.b_blocks}, {"c", s.c_blocks}};
  j["block_products"] = s.block_products;
  j["useful_macs"] = s.useful_macs();
  j["output_bytes"] = s.output_bytes;
  j["seconds"] = phases_json(s.slowest);
  j["gmacs_per_second_numeric"] = s.slowest.numeric > 0 ? s.useful_macs() / s.slowest.numeric / 1e9 : 0.0;
  j["gmacs_per_second_total"] = s.slowest.total > 0 ? s.useful_macs() / s.slowest.total / 1e9 : 0.0;
  j["imbalance"] = s.imbalance;
  j["numeric_chunks"] = s.numeric_chunks;
  if (!s.backend_steps.empty()) j["backend_seconds"] = s.backend_steps;
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < s.per_rank.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"block_rows", s.rank_rows.at(r)},
                     {"work", s.rank_work.at(r)},
                     {"bytes_exchanged", s.rank_bytes_exchanged.at(r)},
                     {"seconds", phases_json(s.per_rank[r])}});
  }
  j["per_rank"] = ranks;
  return j.dump(2);
}

std::string stats_text(const RunStats& s) {
  std::ostringstream out;
  const PhaseTimes& t = s.slowest;
  out << "blockmm stats: backend " << s.backend << " (" << s.device << "), " << s.ranks << " rank(s) x " << s.threads
      << " thread(s), output " << s.output_format << "\n";
  out << "  n = " << s.n << ", m = " << s.m << "; blocks: A " << s.a_blocks << " non-zero of " << s.a_records
      << ", B " << s.b_blocks << " used of " << s.b_records << ", C " << s.c_blocks << " ("
      << fixed(s.output_bytes / 1e6, 1) << " MB)\n";
  out << "  work: " << s.block_products << " block products, " << s.useful_macs() << " useful multiply-adds; "
      << fixed(s.slowest.numeric > 0 ? s.useful_macs() / s.slowest.numeric / 1e9 : 0.0, 2) << " GMAC/s in numeric, "
      << fixed(s.slowest.total > 0 ? s.useful_macs() / s.slowest.total / 1e9 : 0.0, 2) << " GMAC/s end to end\n";
  out << "  seconds (slowest rank): read " << fixed(t.read, 3) << ", exchange " << fixed(t.exchange, 3) << ", build "
      << fixed(t.build, 3) << ", setup " << fixed(t.setup, 3) << ", symbolic " << fixed(t.symbolic, 3)
      << ", numeric " << fixed(t.numeric, 3) << " (kernels busy " << fixed(t.numeric_compute, 3) << ", writing "
      << fixed(t.write, 3) << "), commit " << fixed(t.commit, 3) << "; total "
      << fixed(t.total, 3) << "\n";
  if (s.ranks > 1) {
    out << "  balance: imbalance (max/mean work) " << fixed(s.imbalance, 3) << "\n";
    for (std::size_t r = 0; r < s.per_rank.size(); ++r)
      out << "    rank " << r << ": " << s.rank_rows[r] << " block-rows, work " << s.rank_work[r] << ", exchanged "
          << fixed(s.rank_bytes_exchanged[r] / 1e6, 2) << " MB, total " << fixed(s.per_rank[r].total, 3) << " s\n";
  }
  return out.str();
}

}  // namespace blockmm::driver
