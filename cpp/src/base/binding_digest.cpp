#include "base/binding_digest.hpp"

// Header-only use: no library for ukdpack's consumers to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ukdpack::detail {

std::string bindingDigestHex(const void* data, std::size_t size) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data, size));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(canonical.digest));
  for (const unsigned char byte : canonical.digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0x0F]);
  }
  return out;
}

std::uint64_t stableHash64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace ukdpack::detail
