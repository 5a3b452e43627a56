// sha256 (OpenSSL libcrypto), as lowercase hex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ukdpack {

std::string sha256Hex(const void* data, std::size_t size);

// A sha256 fed in parts (a file read in chunks); hex() ends it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  std::string hex();  // lowercase hex; empty when the digest failed

 private:
  struct State;
  std::unique_ptr<State> state_;
};
inline std::string sha256Hex(const std::vector<std::uint8_t>& bytes) { return sha256Hex(bytes.data(), bytes.size()); }

}  // namespace ukdpack
