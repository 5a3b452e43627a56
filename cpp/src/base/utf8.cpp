#include "base/utf8.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace ukdpack::detail {

std::size_t firstInvalidUtf8(std::string_view s) {
  std::size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    // Descriptor text is nearly all ASCII: step over 8 such bytes at a time.
    while (i + 8 <= s.size()) {
      std::uint64_t word;
      std::memcpy(&word, b + i, 8);
      if ((word & 0x8080808080808080ull) != 0) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const unsigned char c = b[i];
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return i;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (b[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    const bool overlong = (n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

}  // namespace ukdpack::detail

namespace ukdpack {

std::string escapedText(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto byte = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t bad = detail::firstInvalidUtf8(s.substr(i));
    const std::string_view good = s.substr(i, bad == std::string_view::npos ? s.size() - i : bad);
    for (std::size_t k = 0; k < good.size(); ++k) {
      const auto c = static_cast<unsigned char>(good[k]);
      const auto next = k + 1 < good.size() ? static_cast<unsigned char>(good[k + 1]) : 0;
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20 || c == 0x7f) {
        byte(c);
      } else if (c == 0xC2 && next >= 0x80 && next <= 0x9f) {  // a C1 control, U+0080..U+009F
        byte(next);
        ++k;
      } else if (c == 0xE2 && next == 0x80 && k + 2 < good.size() &&
                 (good[k + 2] == '\xa8' || good[k + 2] == '\xa9')) {  // U+2028, U+2029
        out += good[k + 2] == '\xa8' ? "\\u2028" : "\\u2029";
        k += 2;
      } else {
        out += static_cast<char>(c);
      }
    }
    i += good.size();
    if (i < s.size()) byte(static_cast<unsigned char>(s[i++]));
  }
  return out;
}

std::string utf8Text(std::string s) { return detail::validUtf8(s) ? s : escapedText(s); }

}  // namespace ukdpack
