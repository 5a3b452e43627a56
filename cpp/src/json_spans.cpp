// Byte spans of the values of descriptor text (see ukdpack/json_spans.hpp).
//
// The text is judged by the one reader (parseDescriptorText) before it is
// scanned, so the scan below may trust its shape: it only has to step over
// blanks, comments and strings correctly, never to diagnose.
#include "ukdpack/json_spans.hpp"

#include "ukdpack/descriptors.hpp"
#include "ukdpack/loader.hpp"

namespace ukdpack {

namespace {

class SpanScanner {
 public:
  explicit SpanScanner(std::string_view text) : text_(text) {}

  std::vector<JsonSpan> run() {
    // A UTF-8 byte order mark is allowed before the document.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
    skipBlanks();
    JsonSpan root;
    root.path = "$";
    value(std::move(root));
    return std::move(out_);
  }

 private:
  void skipBlanks() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        const std::size_t nl = text_.find('\n', pos_);
        pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
        const std::size_t close = text_.find("*/", pos_ + 2);
        pos_ = close == std::string_view::npos ? text_.size() : close + 2;
      } else {
        return;
      }
    }
  }

  // Past the string whose opening quote is at pos_; a backslash escapes the
  // next byte, so an escaped quote does not end it.
  void skipString() {
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
    ++pos_;
  }

  // The blanks that start the line holding `at`, and whether anything else
  // precedes `at` on that line.
  void lineOf(std::size_t at, JsonSpan& span) const {
    const std::size_t nl = text_.rfind('\n', at == 0 ? 0 : at - 1);
    std::size_t start = (nl == std::string_view::npos || at == 0) ? 0 : nl + 1;
    if (start == 0 && text_.substr(0, 3) == "\xEF\xBB\xBF") start = 3;
    std::size_t blank = start;
    while (blank < at && (text_[blank] == ' ' || text_[blank] == '\t')) ++blank;
    span.indent = std::string(text_.substr(start, blank - start));
    span.inlineStart = blank < at;
  }

  // The value at pos_, described by `span` (path and key already set).
  void value(JsonSpan span) {
    span.begin = pos_;
    if (!span.member) lineOf(pos_, span);
    const std::size_t slot = out_.size();
    out_.push_back(span);  // a container precedes its contents
    const char c = pos_ < text_.size() ? text_[pos_] : '\0';
    if (c == '{') {
      object(span.path);
    } else if (c == '[') {
      array(span.path);
    } else if (c == '"') {
      skipString();
    } else {
      // A number, true, false or null: runs to the next delimiter.
      while (pos_ < text_.size() && std::string_view(",]} \t\r\n/").find(text_[pos_]) == std::string_view::npos) ++pos_;
    }
    out_[slot].end = pos_;
  }

  void object(const std::string& path) {
    ++pos_;
    skipBlanks();
    while (pos_ < text_.size() && text_[pos_] != '}') {
      JsonSpan member;
      member.member = true;
      member.keyBegin = pos_;
      lineOf(pos_, member);
      skipString();
      member.keyEnd = pos_;
      // The key as the reader decodes it (escapes included): the reader itself says.
      const auto key = parseDescriptorText(text_.substr(member.keyBegin, member.keyEnd - member.keyBegin));
      member.path = jsonPathKey(path, key && key.value().is_string() ? key.value().get<std::string>() : std::string());
      skipBlanks();
      ++pos_;  // ':'
      skipBlanks();
      value(std::move(member));
      skipBlanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skipBlanks();
      }
    }
    ++pos_;
  }

  void array(const std::string& path) {
    ++pos_;
    skipBlanks();
    std::size_t index = 0;
    while (pos_ < text_.size() && text_[pos_] != ']') {
      JsonSpan element;
      element.path = jsonPathIndex(path, index++);
      value(std::move(element));
      skipBlanks();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skipBlanks();
      }
    }
    ++pos_;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::vector<JsonSpan> out_;
};

}  // namespace

Result<std::vector<JsonSpan>> jsonSpans(std::string_view text) {
  auto parsed = parseDescriptorText(text);
  if (!parsed) return Result<std::vector<JsonSpan>>::failure(parsed.error());
  return Result<std::vector<JsonSpan>>::success(SpanScanner(text).run());
}

}  // namespace ukdpack
