// sha256 (OpenSSL libcrypto), as lowercase hex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ukdpack {

std::string sha256Hex(const void* data, std::size_t size);
inline std::string sha256Hex(const std::vector<std::uint8_t>& bytes) {
  return sha256Hex(bytes.data(), bytes.size());
}

}  // namespace ukdpack
