// libFuzzer target for the descriptor loader: the input is one or more files,
// each "<relative path>\n<content>", separated by NUL bytes. They are written
// into a scratch shard folder and loaded with loadShard, so the walk, the
// JSON scanner (the tape), the typed readers and the reference checks all run.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>

#include "ukdpack/json/json_spans.hpp"
#include "ukdpack/load/loader.hpp"

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path& root = scratchRoot();
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  if (ec) return 0;

  std::size_t start = 0;
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
    // The in-memory parser on its own, as the Python binding calls it, against
    // nlohmann's, and the spans against it.
    checkReader(file);
    const fs::path path = root / rel;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }

  const ukdpack::DescriptorSet set = ukdpack::loadShard(root);
  // Walk what loaded, through the finders, as a consumer would.
  for (const ukdpack::Pack& pack : set.packs) {
    (void)set.findPack(pack.id);
    (void)set.dispatchOf(pack);
    if (const ukdpack::Engine* engine = set.engineOf(pack)) (void)set.metadataOf(*engine);
    for (const ukdpack::PackMember& m : pack.members) (void)set.findKernel(m.kernel().id);
  }
  return 0;
}
