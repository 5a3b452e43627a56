// Reader of kpack archives (KPAK version 1, docs/shards.md), the format ROCm's
// rocm-kpack reads and writes. Bounded reads: no offset or size in the file is
// trusted before it is checked against the file; no input crashes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack {

struct KpackLimits {
  std::uint64_t maxOriginalSize = 1ull << 30;  // per entry, decompressed
  std::uint64_t maxTocSize = 256ull << 20;     // msgpack TOC bytes
  std::uint64_t maxEntries = 1ull << 22;
};

struct KpackEntry {
  std::string type;  // "hsaco" or "cubin"
  std::uint64_t ordinal = 0;
  std::uint64_t originalSize = 0;
  nlohmann::json metadata;  // null when absent
};

class KpackArchive {
 public:
  // Opens and checks the header and TOC; failures name the file and the finding.
  static Result<KpackArchive> open(const std::filesystem::path& path, const KpackLimits& limits = {});
  // The same over bytes in memory (tests, fuzzing); `name` labels messages.
  static Result<KpackArchive> fromBytes(std::string bytes, std::string name = "<memory>",
                                        const KpackLimits& limits = {});

  const std::string& path() const;
  const std::string& groupName() const;
  const std::string& archFamily() const;
  const std::vector<std::string>& arches() const;  // gfx_arches
  const std::string& compressionScheme() const;    // "zstd-per-kernel" or "none"
  std::vector<std::string> keys() const;           // toc keys, sorted
  const KpackEntry* find(const std::string& tocKey, const std::string& arch) const;

  // The decompressed bytes of one entry; exact lookup on (toc key, arch).
  Result<std::vector<std::uint8_t>> get(const std::string& tocKey, const std::string& arch) const;

  KpackArchive(KpackArchive&&) noexcept;
  KpackArchive& operator=(KpackArchive&&) noexcept;
  ~KpackArchive();

 private:
  struct Impl;
  explicit KpackArchive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ukdpack
