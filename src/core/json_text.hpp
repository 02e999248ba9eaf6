// Names in JSON: file names are bytes on Linux, and a JSON text is UTF-8. json_text() turns any
// bytes into UTF-8 that keeps them readable: well-formed UTF-8 passes unchanged, and each other
// byte becomes the character of the same number (U+0080-U+00FF, as Latin-1 reads it), so that no
// name makes a JSON writer fail (docs/design.md, record 18). Used by blockmm's stats
// and blockmm-info --json.
#pragma once

#include <cstddef>
#include <string>

namespace blockmm {

// The length of the well-formed UTF-8 sequence at `at` (Unicode's table 3-7: no overlong forms,
// no surrogates, nothing past U+10FFFF), or 0 where none starts there.
inline std::size_t utf8_sequence(const unsigned char* at, std::size_t left) {
  const unsigned char lead = at[0];
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (left < length || at[1] < low || at[1] > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (at[k] < 0x80 || at[k] > 0xBF) return 0;
  return length;
}

inline std::string json_text(const std::string& bytes) {
  std::string text;
  text.reserve(bytes.size());
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t length = utf8_sequence(data + at, bytes.size() - at);
    if (length > 0) {
      text.append(bytes, at, length);
      at += length;
    } else {
      text += static_cast<char>(0xC0 | (data[at] >> 6));
      text += static_cast<char>(0x80 | (data[at] & 0x3F));
      ++at;
    }
  }
  return text;
}

}  // namespace blockmm
