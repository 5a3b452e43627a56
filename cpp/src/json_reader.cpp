#include "json_reader.hpp"

#include <algorithm>

#include <utility>

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

std::string describeFound(const Json& value) {
  const std::string type = jsonTypeName(value);
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return "'" + s + "'";
  }
  if (value.is_number() || value.is_boolean()) return type + " " + value.dump();
  return type;
}

ObjectReader::ObjectReader(const Json& value, std::string file, std::string path,
                           std::vector<Diagnostic>& diags)
    : file_(std::move(file)), path_(std::move(path)), diags_(diags) {
  if (value.is_object()) {
    object_ = &value;
  } else {
    error(path_, "expected object, found " + describeFound(value));
  }
}

void ObjectReader::error(const std::string& path, const std::string& message) {
  failed_ = true;
  diags_.push_back(makeError("SCHEMA", file_, path, message));
}

bool ObjectReader::has(std::string_view key) const {
  return object_ != nullptr && object_->find(key) != object_->end();
}

const Json* ObjectReader::member(std::string_view key, bool required) {
  if (object_ == nullptr) return nullptr;
  know(key);
  const auto it = object_->find(key);
  if (it == object_->end()) {
    if (required) error(path_, "missing required field '" + std::string(key) + "'");
    return nullptr;
  }
  return &*it;
}

const Json* ObjectReader::get(std::string_view key) { return member(key, false); }

std::optional<std::string> ObjectReader::string(std::string_view key, bool required,
                                                bool nonEmpty) {
  const Json* v = member(key, required);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    error(pathOf(key), "expected string, found " + describeFound(*v));
    return std::nullopt;
  }
  std::string s = v->get<std::string>();
  if (nonEmpty && s.empty()) {
    error(pathOf(key), "expected a non-empty string, found ''");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> ObjectReader::nullableString(std::string_view key, bool required) {
  const Json* v = member(key, required);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string() || v->get<std::string>().empty()) {
    error(pathOf(key), "expected a non-empty string or null, found " + describeFound(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::int64_t> ObjectReader::integer(std::string_view key, bool required) {
  const Json* v = member(key, required);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<std::int64_t>();
  if (v->is_number_unsigned()) {
    error(pathOf(key), "expected integer within 64-bit range, found " + describeFound(*v));
    return std::nullopt;
  }
  error(pathOf(key), "expected integer, found " + describeFound(*v));
  return std::nullopt;
}

const Json* ObjectReader::object(std::string_view key, bool required) {
  const Json* v = member(key, required);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    error(pathOf(key), "expected object, found " + describeFound(*v));
    return nullptr;
  }
  return v;
}

const Json* ObjectReader::array(std::string_view key, bool required) {
  const Json* v = member(key, required);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    error(pathOf(key), "expected array, found " + describeFound(*v));
    return nullptr;
  }
  return v;
}

std::optional<std::vector<std::string>> ObjectReader::stringList(std::string_view key,
                                                                 bool required,
                                                                 bool nonEmptyItems) {
  const Json* v = array(key, required);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (!item.is_string() || (nonEmptyItems && item.get<std::string>().empty())) {
      error(jsonPathIndex(pathOf(key), i),
            "expected a non-empty string, found " + describeFound(item));
      ok = false;
      continue;
    }
    out.push_back(item.get<std::string>());
  }
  if (!ok) return std::nullopt;
  return out;
}

void ObjectReader::know(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
}

void ObjectReader::allow(std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) know(k);
}

void ObjectReader::finish() {
  if (object_ == nullptr) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    const std::string& key = it.key();
    if (std::find(known_.begin(), known_.end(), key) != known_.end() || isExtensionKey(key)) continue;
    // Suggest only keys this object lacks: a misspelt key leaves its right spelling unused.
    std::vector<std::string> unused;
    for (const std::string& k : known_)
      if (object_->find(k) == object_->end()) unused.push_back(k);
    error(pathOf(key), "unknown key '" + key + "'; extension keys start with 'x-' or '_'" + didYouMean(key, unused));
  }
}

void readSchemaKey(ObjectReader& r) {
  const Json* v = r.get("$schema");
  if (v == nullptr) return;
  if (r.path() != "$") {
    r.error(r.pathOf("$schema"),
            "'$schema' belongs at the top of a descriptor file; an inline UKD takes none");
  } else if (!v->is_string()) {
    r.error(r.pathOf("$schema"), "expected string, found " + describeFound(*v));
  }
}

}  // namespace ukdpack::detail
