// UTF-8 validity of untrusted text (descriptor files, archive TOC strings).
#pragma once

#include <cstddef>
#include <string_view>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack::detail {

// Index of the first byte that is not part of valid UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or npos.
std::size_t firstInvalidUtf8(std::string_view s);

inline bool validUtf8(std::string_view s) { return firstInvalidUtf8(s) == std::string_view::npos; }

}  // namespace ukdpack::detail
