// A COL380 binary input file written from records, in $TMPDIR (else /tmp), removed with the
// object: for tests of the readers and of what ranks take from the files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

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
    std::ofstream out(path_, std::ios::binary);
    const std::int32_t header[3] = {records.shape.n, records.shape.m, static_cast<std::int32_t>(records.size())};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(records.bytes.data()), static_cast<std::streamsize>(records.bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path_);
  }
  ~TempInput() { std::remove(path_.c_str()); }
  TempInput(const TempInput&) = delete;
  TempInput& operator=(const TempInput&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace blockmm::testing
