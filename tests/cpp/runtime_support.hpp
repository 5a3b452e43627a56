// Test support for the runtime tests: descriptor trees in temporary folders,
// descriptor builders, and a KPAK writer for archives made in tests.
#pragma once

#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdtest {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A temporary folder, removed with everything in it when the test ends.
class TempTree {
 public:
  TempTree() {
    std::string pattern = (fs::temp_directory_path() / "ukdpack-test-XXXXXX").string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    root_ = made != nullptr ? fs::path(made) : fs::temp_directory_path() / "ukdpack-test-fallback";
    fs::create_directories(root_);
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const fs::path& root() const { return root_; }
  fs::path path(const std::string& rel) const { return root_ / rel; }

  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << text;
  }
  void write(const std::string& rel, const Json& doc) const { write(rel, doc.dump(2)); }
  void writeBytes(const std::string& rel, const std::vector<std::uint8_t>& bytes) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  fs::path root_;
};

inline std::vector<std::uint8_t> readBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string testData(const std::string& rel) { return std::string(UKDPACK_TEST_DATA_DIR) + "/" + rel; }

// --------------------------------------------------------------------------- descriptors

inline Json udd(const std::string& id, const std::string& symbol,
                std::optional<std::vector<std::string>> launches = std::nullopt) {
  Json d = {{"id", id}, {"version", launches ? "1.1" : "1.0"}, {"name", id + "_name"}, {"dispatch_symbol", symbol}};
  if (launches) d["launches"] = *launches;
  return d;
}

inline Json kmd(const std::string& id = "kmd-1") {
  return {{"id", id},
          {"version", "1.0"},
          {"name", "eng_md"},
          {"fields", Json::array({{{"name", "dtype"}, {"type", "string"}},
                                  {{"name", "block"}, {"type", "int"}, {"default_value", 256}}})}};
}

inline Json ued(const std::string& id = "ued-1", const std::string& kmdId = "kmd-1") {
  return {{"id", id}, {"version", "1.0"}, {"name", "test:eng"}, {"metadata", kmdId}};
}

inline Json umd(const std::string& id = "umd-1", const std::string& symbol = "eng_match") {
  return {{"id", id}, {"version", "1.0"}, {"name", "eng_match"}, {"scope", "graph"}, {"match_symbol", symbol}};
}

inline Json hipSource(const std::string& entry) {
  return {{"kind", "hip"}, {"source", "k.hip"}, {"entry", entry}, {"build", Json::object()}};
}

// A single-launch UKD 1.0 with a hip source.
inline Json single(const std::string& id, const std::string& name, const std::string& dtype = "FLOAT") {
  return {{"id", id},
          {"version", "1.0"},
          {"name", name},
          {"priority", 0},
          {"metadata", {{"dtype", dtype}}},
          {"kernel_source", hipSource(name + "_entry")}};
}

// A multi-launch UKD 1.1 with hip sources, one per launch name.
inline Json multi(const std::string& id, const std::string& name, const std::vector<std::string>& launches,
                  const std::string& dtype = "HALF") {
  Json sources = Json::object();
  for (const std::string& l : launches) sources[l] = hipSource(name + "_" + l);
  return {{"id", id},          {"version", "1.1"}, {"name", name}, {"priority", 0}, {"metadata", {{"dtype", dtype}}},
          {"sources", sources}};
}

inline Json kdp(const std::string& id, const Json& kernels, const Json& dispatch = "udd-1",
                const Json& engine = "ued-1", const std::vector<std::string>& arch = {}) {
  return {{"id", id},
          {"version", "1.0"},
          {"name", id},
          {"arch", arch},
          {"matchers", Json::array({"umd-1"})},
          {"engine", engine},
          {"dispatch", dispatch},
          {"kernelDescriptors", kernels}};
}

// The engine, its KMD and matcher, one UDD, and the hip file the kernels name.
inline void writeGenerics(const TempTree& t, const Json& dispatch = udd("udd-1", "sym_one")) {
  t.write("eng.kmd.json", kmd());
  t.write("eng.ued.json", ued());
  t.write("eng.umd.json", umd());
  t.write("one.udd.json", dispatch);
  t.write("k.hip", std::string("extern \"C\" __global__ void k() {}\n"));
}

// --------------------------------------------------------------------------- diagnostics

inline std::string dump(const std::vector<ukdpack::Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags)
    out += std::string(ukdpack::severityName(d.severity)) + " " + d.code + ": " + d.str() + "\n";
  return out;
}

inline const ukdpack::Diagnostic* findDiag(const std::vector<ukdpack::Diagnostic>& diags, const std::string& code,
                                           const std::string& fragment = "") {
  for (const auto& d : diags)
    if ((code.empty() || d.code == code) && d.str().find(fragment) != std::string::npos) return &d;
  return nullptr;
}

// --------------------------------------------------------------------------- KPAK

// The msgpack subset a KPAK TOC uses: maps, arrays, strings, unsigned ints.
class Msgpack {
 public:
  Msgpack& map(std::size_t n) {
    if (n < 16) {
      byte(0x80 | n);
    } else {
      byte(0xde);
      be(n, 2);
    }
    return *this;
  }
  Msgpack& array(std::size_t n) {
    if (n < 16) {
      byte(0x90 | n);
    } else {
      byte(0xdc);
      be(n, 2);
    }
    return *this;
  }
  Msgpack& str(const std::string& s) {
    if (s.size() < 32) {
      byte(0xa0 | s.size());
    } else {
      byte(0xd9);
      byte(s.size());
    }
    out_.insert(out_.end(), s.begin(), s.end());
    return *this;
  }
  Msgpack& uint(std::uint64_t v) {
    if (v < 128) {
      byte(v);
    } else {
      byte(0xcf);
      be(v, 8);
    }
    return *this;
  }
  const std::vector<std::uint8_t>& bytes() const { return out_; }

 private:
  void byte(std::uint64_t b) { out_.push_back(static_cast<std::uint8_t>(b)); }
  void be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) byte((v >> (8 * i)) & 0xff);
  }
  std::vector<std::uint8_t> out_;
};

struct KpackItem {
  std::string tocKey;
  std::string arch;
  std::vector<std::uint8_t> payload;
};

inline void putLe(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>((v >> (8 * i)) & 0xff));
}

// An extra toc key for an item's payload: TOC entry (tocKey, arch of item
// `item`) with that item's ordinal, so many keys share one stored payload.
struct KpackAlias {
  std::string tocKey;
  std::size_t item = 0;
};

// A KPAK version 1 archive: zstd-per-kernel (level 3, content size in each
// frame) or "none".
inline std::vector<std::uint8_t> makeKpack(const std::vector<KpackItem>& items, bool zstd = true,
                                           const std::string& group = "kernels",
                                           const std::vector<KpackAlias>& aliases = {}) {
  std::vector<std::uint8_t> data;  // everything from offset 64 to the TOC
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blobs;
  if (zstd) {
    putLe(data, items.size(), 4);
    for (const KpackItem& it : items) {
      std::vector<std::uint8_t> frame(ZSTD_compressBound(it.payload.size()));
      const std::size_t n = ZSTD_compress(frame.data(), frame.size(), it.payload.data(), it.payload.size(), 3);
      frame.resize(n);
      putLe(data, frame.size(), 4);
      data.insert(data.end(), frame.begin(), frame.end());
    }
  } else {
    for (const KpackItem& it : items) {
      blobs.emplace_back(64 + data.size(), it.payload.size());
      data.insert(data.end(), it.payload.begin(), it.payload.end());
    }
  }
  std::set<std::string> arches;
  std::map<std::string, std::map<std::string, std::pair<std::size_t, std::size_t>>>
      toc;  // key -> arch -> (ordinal, size)
  for (std::size_t i = 0; i < items.size(); ++i) {
    arches.insert(items[i].arch);
    toc[items[i].tocKey][items[i].arch] = {i, items[i].payload.size()};
  }
  for (const KpackAlias& a : aliases) {
    const KpackItem& it = items.at(a.item);
    toc[a.tocKey][it.arch] = {a.item, it.payload.size()};
  }
  Msgpack m;
  m.map(zstd ? 8 : 7);
  m.str("format_version").uint(1);
  m.str("group_name").str(group);
  m.str("gfx_arch_family").str(arches.empty() ? "" : *arches.begin());
  m.str("gfx_arches").array(arches.size());
  for (const std::string& a : arches) m.str(a);
  m.str("toc").map(toc.size());
  for (const auto& [key, perArch] : toc) {
    m.str(key).map(perArch.size());
    for (const auto& [arch, entry] : perArch) {
      m.str(arch).map(3);
      m.str("type").str("hsaco");
      m.str("ordinal").uint(entry.first);
      m.str("original_size").uint(entry.second);
    }
  }
  if (zstd) {
    m.str("compression_scheme").str("zstd-per-kernel");
    m.str("zstd_offset").uint(64);
    m.str("zstd_size").uint(data.size());
  } else {
    m.str("compression_scheme").str("none");
    m.str("blobs").array(blobs.size());
    for (const auto& [off, size] : blobs) m.map(2).str("offset").uint(off).str("size").uint(size);
  }
  std::vector<std::uint8_t> out = {'K', 'P', 'A', 'K'};
  putLe(out, 1, 4);
  putLe(out, 64 + data.size(), 8);
  out.resize(64, 0);
  out.insert(out.end(), data.begin(), data.end());
  out.insert(out.end(), m.bytes().begin(), m.bytes().end());
  return out;
}

}  // namespace ukdtest
