// Several products in one run (--batch FILE, --product '...'): one MPI start, one CUDA start and
// the same backends for all of them, each product with its own output, stats and exit status.
// A product is a line `[options] A B OUT`, read as blockmm's own command line after the run's
// options, so that its options override the run's.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace blockmm::driver {

// One product's words and where they came from ("FILE:LINE" or "--product N"), for messages.
struct BatchLine {
  std::vector<std::string> words;
  std::string origin;
};

// Words of a line as a shell splits them: blanks separate, '...' keeps everything, "..." keeps
// everything but \" and \\, a backslash outside quotes keeps the next character. Throws
// UsageError naming `origin` for an unterminated quote or a trailing backslash.
std::vector<std::string> split_words(const std::string& line, const std::string& origin);

// The lines of a batch file (`-`: standard input): every line that is not blank or a comment
// (first word starting with #), each handed to `take` as soon as it is read, so that a file that
// is no batch (a matrix given by mistake) fails at its first line rather than after all of it
// has been held in memory. Throws UsageError naming the file for an unreadable file, a malformed
// line, or a file with no product; `take` may throw to stop at a line.
void read_batch_file(const std::string& path, const std::function<void(BatchLine&&)>& take);
std::vector<BatchLine> read_batch_file(const std::string& path);

// Words joined by blanks, as a message quotes them (quoted_value: control characters escaped, cut
// with "…" past kQuotedValueBytes).
std::string joined(const std::vector<std::string>& words);

// The run's own arguments without --batch and --product (and their values), to put before each
// product's words.
std::vector<std::string> arguments_without_batch(int argc, char** argv);

}  // namespace blockmm::driver
