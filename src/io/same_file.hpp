// Whether a file a run writes is one it reads, or one another of its outputs writes
// (docs/promises.md, "Never over an input"): the one place that decides it for blockmm, its
// batches and the C++ tools (python/blockmm/cli.py decides it alike for the Python tools). Two
// names are one file when they reach the same device and inode, links followed (hard links and
// symlinks alike); a name that does not exist yet is one file with another that names the same
// entry of the same folder. The files a run reads are its inputs as given, and for a parted HDF5
// input (docs/output.md) the part files its reader opens beside it, which its user block names.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace blockmm::io {

// Which of `inputs` (or of their part files) `output` is: `input` its index (inputs.size() for
// none), `part` the part file's name where it is one of that input's parts ("" for the input
// itself). An output that does not exist is none, and so is a character device (/dev/null: written
// in place, never an input; under mpirun each rank's /dev/stdin is another file).
struct InputMatch {
  std::size_t input = 0;
  std::string part;
};
InputMatch input_written_by(const std::string& output, const std::vector<std::string>& inputs);

// UsageError (exit 2) when `output` is one of `inputs` or of their part files. `what` names the
// output in the message ("output", "--stats-file").
void check_not_an_input(const std::string& output, const std::string& what, const std::vector<std::string>& inputs);
// UsageError when two outputs would be the same file or the same directory entry.
void check_distinct_outputs(const std::string& first, const std::string& second, const std::string& second_what);
// The first two of `paths` (in order) that name the same file or the same directory entry, as
// check_distinct_outputs tells them; (size, size) when there are none. Character devices
// (/dev/null, written in place) may repeat.
std::pair<std::size_t, std::size_t> first_repeated_output(const std::vector<std::string>& paths);

// The link `path` leads through into /proc (as /dev/stdin leads to /proc/self/fd/0: a name for
// an open descriptor, which is another file in each process), as its text; "" where it leads
// through none.
std::string descriptor_link(const std::string& path);

}  // namespace blockmm::io
