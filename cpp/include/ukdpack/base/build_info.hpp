// What the runtime was built with, for `ukdpack doctor` and bug reports: the
// C++ compiler, and the zstd and OpenSSL libraries it runs with.
#pragma once

#include <string>

namespace ukdpack {

struct BuildInfo {
  std::string compiler;        // "clang 15.0.6", "gcc 12.2.0" (id and __VERSION__)
  long cplusplus = 0;          // __cplusplus of the runtime's build
  std::string zstd;            // ZSTD_versionString() of the library loaded
  std::string zstdHeaders;     // ZSTD_VERSION_STRING of the headers built against
  std::string openssl;         // OpenSSL_version(OPENSSL_VERSION) of the library loaded
  std::string opensslHeaders;  // OPENSSL_VERSION_TEXT of the headers built against
};

BuildInfo buildInfo();

}  // namespace ukdpack
