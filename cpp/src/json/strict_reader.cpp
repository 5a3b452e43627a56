// The one strict reader of descriptor text (parseDescriptorText): nlohmann's
// DOM builder held to the limits every descriptor is held to, with its
// refusals worded as file, JSON path and finding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/utf8.hpp"
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

// Input text as a message quotes it: its ends, when it is long (a million-digit
// number would make a megabyte line).
std::string shortQuote(std::string_view text) {
  constexpr std::size_t kShown = 40;
  if (text.size() <= kShown) return std::string(text);
  return std::string(text.substr(0, kShown / 2)) + "..." + std::string(text.substr(text.size() - kShown / 2)) + " (" +
         std::to_string(text.size()) + " characters)";
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
    out += message.substr(i, open + 1 - i) + shortQuote(quoted) + "'";
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

// The DOM builder of nlohmann, plus the limits every descriptor is held to:
// no key said twice in one object, integers that fit a signed
// 64-bit value, finite numbers, nesting up to kMaxNesting. It tracks where it
// is (the key or index of each open container) so a refusal names the JSON
// path; the path text is built only then.
class StrictSax {
 public:
  explicit StrictSax(Json& root) : dom_(root, /*allow_exceptions=*/true) {}
  std::optional<Diagnostic> problem;

  bool null() { return value() && dom_.null(); }
  bool boolean(bool v) { return value() && dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return value() && dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) {
    if (!value()) return false;
    if (v > static_cast<Json::number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      return refuse(codes::JSON_LIMIT, "integer " + std::to_string(v) +
                                           " does not fit a signed 64-bit value (at most 9223372036854775807)");
    }
    return dom_.number_unsigned(v);
  }
  bool number_float(Json::number_float_t v, const std::string& text) {
    if (!value()) return false;
    // nlohmann reads an integer literal beyond 64 bits as a double: refuse it as the integer it is.
    if (text.find_first_of(".eE") == std::string::npos) {
      return refuse(codes::JSON_LIMIT, "integer " + shortQuote(text) + " does not fit a signed 64-bit value");
    }
    if (!std::isfinite(v)) {
      return refuse(codes::JSON_LIMIT, "number " + shortQuote(text) + " is beyond the range of a double (not finite)");
    }
    return dom_.number_float(v, text);
  }
  bool string(std::string& v) { return value() && dom_.string(v); }
  bool binary(Json::binary_t& v) { return value() && dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (!value() || !open(true)) return false;
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    Frame& f = stack_.back();
    // A scan while the object is small; past kScanKeys a hash set, so an object of
    // many keys is read in linear time (160k keys took 40 s scanned).
    const bool seen = f.keys.size() < kScanKeys ? std::find(f.keys.begin(), f.keys.end(), k) != f.keys.end()
                                                : !f.many.insert(k).second;
    if (seen) return refuse(codes::DUPLICATE_KEY, "duplicate key '" + k + "' in one object", /*ofObject=*/true);
    f.keys.push_back(k);
    if (f.keys.size() == kScanKeys) f.many.insert(f.keys.begin(), f.keys.end());
    return dom_.key(k);
  }
  bool end_object() {
    stack_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (!value() || !open(false)) return false;
    return dom_.start_array(n);
  }
  bool end_array() {
    stack_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, token, e);
  }

 private:
  struct Frame {
    bool object = false;
    std::vector<std::string> keys;         // an object's keys so far
    std::unordered_set<std::string> many;  // the same, once there are kScanKeys of them
    std::size_t next = 0;                  // an array's next index
  };

  // Called before every value: an array element takes the next index.
  bool value() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().next;
    return true;
  }
  bool open(bool object) {
    if (stack_.size() >= kMaxNesting) {
      return refuse(codes::JSON_LIMIT,
                    "nested deeper than " + std::to_string(kMaxNesting) + " levels of objects and arrays");
    }
    stack_.push_back(Frame{object, {}, {}, 0});
    return true;
  }
  // The path of the value being read, or (`ofObject`) of the innermost object.
  std::string path(bool ofObject) const {
    std::string out = "$";
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (ofObject && i + 1 == stack_.size()) break;
      if (f.object) {
        if (!f.keys.empty()) out = jsonPathKey(out, f.keys.back());
      } else if (f.next > 0) {
        out = jsonPathIndex(out, f.next - 1);
      }
    }
    return out;
  }
  bool refuse(const char* code, std::string message, bool ofObject = false) {
    std::string where = path(ofObject);
    if (where.size() > 64) where = where.substr(0, 60) + "...";  // a nesting bomb: its start says enough
    problem = makeError(code, "", std::move(where), std::move(message));
    return false;
  }

  static constexpr std::size_t kMaxNesting = 128;
  static constexpr std::size_t kScanKeys = 32;
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<Frame> stack_;
};
}  // namespace

Result<Json> parseDescriptorText(std::string_view text) {
  if (const std::size_t bad = detail::firstInvalidUtf8(text); bad != std::string_view::npos) {
    return Result<Json>::failure(
        makeError(codes::ENCODING, "", "", "not UTF-8 text: byte " + std::to_string(bad) + " cannot be decoded"));
  }
  Json doc;
  StrictSax sax(doc);
  try {
    const bool done = Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                                      /*strict=*/true, /*ignore_comments=*/true);
    if (sax.problem) return Result<Json>::failure(std::move(*sax.problem));
    if (!done) return Result<Json>::failure(makeError(codes::JSON_SYNTAX, "", "", "not valid JSON"));
    return Result<Json>::success(std::move(doc));
  } catch (const Json::exception& e) {
    if (const auto line = unterminatedCommentLine(text)) {
      return Result<Json>::failure(
          makeError(codes::JSON_SYNTAX, "", "", "unterminated /* comment starting on line " + std::to_string(*line)));
    }
    // The parser quotes what it last read, which may end inside a character (a
    // non-breaking space, 'été'): its bytes are escaped, so the message stays text.
    return Result<Json>::failure(
        makeError(codes::JSON_SYNTAX, "", "", "not valid JSON: " + utf8Text(shortQuotes(wordParseError(e.what())))));
  }
}

}  // namespace ukdpack
