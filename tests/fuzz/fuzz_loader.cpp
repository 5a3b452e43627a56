// libFuzzer target for the descriptor loader: the input is one or more files,
// each "<relative path>\n<content>", separated by NUL bytes. They are written
// into a scratch shard folder and loaded with loadShard, so the walk, the
// JSON scanner (the tape), the typed readers and the reference checks all run.
// Then the shard's index is drafted from that load, edited as the input's "index.ukdx"
// segment says, sealed again and loaded through (throughTheIndex).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>

#include "base/binding_digest.hpp"
#include "load/shard_index_impl.hpp"
#include "ukdpack/json/json_spans.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/shard_index.hpp"

namespace fs = std::filesystem;

namespace {

// One scratch folder per process: fuzzing jobs may run side by side.
const fs::path& scratchRoot() {
  static const fs::path root = [] {
    const char* base = std::getenv("UKDPACK_FUZZ_TMP");
    fs::path dir = fs::path(base != nullptr ? base : "/tmp") / ("ukdpack-fuzz-loader-" + std::to_string(getpid()));
    return dir;
  }();
  return root;
}

// A path the fuzzer chose, kept inside the shard: relative, no "..", short.
bool safeRelative(std::string_view rel) {
  if (rel.empty() || rel.size() > 128 || rel.front() == '/') return false;
  if (rel.find('\0') != std::string_view::npos || rel.find('\\') != std::string_view::npos) return false;
  const fs::path p{std::string(rel)};
  for (const fs::path& part : p)
    if (part == ".." || part == ".") return false;
  return true;
}

void valuesOf(const ukdpack::Json& v, const std::string& path, std::map<std::string, const ukdpack::Json*>& out) {
  out.emplace(path, &v);
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) valuesOf(*it, ukdpack::jsonPathKey(path, it.key()), out);
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) valuesOf(v[i], ukdpack::jsonPathIndex(path, i), out);
  }
}

// The spans of text the reader took (migrate's, read from the same tape) name
// exactly its values, and each scalar's bytes read as that value. A
// disagreement is a finding (abort), as a crash is.
void checkSpans(std::string_view text, const ukdpack::Json& doc) {
  const auto spans = ukdpack::jsonSpans(text);
  if (!spans) std::abort();
  std::map<std::string, const ukdpack::Json*> values;
  valuesOf(doc, "$", values);
  if (spans.value().size() != values.size()) std::abort();
  for (const ukdpack::JsonSpan& s : spans.value()) {
    const auto it = values.find(s.path);
    if (it == values.end() || s.begin >= s.end || s.end > text.size()) std::abort();
    const ukdpack::Json& v = *it->second;
    const char first = text[s.begin], last = text[s.end - 1];
    if (v.is_object()) {
      if (first != '{' || last != '}') std::abort();
    } else if (v.is_array()) {
      if (first != '[' || last != ']') std::abort();
    } else {
      const auto again = ukdpack::parseDescriptorText(text.substr(s.begin, s.end - s.begin));
      if (!again || again.value() != v) std::abort();
    }
  }
}

// The one scanner (the tape behind parseDescriptorText) against nlohmann's own
// parser with comments on: what the tape takes, nlohmann reads alike; what the
// tape calls a syntax error, nlohmann refuses too (and words: the tape's error
// path asks it). Limits (duplicate keys, int64, nesting) are the tape's alone.
void checkReader(std::string_view text) {
  const auto doc = ukdpack::parseDescriptorText(text);
  ukdpack::Json theirs;
  bool parsed = true;
  try {
    theirs = ukdpack::Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                                  /*ignore_comments=*/true);
  } catch (const ukdpack::Json::exception&) {
    parsed = false;
  }
  if (doc) {
    if (!parsed || theirs != doc.value()) std::abort();
    checkSpans(text, doc.value());
  } else if (doc.error().code == "JSON_SYNTAX" && (parsed || doc.error().message == "not valid JSON")) {
    std::abort();
  }
}

// Walk what loaded, through the finders and each kernel, as a consumer would (a
// kernel read through an index is built from its span here).
void walk(const ukdpack::DescriptorSet& set) {
  for (const ukdpack::Pack& pack : set.packs) {
    (void)set.findPack(pack.id);
    (void)set.dispatchOf(pack);
    if (const ukdpack::Engine* engine = set.engineOf(pack)) (void)set.metadataOf(*engine);
    for (const ukdpack::PackMember& m : pack.members) (void)set.findKernel(m.kernel().id);
  }
}

// The index drafted from `json`, the shard at `root` as loaded (none when it says anything),
// edited by `edits` (5 bytes an edit: a little-endian u32 place in the body, taken
// modulo its size, and a byte XORed in there), sealed with its body's digest again so
// that the edits reach the records behind the digest check, then loaded through. The
// load must be memory-safe whatever the records say (a sealed index is trusted, as the
// packer's own is); through the unedited index it must load what the JSON loads.
void throughTheIndex(const fs::path& root, std::string_view edits, const ukdpack::DescriptorSet& json) {
  auto drafted = ukdpack::draftShardIndex(json);
  if (!drafted) return;
  std::string bytes = std::move(drafted.value().bytes);
  constexpr std::size_t kHeader = 32;  // magic, format, body size, body digest (16)
  if (bytes.size() <= kHeader) std::abort();
  const std::size_t body = bytes.size() - kHeader;
  for (std::size_t i = 0; i + 5 <= edits.size(); i += 5) {
    std::uint32_t at = 0;
    std::memcpy(&at, edits.data() + i, 4);
    bytes[kHeader + at % body] = static_cast<char>(bytes[kHeader + at % body] ^ edits[i + 4]);
  }
  const std::string hex = ukdpack::detail::bindingDigestHex(bytes.data() + kHeader, body);
  for (std::size_t i = 0; i < 16; ++i) bytes[16 + i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  {
    std::ofstream out(root / ukdpack::kShardIndexFile, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const ukdpack::DescriptorSet indexed = ukdpack::loadShard(root);
  walk(indexed);
  if (edits.size() < 5 && !indexed.fromIndex) std::abort();  // its own index, unedited, binds
  if (edits.size() < 5 && ukdpack::detail::describeSet(indexed) != ukdpack::detail::describeSet(json)) std::abort();
  // ukdpack-validate's reading of an edited index: every file read and cut at the
  // spans the records give, whatever its time.
  if (edits.size() >= 5) (void)ukdpack::checkShardIndex(root);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path& root = scratchRoot();
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  if (ec) return 0;

  std::size_t start = 0;
  std::string_view indexEdits;
  for (int index = 0; start <= input.size() && index < 16; ++index) {
    std::size_t end = input.find('\0', start);
    if (end == std::string_view::npos) end = input.size();
    std::string_view file = input.substr(start, end - start);
    start = end + 1;
    std::string rel = "f" + std::to_string(index) + ".ukd.json";
    const std::size_t nl = file.find('\n');
    if (nl != std::string_view::npos && safeRelative(file.substr(0, nl))) {
      rel = std::string(file.substr(0, nl));
      file = file.substr(nl + 1);
    }
    if (rel == ukdpack::kShardIndexFile) {  // not a file: the index's edits
      indexEdits = file;
      continue;
    }
    // The in-memory parser on its own, as the Python binding calls it, against
    // nlohmann's, and the spans against it.
    checkReader(file);
    const fs::path path = root / rel;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }

  const ukdpack::DescriptorSet set = ukdpack::loadShard(root);
  walk(set);
  throughTheIndex(root, indexEdits, set);
  return 0;
}
