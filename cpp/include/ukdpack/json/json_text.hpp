// The JSON layer's values: the DOM type, a value kept as the text it was
// written as, JSON path wording, and the strict reader of descriptor text
// (a Json built from the one scanner's tape, cpp/src/json/json_tape.hpp).
// It knows nothing of descriptors: the model (ukdpack/model/) reads these.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack {

using Json = nlohmann::json;

// A JSON value as written: a view of a descriptor file's text (the text is
// shared by every view of that file and lives as long as the last one), read
// into a Json when asked; or a value built in memory. The loader keeps each
// kernel's `raw` and each source's `fields` so: a load never builds them, and
// most are never asked for.
class JsonText {
 public:
  JsonText() = default;                               // null
  JsonText(Json value) : value_(std::move(value)) {}  // NOLINT: a built value reads as itself
  JsonText(std::shared_ptr<const std::string> text, std::size_t offset, std::size_t size)
      : text_(std::move(text)), offset_(offset), size_(size) {}

  // The value: the built one, or the text read again, comments stepped over
  // (every call; the text was read strictly when the file was loaded).
  Json json() const;
  bool isNull() const { return !text_ && value_.is_null(); }
  // The bytes it was written as; empty for a built value.
  std::string_view text() const { return text_ ? std::string_view(*text_).substr(offset_, size_) : std::string_view(); }

 private:
  std::shared_ptr<const std::string> text_;
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
  Json value_;
};

// JSON path helpers: "$" + ".key" (or ["key"]) + "[i]".
std::string jsonPathKey(const std::string& base, std::string_view key);
std::string jsonPathIndex(const std::string& base, std::size_t index);

// JSON text as descriptors are written: UTF-8 (a BOM is allowed), `//` and
// `/* */` comments, no duplicate key in one object, integers that fit an int64,
// finite numbers, nesting up to 128 levels. A failure is a diagnostic with an
// empty file (the caller fills it in); a syntax error is worded as
// nlohmann::json::parse words it.
Result<Json> parseDescriptorText(std::string_view text);

}  // namespace ukdpack
