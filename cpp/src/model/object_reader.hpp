// Strict reading of one JSON object: typed field access that records a
// diagnostic (file, JSON path, expectation, finding) for every problem, and a
// final pass that refuses keys nobody asked for.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/model/descriptors.hpp"

namespace ukdpack::detail {

// "string", "integer", "number", "boolean", "object", "array", "null".
std::string jsonTypeName(const Json& value);
// The type name and a short rendering of the value: "integer 5". `V` is Json
// or JsonNode (json_tape.hpp): the loader's tape reads by the same rules.
template <class V>
std::string describeFound(const V& value);

// The reader of one object; `V` is Json or JsonNode, instantiated for both.
// `file` is held by reference: it outlives the reader (a context's, or the
// enclosing reader's).
template <class V>
class BasicObjectReader {
 public:
  BasicObjectReader(const V& value, const std::string& file, std::string path, std::vector<Diagnostic>& diags);

  bool isObject() const { return object_ != nullptr; }
  bool has(std::string_view key) const;
  // The raw member (marked as known), or nullptr when absent.
  const V* get(std::string_view key);

  std::optional<std::string> string(std::string_view key, bool required, bool nonEmpty = true);
  std::optional<std::int64_t> integer(std::string_view key, bool required);
  const V* object(std::string_view key, bool required);
  const V* array(std::string_view key, bool required);
  std::optional<std::vector<std::string>> stringList(std::string_view key, bool required, bool nonEmptyItems = true);
  // An optional string or null; returns nullopt for both absent and null.
  std::optional<std::string> nullableString(std::string_view key, bool required);

  // Marks keys as known without reading them.
  void allow(std::initializer_list<std::string_view> keys);
  // Refuses every key that was not read or allowed, except extension keys.
  void finish();

  std::string pathOf(std::string_view key) const { return jsonPathKey(path_, key); }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  bool failed() const { return failed_; }
  std::vector<Diagnostic>& diags() { return diags_; }
  void error(const std::string& path, const std::string& message);

 private:
  const V* member(std::string_view key, bool required);
  // The one refusal of keys nobody reads (extension keys aside).
  void refuseUnknownKey(const std::string& key);

  const V* object_ = nullptr;
  const std::string* file_;
  std::string path_;
  std::vector<Diagnostic>& diags_;
  // Keys read or allowed: a few per object, scanned linearly. Views: every key
  // a reader asks for is its own name (a literal or a static table's entry);
  // the first kInline sit in the reader itself, so most objects allocate nothing.
  static constexpr std::size_t kInline = 16;
  std::array<std::string_view, kInline> known_{};
  std::size_t knownCount_ = 0;
  std::vector<std::string_view> knownMore_;
  bool isKnown(std::string_view key) const;
  void mark(std::string_view key, const typename V::const_iterator& it);
  std::uint64_t readMask_ = 0;  // a tape object's members read, by place (the first 64)
  void know(std::string_view key);
  bool failed_ = false;
};

using ObjectReader = BasicObjectReader<Json>;

// `$schema`: the JSON Schema of a descriptor file, for editors. A string at the top of a
// file (path `$`), never interpreted; an inline UKD is no file and takes none.
template <class V>
void readSchemaKey(BasicObjectReader<V>& r);

// The readers behind parseKernel, parsePack and checkVersion, over a Json or a
// JsonNode (instantiated for both). parsePackFrom moves each kernel's object
// out of `consume` (a Json document the caller drops) instead of copying it.
template <class V>
std::optional<Kernel> parseKernelFrom(const V& ukd, const KernelContext& ctx, std::vector<Diagnostic>& diags);
// `inlineKernels` (when given) appends to `members` the member of each inline
// kernel object (its kernelDescriptors place and first byte in the text, npos
// in a DOM) instead of reading the object: a shard index's kernels, read from
// their own bytes, each built in place; appending none leaves it out.
using InlineKernelReader = std::function<void(std::size_t index, std::size_t offset, std::vector<PackMember>& members)>;
template <class V>
std::optional<Pack> parsePackFrom(const V& kdp, Json* consume, const DescriptorContext& ctx,
                                  std::vector<Diagnostic>& diags, const Version& maxUkd, bool refuseNewer,
                                  const InlineKernelReader* inlineKernels = nullptr);
template <class V>
VersionCheck checkVersionOf(const V& doc, std::string_view type, const Version& max);

}  // namespace ukdpack::detail
