// Strict reading of one JSON object: typed field access that records a
// diagnostic (file, JSON path, expectation, finding) for every problem, and a
// final pass that refuses keys nobody asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/descriptors.hpp"

namespace ukdpack::detail {

// "string", "integer", "number", "boolean", "object", "array", "null".
std::string jsonTypeName(const Json& value);
// The type name and a short rendering of the value: "integer 5".
std::string describeFound(const Json& value);

class ObjectReader {
 public:
  ObjectReader(const Json& value, std::string file, std::string path,
               std::vector<Diagnostic>& diags);

  bool isObject() const { return object_ != nullptr; }
  bool has(std::string_view key) const;
  // The raw member (marked as known), or nullptr when absent.
  const Json* get(std::string_view key);

  std::optional<std::string> string(std::string_view key, bool required, bool nonEmpty = true);
  std::optional<std::int64_t> integer(std::string_view key, bool required);
  const Json* object(std::string_view key, bool required);
  const Json* array(std::string_view key, bool required);
  std::optional<std::vector<std::string>> stringList(std::string_view key, bool required,
                                                     bool nonEmptyItems = true);
  // An optional string or null; returns nullopt for both absent and null.
  std::optional<std::string> nullableString(std::string_view key, bool required);

  // Marks keys as known without reading them.
  void allow(std::initializer_list<std::string_view> keys);
  // Refuses every key that was not read or allowed, except extension keys.
  void finish();

  std::string pathOf(std::string_view key) const { return jsonPathKey(path_, key); }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  bool failed() const { return failed_; }
  std::vector<Diagnostic>& diags() { return diags_; }
  void error(const std::string& path, const std::string& message);

 private:
  const Json* member(std::string_view key, bool required);

  const Json* object_ = nullptr;
  std::string file_;
  std::string path_;
  std::vector<Diagnostic>& diags_;
  // Keys read or allowed: a few per object, so a vector scanned linearly (short keys
  // stay in the string's own buffer) beats a set's node allocations.
  std::vector<std::string> known_;
  void know(std::string_view key);
  bool failed_ = false;
};

// `$schema`: the JSON Schema of a descriptor file, for editors. A string at the top of a
// file (path `$`), never interpreted; an inline UKD is no file and takes none.
void readSchemaKey(ObjectReader& r);

}  // namespace ukdpack::detail
