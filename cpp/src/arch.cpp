#include "ukdpack/arch.hpp"

#include <algorithm>
#include <array>
#include <regex>
#include <utility>

namespace ukdpack {

std::string bareArch(std::string_view arch) {
  const auto colon = arch.find(':');
  return std::string(arch.substr(0, colon));
}

bool isArchName(std::string_view bare) {
  static const std::regex pattern(
      R"(^(gfx[0-9]{2,4}[0-9a-f]?|gfx[0-9]+(-[0-9]+)*-generic|sm_[0-9]{2,3}[a-z]?)$)");
  return std::regex_match(bare.begin(), bare.end(), pattern);
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
