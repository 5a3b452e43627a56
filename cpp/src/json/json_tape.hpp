// The loader's fast reading of descriptor text: one scan that turns a file
// into a flat tape of values whose strings are views of the text (no DOM of
// allocated nodes), read by the same strict rules as a Json DOM (the model's
// ObjectReader and descriptor parsers are templates over both).
//
// The scan accepts only text the one reader (parseDescriptorText) reads
// without a word and reads alike: JSON without comments or byte order mark,
// within the reader's limits (int64 integers, finite numbers, nesting, no
// duplicate key); a string's escapes are decoded as that reader decodes them.
// Anything else returns nothing and the caller reads the text with
// parseDescriptorText, which says what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  const JsonTape& tape() const { return *tape_; }

  // The value as a Json DOM, exactly as the one reader would have built it.
  Json toJson() const;
  std::string dump() const { return toJson().dump(); }

 private:
  friend class JsonTape;
  friend class TapeScanner;
  const JsonTape* tape_ = nullptr;
  Kind kind_ = Kind::Null;
  bool boolean_ = false;
  std::int64_t integer_ = 0;  // Integer and Unsigned (the latter never negative)
  std::string_view text_;     // String: its text; Float: its literal
  std::string_view key_;      // an object member's key
  std::size_t begin_ = 0, end_ = 0;
  std::uint32_t first_ = 0, count_ = 0;  // children: kids_[first_, first_ + count_)
};

// A scanned file: its text (shared, so views of it may outlive the tape) and
// its values; the root is node 0.
class JsonTape {
 public:
  // Nothing when the text is not for the fast reading (see above).
  static std::unique_ptr<JsonTape> scan(std::shared_ptr<const std::string> text);

  const JsonNode& root() const { return nodes_.front(); }
  const std::shared_ptr<const std::string>& text() const { return text_; }

 private:
  friend class JsonNode;
  friend class TapeScanner;
  std::shared_ptr<const std::string> text_;
  std::vector<JsonNode> nodes_;
  std::vector<std::uint32_t> kids_;
  std::deque<std::string> decoded_;  // strings written with escapes, decoded (a deque: views stay put)
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

}  // namespace ukdpack::detail
