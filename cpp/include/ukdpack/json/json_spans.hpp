// Where each value of a descriptor's JSON text lies, in bytes: what a tool
// that rewrites descriptors (ukdpack migrate) needs to splice members in and
// out while leaving every other byte, comments included, as it was.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack {

// One value of the document. Offsets are bytes into the text given, half-open
// [begin, end). The key fields are set only for an object member.
struct JsonSpan {
  std::string path;          // "$", "$.kernelDescriptors[0].name", as messages write it
  std::size_t begin = 0;     // the value's first byte
  std::size_t end = 0;       // one past its last byte: where ",\n<indent>\"key\": v" inserts a next member
  bool member = false;       // an object member (else the root or an array element)
  std::size_t keyBegin = 0;  // the key's opening quote
  std::size_t keyEnd = 0;    // one past its closing quote
  std::string indent;        // leading blanks of the line (ended by LF or CR) the member or value starts on
  bool inlineStart = false;  // something other than blanks precedes it on its line ({"a": 1, "b": 2})
};

// Every value of `text`, in document order (a container before its contents).
// Read from the one scanner's tape (cpp/src/json/json_tape.cpp), the reading
// parseDescriptorText makes: what the reader refuses is refused here with its
// diagnostic, and blanks, comments, strings and the byte order mark are
// stepped over by the very scan that read the values.
Result<std::vector<JsonSpan>> jsonSpans(std::string_view text);

}  // namespace ukdpack
