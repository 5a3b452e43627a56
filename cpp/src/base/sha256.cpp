#include "ukdpack/base/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <memory>

namespace ukdpack {

namespace {

std::string hexOf(const unsigned char* digest, unsigned int len) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

// The SHA-256 implementation, fetched from OpenSSL's providers once: EVP_sha256()
// makes each EVP_DigestInit_ex fetch it anew, which costs more than hashing a kernel's
// few hundred bytes. Held for the process's life.
const EVP_MD* sha256Md() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

}  // namespace

struct Sha256::State {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  bool ok = false;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ok = state_->ctx && EVP_DigestInit_ex(state_->ctx.get(), sha256Md(), nullptr) == 1;
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) {
  if (state_->ok) state_->ok = EVP_DigestUpdate(state_->ctx.get(), data, size) == 1;
}

std::string Sha256::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  if (!state_->ok || EVP_DigestFinal_ex(state_->ctx.get(), digest.data(), &len) != 1) return {};
  state_->ok = false;
  return hexOf(digest.data(), len);
}

// One buffer in one call, without the state object (this runs per code object).
std::string sha256Hex(const void* data, std::size_t size) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), sha256Md(), nullptr) != 1 || EVP_DigestUpdate(ctx.get(), data, size) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest.data(), &len) != 1) {
    return {};
  }
  return hexOf(digest.data(), len);
}

}  // namespace ukdpack
