// libFuzzer target for the kpack archive reader: the input is an archive's
// bytes; every entry it lists is fetched (and decompressed).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ukdpack/archive/kpack.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Small limits: a claimed 1 GiB entry is valid input, not a finding, but
  // would trip libFuzzer's memory limit.
  ukdpack::KpackLimits limits;
  limits.maxOriginalSize = 16u << 20;
  limits.maxTocSize = 16u << 20;
  limits.maxEntries = 1u << 16;
  auto archive =
      ukdpack::KpackArchive::fromBytes(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>", limits);
  if (!archive) return 0;
  const ukdpack::KpackArchive& a = archive.value();
  (void)a.groupName();
  (void)a.archFamily();
  (void)a.compressionScheme();
  for (const std::string& key : a.keys()) {
    for (const std::string& arch : a.arches()) {
      if (a.find(key, arch) != nullptr) (void)a.get(key, arch);
    }
    (void)a.get(key, "gfx000");
  }
  return 0;
}
