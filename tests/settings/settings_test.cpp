// settings/: every variable of the table read with its documented values, a malformed value a
// usage error naming the variable, what was given recorded, and the table and docs/environment.md
// naming the same variables.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "settings/settings.hpp"

namespace blockmm::settings {
namespace {

Settings read_from(const std::map<std::string, std::string>& env) {
  return Settings::read([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    (void)read_from(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Settings, UnsetOrEmptyGivesTheDefaults) {
  const Settings unset = read_from({});
  const Settings empty = read_from({{"BLOCKMM_MPI", ""}, {"BLOCKMM_WRITE_THREADS", ""}, {"BLOCKMM_B_PANELS", ""}});
  for (const Settings* s : {&unset, &empty}) {
    EXPECT_EQ(s->mpi, Switch::automatic);
    EXPECT_EQ(s->progress_interval, 5);
    EXPECT_EQ(s->write_threads, 0);
    EXPECT_EQ(s->file_io, FileIo::automatic);
    EXPECT_TRUE(s->share_b);
    EXPECT_EQ(s->share_rows, ShareRows::automatic);
    EXPECT_EQ(s->library_timeout, 60u);
    EXPECT_EQ(s->workers, 0);
    EXPECT_EQ(s->b_panels, 0);
    EXPECT_TRUE(s->given.empty());
  }
}

TEST(Settings, DocumentedValuesAreRead) {
  const Settings s = read_from({{"BLOCKMM_MPI", "0"},
                                {"BLOCKMM_PROGRESS_INTERVAL", "0.5"},
                                {"BLOCKMM_WRITE_THREADS", "64"},
                                {"BLOCKMM_IO", "pwrite"},
                                {"BLOCKMM_SHARE_B", "0"},
                                {"BLOCKMM_SHARE_ROWS", "give"},
                                {"BLOCKMM_RELABEL", "on"},
                                {"BLOCKMM_LIBRARY_TIMEOUT", "7"},
                                {"BLOCKMM_SIMULATE_NODES", "1"},
                                {"BLOCKMM_WHOLE_INPUTS", "1"},
                                {"BLOCKMM_MPI_PIECE_BYTES", "8"},
                                {"BLOCKMM_TMPFS_FALLOCATE", "1"},
                                {"BLOCKMM_WORKERS", "3"},
                                {"BLOCKMM_HUGE_OUTPUT", "0"},
                                {"BLOCKMM_B_PANELS", "65536"},
                                {"BLOCKMM_CUDA_DENSE", "1"},
                                {"BLOCKMM_CUDA_DENSE_TYPE", "f64"},
                                {"BLOCKMM_CUDA_GENERIC", "1"},
                                {"BLOCKMM_CUDA_BUILD", "host"},
                                {"BLOCKMM_CUDA_TC", "0"},
                                {"BLOCKMM_CUDA_PROBE_MEMORY", "1"},
                                {"BLOCKMM_TEST_NODE_MEMORY", "refuse=2"},
                                {"BLOCKMM_TEST_PAUSE", "numeric"},
                                {"OMP_NUM_THREADS", "4,2"},
                                {"COLUMNS", "132"},
                                {"TERM", "xterm"}});
  EXPECT_EQ(s.mpi, Switch::off);
  EXPECT_EQ(s.progress_interval, 0.5);
  EXPECT_EQ(s.write_threads, 64);
  EXPECT_EQ(s.file_io, FileIo::pwrite);
  EXPECT_FALSE(s.share_b);
  EXPECT_EQ(s.share_rows, ShareRows::give);
  EXPECT_EQ(s.relabel, Switch::on);
  EXPECT_EQ(s.library_timeout, 7u);
  EXPECT_TRUE(s.simulate_nodes);
  EXPECT_TRUE(s.reference_whole_inputs);
  EXPECT_EQ(s.mpi_piece_bytes, 8);
  EXPECT_TRUE(s.tmpfs_fallocate);
  EXPECT_EQ(s.workers, 3);
  EXPECT_FALSE(s.huge_output);
  EXPECT_EQ(s.b_panels, 65536);
  EXPECT_EQ(s.cuda.dense, Switch::on);
  EXPECT_EQ(s.cuda.dense_type, CudaOverrides::DenseType::float64);
  EXPECT_TRUE(s.cuda.generic_kernel);
  EXPECT_EQ(s.cuda.build, CudaOverrides::Build::host);
  EXPECT_EQ(s.cuda.tensor_core_blocks, Switch::off);
  EXPECT_TRUE(s.cuda.probe_memory);
  EXPECT_EQ(s.test_node_memory_refuse, 2);
  EXPECT_TRUE(s.test_pause_numeric);
  EXPECT_EQ(s.omp_num_threads, "4,2");
  EXPECT_EQ(s.columns, 132);
  EXPECT_EQ(s.terminal, "xterm");
  EXPECT_EQ(s.given.size(), table().size() - 0) << "one record a variable given";
  EXPECT_NE(std::find(s.given.begin(), s.given.end(), "BLOCKMM_WORKERS=3"), s.given.end());
}

// Every variable refuses what it does not document, in one line that names it and what it takes.
TEST(Settings, MalformedValuesAreUsageErrorsNamingTheVariable) {
  const std::map<std::string, std::vector<std::string>> bad{
      {"BLOCKMM_MPI", {"2", "yes", "on"}},
      {"BLOCKMM_PROGRESS_INTERVAL", {"0", "-1", "abc", "86401", "5s", "nan"}},
      {"BLOCKMM_WRITE_THREADS", {"0", "65", "-2", "2x", "99999999999999999999"}},
      {"BLOCKMM_IO", {"MPI", "auto", "x"}},
      {"BLOCKMM_SHARE_B", {"2", "no"}},
      {"BLOCKMM_SHARE_ROWS", {"2", "givefirst"}},
      {"BLOCKMM_RELABEL", {"1", "yes"}},
      {"BLOCKMM_LIBRARY_TIMEOUT", {"abc", "0", "86400", "-5"}},
      {"BLOCKMM_SIMULATE_NODES", {"yes", "2"}},
      {"BLOCKMM_WHOLE_INPUTS", {"true"}},
      {"BLOCKMM_MPI_PIECE_BYTES", {"abc", "7", "1073741824"}},
      {"BLOCKMM_TMPFS_FALLOCATE", {"x"}},
      {"BLOCKMM_WORKERS", {"0", "65"}},
      {"BLOCKMM_HUGE_OUTPUT", {"2", "yes"}},
      {"BLOCKMM_B_PANELS", {"0", "65537", "many"}},
      {"BLOCKMM_CUDA_DENSE", {"2"}},
      {"BLOCKMM_CUDA_DENSE_TYPE", {"int8", "auto"}},
      {"BLOCKMM_CUDA_GENERIC", {"2"}},
      {"BLOCKMM_CUDA_BUILD", {"gpu"}},
      {"BLOCKMM_CUDA_TC", {"on"}},
      {"BLOCKMM_CUDA_PROBE_MEMORY", {"yes", "2"}},
      {"BLOCKMM_TEST_NODE_MEMORY", {"refuse", "refuse=x", "stop"}},
      {"BLOCKMM_TEST_PAUSE", {"1", "symbolic"}},
  };
  EXPECT_EQ(bad.size(), table().size()) << "every variable of the table has malformed values here";
  for (const auto& [name, values] : bad)
    for (const std::string& value : values) {
      const std::string message = error_of({{name, value}});
      EXPECT_EQ(message.rfind(name + "='", 0), 0u) << name << "=" << value << ": " << message;
      EXPECT_NE(message.find("expected"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  // A newline in a value is escaped, so the error stays one line.
  const std::string escaped = error_of({{"BLOCKMM_PROGRESS_INTERVAL", "1\nrm -rf"}});
  EXPECT_EQ(escaped.find('\n'), std::string::npos) << escaped;
}

// docs/environment.md lists exactly the table's variables (the one table users read), before the
// test harness's own.
TEST(Settings, TheDocsListEveryVariableOfTheTable) {
  std::ifstream docs(std::string(BLOCKMM_SOURCE_DIR) + "/docs/environment.md");
  ASSERT_TRUE(docs) << "docs/environment.md is missing";
  std::stringstream text;
  text << docs.rdbuf();
  std::set<std::string> documented;
  const std::regex row(R"(^\| `(BLOCKMM_[A-Z_]+)` \|)");
  std::string line;
  while (std::getline(text, line)) {
    if (line.rfind("## Read by the test harness", 0) == 0) break;  // not blockmm's own
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.insert(m[1]);
  }
  std::set<std::string> in_table;
  for (const Variable& v : table()) in_table.insert(v.name);
  EXPECT_EQ(documented, in_table);
}

}  // namespace
}  // namespace blockmm::settings
