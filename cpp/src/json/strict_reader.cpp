// The strict reader of descriptor text (parseDescriptorText): the tape's scan
// (json_tape.cpp) built into a Json, and the wording of a syntax error, which
// nlohmann's parser gives (the error path only).
#include <algorithm>
#include <optional>
#include <string>

#include "base/utf8.hpp"
#include "json/json_tape.hpp"
#include "ukdpack/json/json_text.hpp"

namespace ukdpack {

namespace {

// The line an unterminated /* comment starts on, if one does: the refusal names
// it (the parser's own message names only where the text ended).
std::optional<std::size_t> unterminatedCommentLine(std::string_view text) {
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (text.substr(i, 2) == "//") {
      const std::size_t end = text.find('\n', i);
      if (end == std::string_view::npos) return std::nullopt;
      i = end;
    } else if (text.substr(i, 2) == "/*") {
      const std::size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) {
        return 1 +
               static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(i), '\n'));
      }
      i = end + 1;
    }
  }
  return std::nullopt;
}

// The parser's message with each 'quoted' token it holds (what it last read) shortened.
std::string shortQuotes(const std::string& message) {
  std::string out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t open = message.find('\'', i);
    const std::size_t close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (close == std::string::npos) return out + message.substr(i);
    const std::string_view quoted = std::string_view(message).substr(open + 1, close - open - 1);
    out += message.substr(i, open + 1 - i) + detail::shortQuote(quoted) + "'";
    i = close + 1;
  }
}

// "[json.exception.parse_error.101] parse error at line 2, column 3: syntax
// error while parsing ..." -> "syntax error while parsing ... at line 2 column 3".
std::string wordParseError(const std::string& what) {
  const std::string marker = "parse error at line ";
  const std::size_t at = what.find(marker);
  if (at == std::string::npos) {
    const std::size_t colon = what.find("] ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }
  const std::size_t colon = what.find(": ", at);
  std::string where = what.substr(at + marker.size(), colon - at - marker.size());  // "2, column 3"
  const std::size_t comma = where.find(", column ");
  if (comma != std::string::npos) where = where.substr(0, comma) + " column " + where.substr(comma + 9);
  const std::string msg = colon == std::string::npos ? "" : what.substr(colon + 2);
  return msg + " at line " + where;
}

}  // namespace

namespace detail {

std::string shortQuote(std::string_view text) {
  constexpr std::size_t kShown = 40;
  if (text.size() <= kShown) return std::string(text);
  return std::string(text.substr(0, kShown / 2)) + "..." + std::string(text.substr(text.size() - kShown / 2)) + " (" +
         std::to_string(text.size()) + " characters)";
}

Diagnostic syntaxError(std::string_view text) {
  try {
    // The tape stopped at a syntax error: nlohmann's parser, over the same text
    // and with comments on, stops there too and words it.
    (void)Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const Json::exception& e) {
    if (const auto line = unterminatedCommentLine(text)) {
      return makeError(codes::JSON_SYNTAX, "", "", "unterminated /* comment starting on line " + std::to_string(*line));
    }
    // The parser quotes what it last read, which may end inside a character (a
    // non-breaking space, 'été'): its bytes are escaped, so the message stays text.
    return makeError(codes::JSON_SYNTAX, "", "", "not valid JSON: " + utf8Text(shortQuotes(wordParseError(e.what()))));
  }
  // The tape and nlohmann disagree (the fuzz target's differential looks for this).
  return makeError(codes::JSON_SYNTAX, "", "", "not valid JSON");
}

Result<std::unique_ptr<JsonTape>> readText(std::shared_ptr<const std::string> text) {
  if (const std::size_t bad = firstInvalidUtf8(*text); bad != std::string_view::npos) {
    return Result<std::unique_ptr<JsonTape>>::failure(
        makeError(codes::ENCODING, "", "", "not UTF-8 text: byte " + std::to_string(bad) + " cannot be decoded"));
  }
  return JsonTape::read(std::move(text));
}

Result<std::unique_ptr<JsonTape>> readText(std::string_view text) {
  return readText(std::make_shared<const std::string>(text));
}

}  // namespace detail

Result<Json> parseDescriptorText(std::string_view text) {
  auto tape = detail::readText(text);
  if (!tape) return Result<Json>::failure(tape.error());
  return Result<Json>::success(tape.value()->root().toJson());
}

}  // namespace ukdpack
