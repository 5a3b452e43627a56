// The tape scan (see json_tape.hpp). Every "return false" is "not for the
// fast reading": the caller reads the text with parseDescriptorText instead,
// which accepts or refuses it with the one wording. So the scan never words a
// problem; it must only never accept what that reader would refuse or read
// differently.
#include "json/json_tape.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace ukdpack::detail {

namespace {
constexpr std::size_t kMaxNesting = 128;  // as the one reader's limit
}  // namespace

class TapeScanner {
 public:
  TapeScanner(JsonTape& tape, std::string_view text) : tape_(tape), text_(text) {}

  bool run() {
    tape_.nodes_.reserve(text_.size() / 16 + 4);
    tape_.kids_.reserve(text_.size() / 16 + 4);
    skipBlanks();
    if (!value(0)) return false;
    skipBlanks();
    return pos_ == text_.size();
  }

 private:
  void skipBlanks() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
  }

  // A string; `out` views its text, or the tape's decoded copy when it holds an
  // escape. A raw control character is the one reader's to refuse.
  bool string(std::string_view& out) {
    const std::size_t start = ++pos_;
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        out = text_.substr(start, pos_ - start);
        ++pos_;
        return true;
      }
      if (c == '\\') return escapedString(start, out);
      if (c < 0x20) return false;
      ++pos_;
    }
    return false;
  }

  // The rest of a string from its first escape (at pos_), decoded as the one
  // reader decodes it: a \u escape to UTF-8, a surrogate pair to one character.
  // An unknown escape or an unpaired surrogate is the one reader's to refuse.
  bool escapedString(std::size_t start, std::string_view& out) {
    std::string s(text_.substr(start, pos_ - start));
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        out = tape_.decoded_.emplace_back(std::move(s));
        return true;
      }
      if (c < 0x20) return false;
      ++pos_;
      if (c != '\\') {
        s += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
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
          if (!hex4(cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t low = 0;
            if (text_.substr(pos_, 2) != "\\u") return false;
            pos_ += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(s, cp);
          break;
        }
        default:
          return false;
      }
    }
    return false;
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
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // JSON's number grammar; integers must fit an int64 and floats be finite.
  bool number(JsonNode& n) {
    const std::size_t start = pos_;
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || !digit(text_[pos_])) return false;
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
      if (pos_ >= text_.size() || !digit(text_[pos_])) return false;
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      isFloat = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !digit(text_[pos_])) return false;
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
    n.text_ = text_.substr(start, pos_ - start);
    if (isFloat) {
      const std::string literal(n.text_);
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(literal.c_str(), &end);
      if (!std::isfinite(v)) return false;
      n.kind_ = JsonNode::Kind::Float;
      return true;
    }
    // At most 19 digits fit; the one reader refuses what does not fit an int64.
    std::uint64_t magnitude = 0;
    for (std::size_t i = start + (negative ? 1 : 0); i < intEnd; ++i) {
      const std::uint64_t d = static_cast<std::uint64_t>(text_[i] - '0');
      if (magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
      magnitude = magnitude * 10 + d;
    }
    const std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (negative) {
      if (magnitude > limit + 1) return false;
      n.kind_ = JsonNode::Kind::Integer;
      n.integer_ =
          magnitude == limit + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude);
    } else {
      if (magnitude > limit) return false;
      // The one reader keeps a non-negative integer as unsigned: so does the tape.
      n.kind_ = JsonNode::Kind::Unsigned;
      n.integer_ = static_cast<std::int64_t>(magnitude);
    }
    return true;
  }

  // The value at pos_ into a new node; its children follow it on the tape and
  // are listed in kids_ once it closes.
  bool value(std::size_t depth, std::string_view key = {}) {
    if (pos_ >= text_.size()) return false;
    const std::uint32_t index = static_cast<std::uint32_t>(tape_.nodes_.size());
    tape_.nodes_.emplace_back();
    JsonNode* n = &tape_.nodes_.back();
    n->tape_ = &tape_;
    n->key_ = key;
    n->begin_ = pos_;
    const char c = text_[pos_];
    bool ok = true;
    if (c == '{' || c == '[') {
      if (depth >= kMaxNesting) return false;
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
      return false;
    }
    n->end_ = pos_;
    return ok;
  }

  // The children of `index`, gathered on `pending_` while it is open, move
  // to kids_ in one block when it closes.
  void close(std::uint32_t index, std::size_t mark) {
    JsonNode& n = tape_.nodes_[index];
    n.first_ = static_cast<std::uint32_t>(tape_.kids_.size());
    n.count_ = static_cast<std::uint32_t>(pending_.size() - mark);
    tape_.kids_.insert(tape_.kids_.end(), pending_.begin() + static_cast<std::ptrdiff_t>(mark), pending_.end());
    pending_.resize(mark);
  }

  bool object(std::uint32_t index, std::size_t depth) {
    tape_.nodes_[index].kind_ = JsonNode::Kind::Object;
    const std::size_t mark = pending_.size();
    ++pos_;
    skipBlanks();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      close(index, mark);
      return true;
    }
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] != '"') return false;
      std::string_view key;
      if (!string(key)) return false;
      skipBlanks();
      if (pos_ >= text_.size() || text_[pos_] != ':') return false;
      ++pos_;
      skipBlanks();
      pending_.push_back(static_cast<std::uint32_t>(tape_.nodes_.size()));
      if (!value(depth, key)) return false;
      skipBlanks();
      if (pos_ >= text_.size()) return false;
      if (text_[pos_] == ',') {
        ++pos_;
        skipBlanks();
        continue;
      }
      if (text_[pos_] != '}') return false;
      ++pos_;
      break;
    }
    // Members iterate in key order, as a Json object's; a key said twice is
    // the one reader's to refuse.
    const auto& nodes = tape_.nodes_;
    const auto first = pending_.begin() + static_cast<std::ptrdiff_t>(mark);
    const auto byKey = [&](std::uint32_t a, std::uint32_t b) { return nodes[a].key_ < nodes[b].key_; };
    if (!std::is_sorted(first, pending_.end(), byKey)) std::sort(first, pending_.end(), byKey);
    for (auto it = first; it + 1 < pending_.end(); ++it)
      if (nodes[*it].key_ == nodes[*(it + 1)].key_) return false;
    close(index, mark);
    return true;
  }

  bool array(std::uint32_t index, std::size_t depth) {
    tape_.nodes_[index].kind_ = JsonNode::Kind::Array;
    const std::size_t mark = pending_.size();
    ++pos_;
    skipBlanks();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      close(index, mark);
      return true;
    }
    while (true) {
      pending_.push_back(static_cast<std::uint32_t>(tape_.nodes_.size()));
      if (!value(depth)) return false;
      skipBlanks();
      if (pos_ >= text_.size()) return false;
      if (text_[pos_] == ',') {
        ++pos_;
        skipBlanks();
        continue;
      }
      if (text_[pos_] != ']') return false;
      ++pos_;
      break;
    }
    close(index, mark);
    return true;
  }

  JsonTape& tape_;
  std::string_view text_;
  std::size_t pos_ = 0;
  std::vector<std::uint32_t> pending_;
};

std::unique_ptr<JsonTape> JsonTape::scan(std::shared_ptr<const std::string> text) {
  auto tape = std::make_unique<JsonTape>();
  tape->text_ = std::move(text);
  TapeScanner scanner(*tape, *tape->text_);
  if (!scanner.run()) return nullptr;
  return tape;
}

JsonNode::const_iterator JsonNode::find(std::string_view key) const {
  if (kind_ != Kind::Object) return end();
  // A descriptor object has a handful of members: a scan on length first beats a binary search.
  const std::uint32_t* first = tape_->kids_.data() + first_;
  const std::uint32_t* last = first + count_;
  for (const std::uint32_t* it = first; it != last; ++it) {
    const std::string_view k = tape_->nodes_[*it].key_;
    if (k.size() == key.size() && std::char_traits<char>::compare(k.data(), key.data(), k.size()) == 0) {
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

}  // namespace ukdpack::detail
