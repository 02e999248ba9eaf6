// A COL380 binary input file written from records (the harness's encode), in $TMPDIR (else
// /tmp), removed with the object: for tests of the readers and of what ranks take from the files.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "support/harness.hpp"
#include "core/block_matrix.hpp"

namespace blockmm::testing {

class TempInput {
 public:
  TempInput(const InputRecords& records, const std::string& tag) {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/blockmm-" + tag + "-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw std::runtime_error("mkstemp " + name + " failed");
    ::close(fd);
    path_ = name;
    e2e::write_bytes(path_, e2e::encode(records));
  }
  ~TempInput() { std::remove(path_.c_str()); }
  TempInput(const TempInput&) = delete;
  TempInput& operator=(const TempInput&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace blockmm::testing
