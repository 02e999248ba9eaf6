// Error types of blockmm and the exit code each maps to (docs/running.md, "Messages").
// Every failure the user can cause carries a one-line message naming the file, the record and
// the offending value; the driver prints it as "blockmm: error: <message>".
#pragma once

#include <stdexcept>
#include <string>

namespace blockmm {

enum class ExitCode : int {
  ok = 0,
  other = 1,
  usage = 2,
  bad_input = 3,
  output_failure = 4,
  resource = 5,  // out of memory or device failure
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};
struct InputError : Error {
  explicit InputError(const std::string& message) : Error(ExitCode::bad_input, message) {}
};
struct OutputError : Error {
  explicit OutputError(const std::string& message) : Error(ExitCode::output_failure, message) {}
};
struct ResourceError : Error {
  explicit ResourceError(const std::string& message) : Error(ExitCode::resource, message) {}
};
// A device or the host out of memory (a GPU's allocation refused, say), apart from the other
// resource failures: what a caller that falls back on another device must not swallow.
struct OutOfMemoryError : ResourceError {
  using ResourceError::ResourceError;
};

// A message fit for one line on a terminal: control characters (from file names, say: a newline,
// an escape sequence) written as \xHH. Other bytes, UTF-8 included, pass unchanged, unless
// `ascii_only` (bytes cut from a file at any offset, where a UTF-8 sequence may be split).
inline std::string escape_control_characters(const std::string& text, bool ascii_only = false) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f && !(ascii_only && byte >= 0x80)) {
      out += c;
      continue;
    }
    static const char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[byte >> 4];
    out += hex[byte & 15];
  }
  return out;
}

// How much of a value the user gave (an option's, an environment variable's, a batch line, a
// library's message about them) a message quotes: enough to recognize it, never a line of any
// length (a 100 000-character BLOCKMM_SHARE_B once gave a 100 049-byte error line).
constexpr std::size_t kQuotedValueBytes = 160;

// `text` fit to quote in a one-line message: its first `limit` bytes (cut at a character boundary)
// and "…" where it is longer, control characters written as escape_control_characters writes them.
// Every message that quotes what the user gave goes through here (the Python tools: errors.py
// quoted).
inline std::string quoted_value(const std::string& text, std::size_t limit = kQuotedValueBytes) {
  if (text.size() <= limit) return escape_control_characters(text);
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return escape_control_characters(text.substr(0, cut)) + "\xE2\x80\xA6";  // "…" in UTF-8
}

}  // namespace blockmm
