// libFuzzer target for the descriptor loader: the input is one or more files,
// each "<relative path>\n<content>", separated by NUL bytes. They are written
// into a scratch shard folder and loaded with loadShard, so the walk, the
// duplicate-key JSON parser, the typed readers and the reference checks all run.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "ukdpack/loader.hpp"

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
    // The in-memory parser on its own, as the Python binding calls it.
    (void)ukdpack::parseDescriptorText(file);
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
    for (const ukdpack::PackMember& m : pack.members) (void)set.findKernel(m.kernel.id);
  }
  return 0;
}
