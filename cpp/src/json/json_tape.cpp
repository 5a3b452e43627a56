// The tape scan (see json_tape.hpp). A "return false" stops the scan: with
// `problem_` set for a limit it words itself, else for a syntax error, which
// nlohmann's parser words (syntaxError). A refusal names the first problem in
// the text, as a reader that stops at it would: a key said twice is found when
// its object closes, so a failure first asks whether an open object already
// holds one (duplicateBefore).
#include "json/json_tape.hpp"

#include "ukdpack/json/json_spans.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace ukdpack::detail {

namespace {
constexpr std::size_t kMaxNesting = 128;  // levels of objects and arrays
}  // namespace

// A bigger node made the load of a 10,000-kernel shard 2-3% slower (see JsonNode's fields).
static_assert(sizeof(JsonNode) <= 80, "JsonNode grew past 80 bytes");

class TapeScanner {
 public:
  TapeScanner(JsonTape& tape, std::string_view text, std::size_t values) : tape_(tape), text_(text), values_(values) {}

  bool run() {
    const std::size_t expected = std::max(text_.size() / 16 + 4, values_);
    tape_.nodes_.reserve(expected);
    tape_.kids_.reserve(expected);
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a byte order mark, at the start only
    if (!skipBlanks() || !value(newNode(), 0) || !skipBlanks()) return false;
    return pos_ == text_.size() || fail(pos_);
  }

  // What stopped the scan: a limit's diagnostic, else nothing (a syntax error).
  std::optional<Diagnostic> problem() { return std::move(problem_); }

 private:
  // An open object or array: its node and where its children start on pending_.
  struct Open {
    std::uint32_t node;
    std::size_t mark;
  };

  // Blanks and comments, where a token may start. A NUL there ends the text,
  // as it ends nlohmann's input. Comments are rare: they take the call.
  bool skipBlanks() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        ++pos_;
      } else {
        return (c != '/' && c != '\0') || commentsAndBlanks();
      }
    }
    return true;
  }

  // skipBlanks from a comment or a NUL at pos_.
  [[gnu::noinline]] bool commentsAndBlanks() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        ++pos_;
      } else if (c == '/') {
        if (!comment()) return false;
      } else {
        if (c == '\0') text_ = text_.substr(0, pos_);
        return true;
      }
    }
    return true;
  }

  // A comment at pos_: `//` up to LF, CR or NUL (taken with it) or the end;
  // `/*` up to `*/`, with no NUL inside.
  bool comment() {
    ++pos_;
    if (pos_ >= text_.size()) return fail(pos_);
    if (text_[pos_] == '/') {
      const std::size_t end = text_.find_first_of(std::string_view("\n\r\0", 3), pos_ + 1);
      pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      return true;
    }
    if (text_[pos_] != '*') return fail(pos_);
    const std::size_t close = text_.find("*/", pos_ + 1);
    const std::size_t nul = text_.find('\0', pos_ + 1);
    if (close == std::string_view::npos || nul < close) return fail(pos_);
    pos_ = close + 2;
    return true;
  }

  // A string; `out` views its text, or the tape's decoded copy when it holds an
  // escape. A raw control character is refused.
  bool string(std::string_view& out) {
    const std::size_t start = ++pos_;
    // Eight bytes at a time while none needs a look (strings are most of a descriptor's bytes).
    while (text_.size() - pos_ >= 8) {
      std::uint64_t word;
      std::memcpy(&word, text_.data() + pos_, 8);
      if (anySpecial(word)) break;
      pos_ += 8;
    }
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        out = text_.substr(start, pos_ - start);
        ++pos_;
        return true;
      }
      if (c == '\\') return escapedString(start, out);
      if (c < 0x20) return fail(pos_);
      ++pos_;
    }
    return fail(pos_);
  }

  // a < b as std::string_view orders them (bytes unsigned), the first byte
  // tried before a call to memcmp: most keys of one object differ there.
  static bool keyLess(std::string_view a, std::string_view b) {
    if (!a.empty() && !b.empty() && a[0] != b[0]) {
      return static_cast<unsigned char>(a[0]) < static_cast<unsigned char>(b[0]);
    }
    return a < b;
  }

  // Whether any byte of `w` is a quote, a backslash or a control character
  // (each test exact for "any byte", with no false alarm).
  static bool anySpecial(std::uint64_t w) {
    constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    const auto zeroByte = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
    const std::uint64_t below20 = (w - ones * 0x20) & ~w & highs;
    return (zeroByte(w ^ (ones * '"')) | zeroByte(w ^ (ones * '\\')) | below20) != 0;
  }

  // The rest of a string from its first escape (at pos_), decoded: a \u escape
  // to UTF-8, a surrogate pair to one character. An unknown escape or an
  // unpaired surrogate is a syntax error.
  bool escapedString(std::size_t start, std::string_view& out) {
    std::string s(text_.substr(start, pos_ - start));
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        out = tape_.decoded_.emplace_back(std::move(s));
        return true;
      }
      if (c < 0x20) return fail(pos_);
      ++pos_;
      if (c != '\\') {
        s += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size()) return fail(pos_);
      switch (text_[pos_++]) {
        case '"':
          s += '"';
          break;
        case '\\':
          s += '\\';
          break;
        case '/':
          s += '/';
          break;
        case 'b':
          s += '\b';
          break;
        case 'f':
          s += '\f';
          break;
        case 'n':
          s += '\n';
          break;
        case 'r':
          s += '\r';
          break;
        case 't':
          s += '\t';
          break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return fail(pos_);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t low = 0;
            if (text_.substr(pos_, 2) != "\\u") return fail(pos_);
            pos_ += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return fail(pos_);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(s, cp);
          break;
        }
        default:
          return fail(pos_);
      }
    }
    return fail(pos_);
  }

  // Four hex digits at pos_ (either case), as a \u escape writes a code unit.
  bool hex4(std::uint32_t& out) {
    if (text_.size() - pos_ < 4) return false;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      int d = -1;
      if (h >= '0' && h <= '9') {
        d = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        d = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        d = h - 'A' + 10;
      } else {
        return false;
      }
      out = out << 4 | static_cast<std::uint32_t>(d);
    }
    return true;
  }

  static void appendUtf8(std::string& s, std::uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | cp >> 6);
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | cp >> 12);
      s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | cp >> 18);
      s += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return fail(pos_);
    pos_ += word.size();
    return true;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // JSON's number grammar; integers must fit an int64 and floats be finite.
  // Inlined into value(), as the hot path it is (a call measured 1.5% of a load).
  [[gnu::always_inline]] bool number(JsonNode& n) {
    const std::size_t start = pos_;
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || !digit(text_[pos_])) return fail(pos_);
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    const std::size_t intEnd = pos_;
    bool isFloat = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      isFloat = true;
      ++pos_;
      if (pos_ >= text_.size() || !digit(text_[pos_])) return fail(pos_);
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      isFloat = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !digit(text_[pos_])) return fail(pos_);
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    n.text_ = text_.substr(start, pos_ - start);
    if (isFloat) {
      // nlohmann refuses a number beyond a double's range itself ("number overflow parsing").
      if (!finite(n.text_)) return fail(start);
      n.kind_ = JsonNode::Kind::Float;
      return true;
    }
    std::uint64_t magnitude = 0;
    for (std::size_t i = start + (negative ? 1 : 0); i < intEnd; ++i) {
      const std::uint64_t d = static_cast<std::uint64_t>(text_[i] - '0');
      if (magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return beyondInt64(start, n.text_);
      magnitude = magnitude * 10 + d;
    }
    const std::uint64_t most = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (negative) {
      if (magnitude > most + 1) return beyondInt64(start, n.text_);
      n.kind_ = JsonNode::Kind::Integer;
      n.integer_ =
          magnitude == most + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude);
    } else {
      if (magnitude > most) return beyondInt64(start, magnitude);
      // A non-negative integer is kept as unsigned, as nlohmann's DOM keeps it.
      n.kind_ = JsonNode::Kind::Unsigned;
      n.integer_ = static_cast<std::int64_t>(magnitude);
    }
    return true;
  }

  static bool finite(std::string_view literal) {
    return std::isfinite(std::strtod(std::string(literal).c_str(), nullptr));
  }

  // An integer beyond 64 bits either way: nlohmann reads it as a double, so one
  // beyond a double's range too is its syntax error.
  [[gnu::noinline]] bool beyondInt64(std::size_t at, std::string_view literal) {
    if (!finite(literal)) return fail(at);
    return limit(at, "integer " + shortQuote(literal) + " does not fit a signed 64-bit value");
  }
  // One that fits 64 bits unsigned (nlohmann's DOM would keep it so).
  [[gnu::noinline]] bool beyondInt64(std::size_t at, std::uint64_t value) {
    return limit(
        at, "integer " + std::to_string(value) + " does not fit a signed 64-bit value (at most 9223372036854775807)");
  }

  std::uint32_t newNode() {
    const std::uint32_t index = static_cast<std::uint32_t>(tape_.nodes_.size());
    tape_.nodes_.emplace_back().tape_ = &tape_;
    return index;
  }

  // The value at pos_ into node `index`; its children follow it on the tape and
  // are listed in kids_ once it closes.
  bool value(std::uint32_t index, std::size_t depth) {
    if (pos_ >= text_.size()) return fail(pos_);
    JsonNode* n = &tape_.nodes_[index];
    n->begin_ = pos_;
    const char c = text_[pos_];
    bool ok = true;
    if (c == '{' || c == '[') {
      if (depth >= kMaxNesting) return tooDeep();
      ok = c == '{' ? object(index, depth + 1) : array(index, depth + 1);
      n = &tape_.nodes_[index];  // the tape grew
    } else if (c == '"') {
      n->kind_ = JsonNode::Kind::String;
      ok = string(n->text_);
    } else if (c == 't' || c == 'f') {
      n->kind_ = JsonNode::Kind::Boolean;
      n->boolean_ = c == 't';
      ok = literal(c == 't' ? "true" : "false");
    } else if (c == 'n') {
      ok = literal("null");
    } else if (c == '-' || digit(c)) {
      ok = number(*n);
    } else {
      return fail(pos_);
    }
    n->end_ = pos_;
    return ok;
  }

  // The children of `index`, gathered on `pending_` while it is open, move
  // to kids_ in one block when it closes.
  [[gnu::always_inline]] void close(std::uint32_t index, std::size_t mark) {
    JsonNode& n = tape_.nodes_[index];
    n.first_ = static_cast<std::uint32_t>(tape_.kids_.size());
    n.count_ = static_cast<std::uint32_t>(pending_.size() - mark);
    tape_.kids_.insert(tape_.kids_.end(), pending_.begin() + static_cast<std::ptrdiff_t>(mark), pending_.end());
    pending_.resize(mark);
    open_.pop_back();
  }

  bool object(std::uint32_t index, std::size_t depth) {
    tape_.nodes_[index].kind_ = JsonNode::Kind::Object;
    const std::size_t mark = pending_.size();
    open_.push_back(Open{index, mark});
    ++pos_;
    if (!skipBlanks()) return false;
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      close(index, mark);
      return true;
    }
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail(pos_);
      const std::size_t keyBegin = pos_;
      std::string_view key;
      if (!string(key)) return false;
      // The member goes on the tape with its key before the rest is read, so a
      // failure further on sees the key (duplicateBefore).
      const std::uint32_t member = newNode();
      JsonNode& m = tape_.nodes_[member];
      m.key_ = key;
      m.begin_ = keyBegin;  // until the value starts: keyAt() reads it
      pending_.push_back(member);
      if (!skipBlanks()) return false;
      if (pos_ >= text_.size() || text_[pos_] != ':') return fail(pos_);
      ++pos_;
      if (!skipBlanks()) return false;
      keyBefore(member, keyBegin);
      if (!value(member, depth) || !skipBlanks()) return false;
      if (pos_ >= text_.size()) return fail(pos_);
      if (text_[pos_] == ',') {
        ++pos_;
        if (!skipBlanks()) return false;
        continue;
      }
      if (text_[pos_] != '}') return fail(pos_);
      ++pos_;
      break;
    }
    // Members iterate in key order, as a Json object's; sorted, a key said
    // twice sits beside itself.
    const auto& nodes = tape_.nodes_;
    const auto first = pending_.begin() + static_cast<std::ptrdiff_t>(mark);
    const auto byKey = [&](std::uint32_t a, std::uint32_t b) { return keyLess(nodes[a].key_, nodes[b].key_); };
    if (!std::is_sorted(first, pending_.end(), byKey)) std::sort(first, pending_.end(), byKey);
    for (auto it = first; it + 1 < pending_.end(); ++it)
      if (nodes[*it].key_ == nodes[*(it + 1)].key_) return fail(std::string_view::npos);
    close(index, mark);
    return true;
  }

  bool array(std::uint32_t index, std::size_t depth) {
    tape_.nodes_[index].kind_ = JsonNode::Kind::Array;
    const std::size_t mark = pending_.size();
    open_.push_back(Open{index, mark});
    ++pos_;
    if (!skipBlanks()) return false;
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      close(index, mark);
      return true;
    }
    while (true) {
      const std::uint32_t element = newNode();
      pending_.push_back(element);
      if (!value(element, depth) || !skipBlanks()) return false;
      if (pos_ >= text_.size()) return fail(pos_);
      if (text_[pos_] == ',') {
        ++pos_;
        if (!skipBlanks()) return false;
        continue;
      }
      if (text_[pos_] != ']') return fail(pos_);
      ++pos_;
      break;
    }
    close(index, mark);
    return true;
  }

  // Records that the member `index`, whose value starts at pos_, has its key at `keyBegin`.
  void keyBefore(std::uint32_t index, std::size_t keyBegin) {
    const std::size_t delta = pos_ - keyBegin;
    if (delta < JsonNode::kFarKey) {
      tape_.nodes_[index].keyDelta_ = static_cast<std::uint32_t>(delta);
    } else {
      tape_.nodes_[index].keyDelta_ = JsonNode::kFarKey;
      tape_.farKeys_.emplace(index, keyBegin);
    }
  }

  // Where a member's key starts, its value read or not.
  static std::size_t keyAt(const JsonNode& m) { return m.keyDelta_ == 0 ? m.begin_ : m.key_begin_offset(); }

  [[gnu::noinline]] bool tooDeep() {
    return limit(pos_, "nested deeper than " + std::to_string(kMaxNesting) + " levels of objects and arrays");
  }

  // A syntax error at `at` (npos: a duplicate key found on closing): unless a
  // key said twice comes first.
  [[gnu::noinline]] bool fail(std::size_t at) {
    duplicateBefore(at);
    return false;
  }

  // A limit at `at`, worded with the path of the value read there.
  [[gnu::noinline]] bool limit(std::size_t at, std::string message) {
    if (!duplicateBefore(at)) problem_ = refusal(codes::JSON_LIMIT, open_.size(), std::move(message));
    return false;
  }

  // The earliest key said twice in an open object, if it comes before `at`:
  // refused (with the object's path) as the first problem of the text.
  bool duplicateBefore(std::size_t at) {
    const auto& nodes = tape_.nodes_;
    std::size_t best = std::string_view::npos, bestFrame = 0;
    std::string_view bestKey;
    for (std::size_t f = 0; f < open_.size(); ++f) {
      if (nodes[open_[f].node].kind_ != JsonNode::Kind::Object) continue;
      const std::size_t end = f + 1 < open_.size() ? open_[f + 1].mark : pending_.size();
      // In the order written (an object that is closing has been sorted by key).
      std::vector<std::uint32_t> members(pending_.begin() + static_cast<std::ptrdiff_t>(open_[f].mark),
                                         pending_.begin() + static_cast<std::ptrdiff_t>(end));
      std::sort(members.begin(), members.end(),
                [&](std::uint32_t a, std::uint32_t b) { return keyAt(nodes[a]) < keyAt(nodes[b]); });
      std::unordered_set<std::string_view> seen;
      for (const std::uint32_t i : members) {
        const JsonNode& m = nodes[i];
        if (!seen.insert(m.key_).second) {
          if (keyAt(m) < best) best = keyAt(m), bestFrame = f, bestKey = m.key_;
          break;
        }
      }
    }
    if (best == std::string_view::npos || (at != std::string_view::npos && best >= at)) return false;
    problem_ = refusal(codes::DUPLICATE_KEY, bestFrame, "duplicate key '" + std::string(bestKey) + "' in one object");
    return true;
  }

  // A diagnostic at the path through the first `frames` open containers: each
  // adds the key or index of the child being read in it.
  Diagnostic refusal(const char* code, std::size_t frames, std::string message) const {
    std::string where = "$";
    for (std::size_t f = 0; f < frames; ++f) {
      const std::size_t end = f + 1 < open_.size() ? open_[f + 1].mark : pending_.size();
      if (end == open_[f].mark) continue;
      const JsonNode& child = tape_.nodes_[pending_[end - 1]];
      where = tape_.nodes_[open_[f].node].kind_ == JsonNode::Kind::Object
                  ? jsonPathKey(where, child.key_)
                  : jsonPathIndex(where, end - open_[f].mark - 1);
    }
    if (where.size() > 64) where = where.substr(0, 60) + "...";  // a nesting bomb: its start says enough
    return makeError(code, "", std::move(where), std::move(message));
  }

  JsonTape& tape_;
  std::string_view text_;
  std::size_t values_;
  std::size_t pos_ = 0;
  std::vector<std::uint32_t> pending_;
  std::vector<Open> open_;
  std::optional<Diagnostic> problem_;
};

Result<std::unique_ptr<JsonTape>> JsonTape::read(std::shared_ptr<const std::string> text, std::size_t values) {
  auto tape = std::make_unique<JsonTape>();
  tape->text_ = std::move(text);
  TapeScanner scanner(*tape, *tape->text_, values);
  if (scanner.run()) return Result<std::unique_ptr<JsonTape>>::success(std::move(tape));
  if (auto problem = scanner.problem()) return Result<std::unique_ptr<JsonTape>>::failure(std::move(*problem));
  return Result<std::unique_ptr<JsonTape>>::failure(syntaxError(*tape->text_));
}

std::unique_ptr<JsonTape> JsonTape::scan(std::shared_ptr<const std::string> text, std::size_t values) {
  auto read = JsonTape::read(std::move(text), values);
  if (!read) return nullptr;
  return std::move(read).value();
}

std::size_t JsonNode::key_begin_offset() const {
  if (keyDelta_ == kFarKey) return tape_->farKeys_.at(static_cast<std::uint32_t>(this - tape_->nodes_.data()));
  return keyDelta_ == 0 ? 0 : begin_ - keyDelta_;
}

std::size_t JsonNode::key_end_offset() const {
  if (keyDelta_ == 0) return 0;
  // The key was read whole: its closing quote is the first one no backslash escapes.
  const std::string_view text = *tape_->text_;
  std::size_t i = key_begin_offset() + 1;
  while (text[i] != '"') i += text[i] == '\\' ? 2 : 1;
  return i + 1;
}

JsonNode::const_iterator JsonNode::find(std::string_view key) const {
  if (kind_ != Kind::Object) return end();
  // A descriptor object has a handful of members: a scan on length first beats a binary search.
  const std::uint32_t* first = tape_->kids_.data() + first_;
  const std::uint32_t* last = first + count_;
  for (const std::uint32_t* it = first; it != last; ++it) {
    const std::string_view k = tape_->nodes_[*it].key_;
    if (k.size() == key.size() &&
        (k.empty() || (k[0] == key[0] && std::char_traits<char>::compare(k.data(), key.data(), k.size()) == 0))) {
      return {tape_, it};
    }
  }
  return end();
}

Json JsonNode::toJson() const {
  switch (kind_) {
    case Kind::Null:
      return nullptr;
    case Kind::Boolean:
      return boolean_;
    case Kind::Integer:
      return integer_;
    case Kind::Unsigned:
      return static_cast<std::uint64_t>(integer_);
    case Kind::Float:
      // The one reader's own number parsing, so the value is the same double.
      return Json::parse(text_);
    case Kind::String:
      return std::string(text_);
    case Kind::Array: {
      Json out = Json::array();
      for (const JsonNode& item : *this) out.push_back(item.toJson());
      return out;
    }
    case Kind::Object: {
      Json out = Json::object();
      for (const JsonNode& item : *this) out.emplace(std::string(item.key_), item.toJson());
      return out;
    }
  }
  return nullptr;
}

std::string jsonTypeName(const JsonNode& value) {
  switch (value.kind()) {
    case JsonNode::Kind::String:
      return "string";
    case JsonNode::Kind::Integer:
    case JsonNode::Kind::Unsigned:
      return "integer";
    case JsonNode::Kind::Float:
      return "number";
    case JsonNode::Kind::Boolean:
      return "boolean";
    case JsonNode::Kind::Object:
      return "object";
    case JsonNode::Kind::Array:
      return "array";
    case JsonNode::Kind::Null:
      return "null";
  }
  return "null";
}

JsonText textOf(const JsonNode& node) {
  return JsonText(node.tape().text(), node.begin_offset(), node.end_offset() - node.begin_offset());
}

namespace {

// The spans of a tape's values in document order (a container before its
// contents), each with the blanks opening its line: `lineScan` follows the
// text forward, as the values come in order.
class SpanWalk {
 public:
  explicit SpanWalk(std::string_view text) : text_(text) {}

  void value(const JsonNode& n, std::string path, std::vector<JsonSpan>& out) {
    JsonSpan span;
    span.begin = n.begin_offset();
    span.end = n.end_offset();
    span.member = n.is_member();
    span.keyBegin = n.key_begin_offset();
    span.keyEnd = n.key_end_offset();
    lineOf(span.member ? span.keyBegin : span.begin, span);
    span.path = std::move(path);
    const std::string& at = out.emplace_back(std::move(span)).path;
    if (n.is_array()) {
      const std::string base = at;
      for (std::size_t i = 0; i < n.size(); ++i) value(n[i], jsonPathIndex(base, i), out);
    } else if (n.is_object()) {
      const std::string base = at;
      std::vector<const JsonNode*> members;
      for (const JsonNode& m : n) members.push_back(&m);
      std::sort(members.begin(), members.end(),
                [](const JsonNode* a, const JsonNode* b) { return a->key_begin_offset() < b->key_begin_offset(); });
      for (const JsonNode* m : members) value(*m, jsonPathKey(base, m->key()), out);
    }
  }

 private:
  // The blanks that start the line holding `at` (a line ends at LF or CR, as a
  // `//` comment does), and whether anything else precedes `at` on it.
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

  std::string_view text_;
  std::size_t lineStart_ = 0, lineScan_ = 0;
};

}  // namespace

}  // namespace ukdpack::detail

namespace ukdpack {

Result<std::vector<JsonSpan>> jsonSpans(std::string_view text) {
  auto tape = detail::readText(text);
  if (!tape) return Result<std::vector<JsonSpan>>::failure(tape.error());
  std::vector<JsonSpan> out;
  detail::SpanWalk(text).value(tape.value()->root(), "$", out);
  return Result<std::vector<JsonSpan>>::success(std::move(out));
}

}  // namespace ukdpack
