#include "ukdpack/arch.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace ukdpack {

std::string bareArch(std::string_view arch) {
  const auto colon = arch.find(':');
  return std::string(arch.substr(0, colon));
}

namespace {
bool digit(char c) { return c >= '0' && c <= '9'; }
std::size_t digits(std::string_view s, std::size_t i) {
  std::size_t n = 0;
  while (i + n < s.size() && digit(s[i + n])) ++n;
  return n;
}
}  // namespace

// gfxNN[N[N]][x] (x a hex digit), gfxN(-N)*-generic, sm_NN[N][a-z]. Hand-written:
// it runs per arch entry of every kernel (CMake's UkdPackaging.cmake has the same
// pattern as a regex, and a test holds the two together).
bool isArchName(std::string_view s) {
  if (s.substr(0, 3) == "sm_") {
    const std::size_t n = digits(s, 3);
    if (n < 2 || n > 3) return false;
    const std::size_t rest = s.size() - 3 - n;
    return rest == 0 || (rest == 1 && s.back() >= 'a' && s.back() <= 'z');
  }
  if (s.substr(0, 3) != "gfx") return false;
  if (isGenericArch(s)) {
    std::string_view mid = s.substr(3, s.size() - 3 - std::string_view("-generic").size());
    std::size_t i = 0;
    for (bool first = true;; first = false) {
      if (!first) {
        if (i >= mid.size() || mid[i] != '-') return false;
        ++i;
      }
      const std::size_t n = digits(mid, i);
      if (n == 0) return false;
      i += n;
      if (i == mid.size()) return true;
    }
  }
  // 2-4 digits, then one optional hex digit (a fifth digit, or a-f).
  const std::size_t n = digits(s, 3);
  const std::size_t rest = s.size() - 3 - n;
  if (rest == 0) return n >= 2 && n <= 5;
  return rest == 1 && n >= 2 && n <= 4 && s.back() >= 'a' && s.back() <= 'f';
}

bool isGenericArch(std::string_view arch) {
  constexpr std::string_view suffix = "-generic";
  return arch.size() > suffix.size() && arch.substr(arch.size() - suffix.size()) == suffix;
}

namespace {
// Members of each generic family, from LLVM's AMDGPU processor table.
constexpr std::array<std::pair<std::string_view, std::string_view>, 31> kFamilies{{
    {"gfx9-generic", "gfx900"},     {"gfx9-generic", "gfx902"},
    {"gfx9-generic", "gfx904"},     {"gfx9-generic", "gfx906"},
    {"gfx9-generic", "gfx909"},     {"gfx9-generic", "gfx90c"},
    {"gfx9-4-generic", "gfx940"},   {"gfx9-4-generic", "gfx941"},
    {"gfx9-4-generic", "gfx942"},   {"gfx9-4-generic", "gfx950"},
    {"gfx10-1-generic", "gfx1010"}, {"gfx10-1-generic", "gfx1011"},
    {"gfx10-1-generic", "gfx1012"}, {"gfx10-1-generic", "gfx1013"},
    {"gfx10-3-generic", "gfx1030"}, {"gfx10-3-generic", "gfx1031"},
    {"gfx10-3-generic", "gfx1032"}, {"gfx10-3-generic", "gfx1033"},
    {"gfx10-3-generic", "gfx1034"}, {"gfx10-3-generic", "gfx1035"},
    {"gfx10-3-generic", "gfx1036"}, {"gfx11-generic", "gfx1100"},
    {"gfx11-generic", "gfx1101"},   {"gfx11-generic", "gfx1102"},
    {"gfx11-generic", "gfx1103"},   {"gfx11-generic", "gfx1150"},
    {"gfx11-generic", "gfx1151"},   {"gfx11-generic", "gfx1152"},
    {"gfx11-generic", "gfx1153"},   {"gfx12-generic", "gfx1200"},
    {"gfx12-generic", "gfx1201"},
}};
}  // namespace

bool targetRunsOn(std::string_view target, std::string_view arch) {
  const std::string t = bareArch(target);
  const std::string a = bareArch(arch);
  if (t == a) return true;
  return std::any_of(kFamilies.begin(), kFamilies.end(),
                     [&](const auto& fam) { return fam.first == t && fam.second == a; });
}

}  // namespace ukdpack
