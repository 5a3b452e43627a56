// The one scanner of descriptor text: one pass that turns a file into a flat
// tape of values whose strings are views of the text (no DOM of allocated
// nodes). The loader reads kernels from the tape (the model's ObjectReader and
// descriptor parsers are templates over a Json and a JsonNode);
// parseDescriptorText builds its Json from it; jsonSpans reads byte offsets
// from it.
//
// It reads descriptor text as nlohmann::json::parse(text, ignore_comments)
// does: an optional UTF-8 byte order mark at the start, `//` comments (ended by
// LF, CR or NUL) and `/* */` comments wherever blanks may stand, string escapes
// decoded (\u surrogate pairs to one character), a NUL byte where a token may
// start ends the text. On top it holds the text to the limits every descriptor
// is held to: integers that fit an int64, finite numbers, nesting up to 128,
// no key twice in one object (each refused with the JSON path, as a
// JSON_LIMIT or DUPLICATE_KEY diagnostic). A syntax error is worded by
// nlohmann's own parser run over the text (syntaxError): an error path only,
// never taken for a text the tape accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ukdpack/json/json_text.hpp"

namespace ukdpack::detail {

class JsonTape;

// One value on a tape, with the subset of nlohmann::json's interface the
// descriptor readers use. Object members iterate in key order, as a Json
// object's do (std::map), so refusals come out in the same order.
class JsonNode {
 public:
  enum class Kind : std::uint8_t { Null, Boolean, Integer, Unsigned, Float, String, Array, Object };

  class const_iterator {
   public:
    const_iterator(const JsonTape* tape, const std::uint32_t* at) : tape_(tape), at_(at) {}
    const JsonNode& operator*() const;
    const JsonNode* operator->() const { return &**this; }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return at_ == o.at_; }
    bool operator!=(const const_iterator& o) const { return at_ != o.at_; }
    std::string_view key() const { return (**this).key_; }
    const JsonNode& value() const { return **this; }

   private:
    friend class JsonNode;
    const JsonTape* tape_;
    const std::uint32_t* at_;
  };

  bool is_null() const { return kind_ == Kind::Null; }
  bool is_boolean() const { return kind_ == Kind::Boolean; }
  bool is_number() const { return kind_ == Kind::Integer || kind_ == Kind::Unsigned || kind_ == Kind::Float; }
  bool is_number_integer() const { return kind_ == Kind::Integer || kind_ == Kind::Unsigned; }
  bool is_number_unsigned() const { return kind_ == Kind::Unsigned; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  Kind kind() const { return kind_; }

  // Members of an object (key order) or elements of an array.
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  const_iterator begin() const;
  const_iterator end() const;
  const JsonNode& operator[](std::size_t i) const;
  const_iterator find(std::string_view key) const;
  // The place of a member `find` returned, in iteration order.
  std::size_t placeOf(const const_iterator& it) const;

  template <class T>
  T get() const;
  // A string's text, or a member's key: a view of the file's text, or of the
  // tape's decoded copy when it was written with escapes.
  std::string_view str() const { return text_; }
  std::string_view key() const { return key_; }
  // The bytes the value was written as.
  std::size_t begin_offset() const { return begin_; }
  std::size_t end_offset() const { return end_; }
  // An object member's quoted key, as written: its opening quote and one past
  // its closing quote (both 0 for the root and array elements).
  bool is_member() const { return keyDelta_ != 0; }
  std::size_t key_begin_offset() const;
  std::size_t key_end_offset() const;  // found from the key's first byte: the tape keeps no more
  const JsonTape& tape() const { return *tape_; }

  // The value as a Json DOM, exactly as the one reader would have built it.
  Json toJson() const;
  std::string dump() const { return toJson().dump(); }

 private:
  friend class JsonTape;
  friend class TapeScanner;
  // 80 bytes, no padding: at 88 the load of a 10,000-kernel shard measured 2%
  // slower (bench/README.md, "One scanner").
  const JsonTape* tape_ = nullptr;
  std::int64_t integer_ = 0;  // Integer and Unsigned (the latter never negative)
  std::string_view text_;     // String: its text; Float: its literal
  std::string_view key_;      // an object member's key
  std::size_t begin_ = 0, end_ = 0;
  std::uint32_t first_ = 0, count_ = 0;  // children: kids_[first_, first_ + count_)
  // A member's key begins keyDelta_ bytes before its value (0: no member;
  // kFarKey: further than 32 bits say, kept in the tape's farKeys_).
  std::uint32_t keyDelta_ = 0;
  Kind kind_ = Kind::Null;
  bool boolean_ = false;
  static constexpr std::uint32_t kFarKey = 0xFFFFFFFFu;
};

// A scanned file: its text (shared, so views of it may outlive the tape) and
// its values; the root is node 0.
class JsonTape {
 public:
  // The tape of `text`, or the diagnostic of what is wrong with it (file left
  // empty: the caller fills it in). The text must be UTF-8 (firstInvalidUtf8):
  // parseDescriptorText checks that first.
  // `values`: how many values the caller expects the text to hold, when it knows
  // better than the text's size says (a KDP's skeleton: a "{}" per kernel).
  static Result<std::unique_ptr<JsonTape>> read(std::shared_ptr<const std::string> text, std::size_t values = 0);
  // The same, with nothing for a text read refuses.
  static std::unique_ptr<JsonTape> scan(std::shared_ptr<const std::string> text, std::size_t values = 0);

  const JsonNode& root() const { return nodes_.front(); }
  const std::shared_ptr<const std::string>& text() const { return text_; }

 private:
  friend class JsonNode;
  friend class TapeScanner;
  std::shared_ptr<const std::string> text_;
  std::vector<JsonNode> nodes_;
  std::vector<std::uint32_t> kids_;
  std::deque<std::string> decoded_;  // strings written with escapes, decoded (a deque: views stay put)
  std::unordered_map<std::uint32_t, std::size_t> farKeys_;  // node -> key offset, for JsonNode::kFarKey
};

inline const JsonNode& JsonNode::const_iterator::operator*() const { return tape_->nodes_[*at_]; }
inline JsonNode::const_iterator JsonNode::begin() const { return {tape_, tape_->kids_.data() + first_}; }
inline JsonNode::const_iterator JsonNode::end() const { return {tape_, tape_->kids_.data() + first_ + count_}; }
inline const JsonNode& JsonNode::operator[](std::size_t i) const { return tape_->nodes_[tape_->kids_[first_ + i]]; }
inline std::size_t JsonNode::placeOf(const const_iterator& it) const {
  return static_cast<std::size_t>(it.at_ - (tape_->kids_.data() + first_));
}

template <>
inline std::string JsonNode::get<std::string>() const {
  return std::string(text_);
}
template <>
inline std::int64_t JsonNode::get<std::int64_t>() const {
  return integer_;
}

// "string", "integer", ... as jsonTypeName(const Json&) says.
std::string jsonTypeName(const JsonNode& value);

// A JsonText of the bytes `node` was written as.
JsonText textOf(const JsonNode& node);

// The JSON_SYNTAX diagnostic of text the tape found not to be JSON, worded by
// nlohmann's parser over the same text (line, column and what it last read), or
// naming the line an unterminated /* comment starts on.
Diagnostic syntaxError(std::string_view text);

// Descriptor text checked to be UTF-8 (an ENCODING diagnostic), then read
// onto a tape: what the loader, parseDescriptorText and jsonSpans read. The
// string_view form reads a copy.
Result<std::unique_ptr<JsonTape>> readText(std::shared_ptr<const std::string> text);
Result<std::unique_ptr<JsonTape>> readText(std::string_view text);

// Input text as a message quotes it: its ends, when it is long.
std::string shortQuote(std::string_view text);

}  // namespace ukdpack::detail
