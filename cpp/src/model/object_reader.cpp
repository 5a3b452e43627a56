#include "model/object_reader.hpp"

#include <algorithm>
#include <type_traits>

#include <utility>

#include "json/json_tape.hpp"

namespace ukdpack::detail {

std::string jsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      return "string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::null:
      return "null";
    default:
      return "binary";
  }
}

template <class V>
std::string describeFound(const V& value) {
  const std::string type = jsonTypeName(value);
  if (value.is_string()) {
    std::string s = value.template get<std::string>();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return "'" + s + "'";
  }
  if (value.is_number() || value.is_boolean()) return type + " " + value.dump();
  return type;
}

template <class V>
BasicObjectReader<V>::BasicObjectReader(const V& value, const std::string& file, std::string path,
                                        std::vector<Diagnostic>& diags)
    : file_(&file), path_(std::move(path)), diags_(diags) {
  if (value.is_object()) {
    object_ = &value;
  } else {
    error(path_, "expected object, found " + describeFound(value));
  }
}

template <class V>
void BasicObjectReader<V>::error(const std::string& path, const std::string& message) {
  failed_ = true;
  diags_.push_back(makeError(codes::SCHEMA, *file_, path, message));
}

template <class V>
bool BasicObjectReader<V>::has(std::string_view key) const {
  return object_ != nullptr && object_->find(key) != object_->end();
}

template <class V>
const V* BasicObjectReader<V>::member(std::string_view key, bool required) {
  if (object_ == nullptr) return nullptr;
  const auto it = object_->find(key);
  mark(key, it);
  if (it == object_->end()) {
    if (required) error(path_, "missing required field '" + std::string(key) + "'");
    return nullptr;
  }
  return &*it;
}

// A tape's object marks the member it read by its place (a bit); a Json's
// records the key. Either records a key asked for and absent (did-you-mean).
template <class V>
void BasicObjectReader<V>::mark(std::string_view key, const typename V::const_iterator& it) {
  if constexpr (std::is_same_v<V, JsonNode>) {
    if (it == object_->end()) {
      know(key);  // asked for and absent: what an unknown key may be a misspelling of
      return;
    }
    const std::size_t place = object_->placeOf(it);
    if (place < 64) {
      readMask_ |= std::uint64_t(1) << place;
      return;
    }
  }
  know(key);
}

template <class V>
const V* BasicObjectReader<V>::get(std::string_view key) {
  return member(key, false);
}

template <class V>
std::optional<std::string> BasicObjectReader<V>::string(std::string_view key, bool required, bool nonEmpty) {
  const V* v = member(key, required);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    error(pathOf(key), "expected string, found " + describeFound(*v));
    return std::nullopt;
  }
  std::string s = v->template get<std::string>();
  if (nonEmpty && s.empty()) {
    error(pathOf(key), "expected a non-empty string, found ''");
    return std::nullopt;
  }
  return s;
}

template <class V>
std::optional<std::string> BasicObjectReader<V>::nullableString(std::string_view key, bool required) {
  const V* v = member(key, required);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string() || v->template get<std::string>().empty()) {
    error(pathOf(key), "expected a non-empty string or null, found " + describeFound(*v));
    return std::nullopt;
  }
  return v->template get<std::string>();
}

template <class V>
std::optional<std::int64_t> BasicObjectReader<V>::integer(std::string_view key, bool required) {
  const V* v = member(key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->template get<std::int64_t>();
  if (v->is_number_unsigned()) {
    error(pathOf(key), "expected integer within 64-bit range, found " + describeFound(*v));
    return std::nullopt;
  }
  error(pathOf(key), "expected integer, found " + describeFound(*v));
  return std::nullopt;
}

template <class V>
const V* BasicObjectReader<V>::object(std::string_view key, bool required) {
  const V* v = member(key, required);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    error(pathOf(key), "expected object, found " + describeFound(*v));
    return nullptr;
  }
  return v;
}

template <class V>
const V* BasicObjectReader<V>::array(std::string_view key, bool required) {
  const V* v = member(key, required);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    error(pathOf(key), "expected array, found " + describeFound(*v));
    return nullptr;
  }
  return v;
}

template <class V>
std::optional<std::vector<std::string>> BasicObjectReader<V>::stringList(std::string_view key, bool required,
                                                                         bool nonEmptyItems) {
  const V* v = array(key, required);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const V& item = (*v)[i];
    if (!item.is_string() || (nonEmptyItems && item.template get<std::string>().empty())) {
      error(jsonPathIndex(pathOf(key), i), "expected a non-empty string, found " + describeFound(item));
      ok = false;
      continue;
    }
    out.push_back(item.template get<std::string>());
  }
  if (!ok) return std::nullopt;
  return out;
}

template <class V>
bool BasicObjectReader<V>::isKnown(std::string_view key) const {
  const auto end = known_.begin() + static_cast<std::ptrdiff_t>(knownCount_);
  return std::find(known_.begin(), end, key) != end ||
         std::find(knownMore_.begin(), knownMore_.end(), key) != knownMore_.end();
}

template <class V>
void BasicObjectReader<V>::know(std::string_view key) {
  if (isKnown(key)) return;
  if (knownCount_ < kInline) {
    known_[knownCount_++] = key;
  } else {
    knownMore_.push_back(key);
  }
}

template <class V>
void BasicObjectReader<V>::allow(std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (object_ != nullptr) mark(k, object_->find(k));
  }
}

template <class V>
void BasicObjectReader<V>::finish() {
  if (object_ == nullptr) return;
  std::size_t place = 0;
  for (auto it = object_->begin(); it != object_->end(); ++it, ++place) {
    const auto& key = it.key();  // a Json's std::string, a tape's view
    if (place < 64 && (readMask_ >> place & 1) != 0) continue;
    if (isKnown(key) || isExtensionKey(key)) continue;
    refuseUnknownKey(std::string(key));
  }
}

template <class V>
void BasicObjectReader<V>::refuseUnknownKey(const std::string& key) {
  // Suggest only keys this object lacks: a misspelt key leaves its right spelling unused.
  std::vector<std::string> unused;
  const auto lacks = [&](std::string_view k) {
    if (object_->find(k) == object_->end()) unused.emplace_back(k);
  };
  for (std::size_t i = 0; i < knownCount_; ++i) lacks(known_[i]);
  for (std::string_view k : knownMore_) lacks(k);
  error(pathOf(key), "unknown key '" + key + "'; extension keys start with 'x-' or '_'" + didYouMean(key, unused));
}

template <class V>
void readSchemaKey(BasicObjectReader<V>& r) {
  const V* v = r.get("$schema");
  if (v == nullptr) return;
  if (r.path() != "$") {
    r.error(r.pathOf("$schema"), "'$schema' belongs at the top of a descriptor file; an inline UKD takes none");
  } else if (!v->is_string()) {
    r.error(r.pathOf("$schema"), "expected string, found " + describeFound(*v));
  }
}

template std::string describeFound<Json>(const Json&);
template std::string describeFound<JsonNode>(const JsonNode&);
template class BasicObjectReader<Json>;
template class BasicObjectReader<JsonNode>;
template void readSchemaKey<Json>(BasicObjectReader<Json>&);
template void readSchemaKey<JsonNode>(BasicObjectReader<JsonNode>&);

}  // namespace ukdpack::detail
