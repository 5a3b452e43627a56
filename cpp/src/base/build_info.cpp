#include "ukdpack/base/build_info.hpp"

#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <zstd.h>

namespace ukdpack {

BuildInfo buildInfo() {
  BuildInfo info;
  // Library versions come from the libraries loaded, which a distribution update may
  // change under a built extension; the header versions say what it was built against.
#if defined(__clang__)
  info.compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  info.compiler = std::string("gcc ") + __VERSION__;
#elif defined(_MSC_VER)
  info.compiler = "msvc " + std::to_string(_MSC_FULL_VER);
#else
  info.compiler = "unknown";
#endif
  info.cplusplus = static_cast<long>(__cplusplus);
  info.zstd = ZSTD_versionString();
  info.zstdHeaders = ZSTD_VERSION_STRING;
  info.openssl = OpenSSL_version(OPENSSL_VERSION);
  info.opensslHeaders = OPENSSL_VERSION_TEXT;
  return info;
}

}  // namespace ukdpack
