// Byte spans of the values of descriptor text (see ukdpack/json/json_spans.hpp).
//
// The text is judged by the one reader (parseDescriptorText) before it is
// scanned, and the scan then runs the reader's own tokenizer (nlohmann's lexer,
// with comments on, over the same bytes): blanks, comments (a `//` comment ends
// at LF, CR or NUL there), strings and the byte order mark are stepped over by
// the code that reads them, so the spans cannot disagree with the document on
// any byte. Only the offsets are worked out here.
#include "ukdpack/json/json_spans.hpp"

#include <nlohmann/json.hpp>

#include "ukdpack/json/json_text.hpp"

namespace ukdpack {

namespace {

using Adapter =
    decltype(nlohmann::detail::input_adapter(static_cast<const char*>(nullptr), static_cast<const char*>(nullptr)));
using Lexer = nlohmann::detail::lexer<Json, Adapter>;
using Token = Lexer::token_type;

class SpanScanner {
 public:
  explicit SpanScanner(std::string_view text)
      : text_(text),
        lexer_(nlohmann::detail::input_adapter(text.data(), text.data() + text.size()), /*ignore_comments=*/true) {}

  std::vector<JsonSpan> run() {
    next();
    JsonSpan root;
    root.path = "$";
    value(std::move(root));
    return std::move(out_);
  }

 private:
  // Reads the next token and where it lies: the lexer counts the bytes it has
  // read (a number's lookahead given back), so a token ends there and begins
  // its own length before.
  void next() {
    token_ = lexer_.scan();
    end_ = lexer_.get_position().chars_read_total;
    std::size_t length = 1;
    switch (token_) {
      case Token::literal_true:
      case Token::literal_null:
        length = 4;
        break;
      case Token::literal_false:
        length = 5;
        break;
      case Token::value_string:
      case Token::value_unsigned:
      case Token::value_integer:
      case Token::value_float:
        // The token's bytes as read: the reader took the text, so a string holds
        // no raw control byte (the only bytes this rendering would escape).
        length = lexer_.get_token_string().size();
        break;
      case Token::end_of_input:
        length = 0;
        break;
      default:
        break;
    }
    begin_ = end_ - length;
  }

  // The blanks that start the line holding `at` (a line ends at LF or CR, as
  // the reader's `//` comment does), and whether anything else precedes `at` on
  // it. `at` only grows, so the line is followed forward, not searched back.
  void lineOf(std::size_t at, JsonSpan& span) {
    for (; lineScan_ < at; ++lineScan_) {
      if (text_[lineScan_] == '\n' || text_[lineScan_] == '\r') lineStart_ = lineScan_ + 1;
    }
    std::size_t start = lineStart_;
    if (start == 0 && text_.substr(0, 3) == "\xEF\xBB\xBF") start = 3;
    std::size_t blank = start;
    while (blank < at && (text_[blank] == ' ' || text_[blank] == '\t')) ++blank;
    span.indent = std::string(text_.substr(start, blank - start));
    span.inlineStart = blank < at;
  }

  // The value whose first token is current, described by `span` (path and key
  // already set); leaves the token after it current.
  void value(JsonSpan span) {
    span.begin = begin_;
    if (!span.member) lineOf(begin_, span);
    const std::size_t slot = out_.size();
    out_.push_back(span);  // a container precedes its contents
    if (token_ == Token::begin_object) {
      object(span.path);
    } else if (token_ == Token::begin_array) {
      array(span.path);
    }
    out_[slot].end = end_;
    next();
  }

  void object(const std::string& path) {
    next();
    while (token_ == Token::value_string) {
      JsonSpan member;
      member.member = true;
      member.keyBegin = begin_;
      member.keyEnd = end_;
      lineOf(begin_, member);
      member.path = jsonPathKey(path, lexer_.get_string());  // the key as the reader decodes it
      next();                                                // ':'
      next();
      value(std::move(member));
      if (token_ == Token::value_separator) next();
    }
  }

  void array(const std::string& path) {
    next();
    std::size_t index = 0;
    while (token_ != Token::end_array && token_ != Token::end_of_input && token_ != Token::parse_error) {
      JsonSpan element;
      element.path = jsonPathIndex(path, index++);
      value(std::move(element));
      if (token_ == Token::value_separator) next();
    }
  }

  std::string_view text_;
  Lexer lexer_;
  Token token_ = Token::uninitialized;
  std::size_t begin_ = 0, end_ = 0;
  std::size_t lineStart_ = 0, lineScan_ = 0;
  std::vector<JsonSpan> out_;
};

}  // namespace

Result<std::vector<JsonSpan>> jsonSpans(std::string_view text) {
  auto parsed = parseDescriptorText(text);
  if (!parsed) return Result<std::vector<JsonSpan>>::failure(parsed.error());
  return Result<std::vector<JsonSpan>>::success(SpanScanner(text).run());
}

}  // namespace ukdpack
