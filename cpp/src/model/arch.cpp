#include "ukdpack/model/arch.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

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
// One row of targets.def.
struct TargetRow {
  std::string_view name;
  std::string_view family;    // the generic family holding it, or empty
  std::string_view features;  // space-separated
  unsigned mach;              // EF_AMDGPU_MACH, 0 for none
};
const std::vector<TargetRow>& targetRows() {
  static const std::vector<TargetRow> rows{
#define UKD_TARGET(name, family, features, mach) {name, family, features, mach},
#include "ukdpack/model/targets.def"
#undef UKD_TARGET
  };
  return rows;
}

// Members of each generic family, from the table.
struct Family {
  std::string_view generic;
  std::vector<std::string_view> members;
};
const std::vector<Family>& families() {
  static const std::vector<Family> table = [] {
    std::vector<Family> out;
    for (const TargetRow& r : targetRows()) {
      if (isGenericArch(r.name)) out.push_back({r.name, {}});
    }
    for (const TargetRow& r : targetRows()) {
      for (Family& f : out) {
        if (f.generic == r.family) f.members.push_back(r.name);
      }
    }
    return out;
  }();
  return table;
}

// The target features each processor supports; a processor not listed supports none.
const std::map<std::string_view, std::vector<std::string_view>>& featureTable() {
  static const std::map<std::string_view, std::vector<std::string_view>> table = [] {
    std::map<std::string_view, std::vector<std::string_view>> out;
    for (const TargetRow& r : targetRows()) {
      std::string_view rest = r.features;
      while (!rest.empty()) {
        const std::size_t space = std::min(rest.find(' '), rest.size());
        if (space > 0) out[r.name].push_back(rest.substr(0, space));
        rest.remove_prefix(std::min(space + 1, rest.size()));
      }
    }
    return out;
  }();
  return table;
}

std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

bool targetRunsOn(std::string_view target, std::string_view arch) {
  const std::string t = bareArch(target);
  const std::string a = bareArch(arch);
  if (t == a) return true;
  for (const Family& f : families()) {
    if (f.generic == t) return std::find(f.members.begin(), f.members.end(), a) != f.members.end();
  }
  return false;
}

std::string TargetId::str() const {
  std::string out = processor;
  for (const auto& [name, setting] : features) out += ":" + name + setting;
  return out;
}

std::string targetIdProblem(std::string_view text) {
  const std::string bare = bareArch(text);
  if (!isArchName(bare)) return "'" + bare + "' is not a GPU arch such as gfx90a or gfx11-generic";
  const std::vector<std::string> supported = supportedFeatures(bare);
  std::set<std::string> seen;
  std::size_t pos = bare.size();
  while (pos < text.size()) {
    const std::size_t next = std::min(text.find(':', pos + 1), text.size());
    const std::string_view item = text.substr(pos + 1, next - pos - 1);
    pos = next;
    if (item.size() < 2 || (item.back() != '+' && item.back() != '-')) {
      return "feature '" + std::string(item) + "' must be a name followed by '+' or '-' (as in xnack+)";
    }
    const std::string name(item.substr(0, item.size() - 1));
    if (std::find(supported.begin(), supported.end(), name) == supported.end()) {
      std::string listed;
      for (const std::string& f : supported) listed += (listed.empty() ? "" : ", ") + f;
      return bare + " does not support feature '" + name + "' (it supports " +
             (listed.empty() ? std::string("none") : listed) + ")";
    }
    if (!seen.insert(name).second) return "feature '" + name + "' is named twice";
  }
  return "";
}

std::optional<TargetId> parseTargetId(std::string_view text) {
  if (!targetIdProblem(text).empty()) return std::nullopt;
  TargetId id{bareArch(text), {}};
  std::size_t pos = id.processor.size();
  while (pos < text.size()) {
    const std::size_t next = std::min(text.find(':', pos + 1), text.size());
    const std::string_view item = text.substr(pos + 1, next - pos - 1);
    id.features[std::string(item.substr(0, item.size() - 1))] = item.back();
    pos = next;
  }
  return id;
}

const std::vector<std::string>& genericTargets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Family& f : families()) out.emplace_back(f.generic);
    return out;
  }();
  return names;
}

std::vector<std::string> genericMembers(std::string_view generic) {
  for (const Family& f : families()) {
    if (f.generic == generic) return {f.members.begin(), f.members.end()};
  }
  return {};
}

std::string genericFamilyOf(std::string_view processor) {
  for (const Family& f : families()) {
    if (std::find(f.members.begin(), f.members.end(), processor) != f.members.end()) {
      return std::string(f.generic);
    }
  }
  return "";
}

const std::vector<std::string>& knownTargets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const TargetRow& r : targetRows()) out.emplace_back(r.name);
    return out;
  }();
  return names;
}

bool isKnownTarget(std::string_view bare) {
  const auto& rows = targetRows();
  return std::any_of(rows.begin(), rows.end(), [&](const TargetRow& r) { return r.name == bare; });
}

std::vector<std::string> nearestTargets(std::string_view bare) {
  std::size_t best = 3;  // farther than two edits is no typo of it
  std::vector<std::string> out;
  for (const TargetRow& r : targetRows()) {
    const std::size_t d = editDistance(bare, r.name);
    if (d < best) {
      best = d;
      out.clear();
    }
    if (d == best) out.emplace_back(r.name);
  }
  // Names that extend what was typed first (gfx103 -> gfx1030 before gfx1013): the
  // likeliest slip is a character left off the end.
  std::stable_partition(out.begin(), out.end(), [&](const std::string& n) { return n.rfind(bare, 0) == 0; });
  if (out.size() > 3) out.resize(3);
  return out;
}

std::vector<std::string> supportedFeatures(std::string_view processor) {
  const auto it = featureTable().find(processor);
  if (it == featureTable().end()) return {};
  return {it->second.begin(), it->second.end()};
}

bool targetIdRunsOn(std::string_view object, std::string_view device) {
  const auto obj = parseTargetId(object);
  const auto dev = parseTargetId(device);
  if (!obj || !dev || isGenericArch(dev->processor)) return false;
  if (!targetRunsOn(obj->processor, dev->processor)) return false;
  for (const auto& [name, setting] : obj->features) {
    const auto it = dev->features.find(name);
    if (it == dev->features.end() || it->second != setting) return false;
  }
  return true;
}

std::vector<std::string> compatibleTargets(std::string_view device) {
  const auto dev = parseTargetId(device);
  if (!dev) return {};
  // Features in the order the device names them (canonical: by name).
  std::vector<std::pair<std::string, char>> feats(dev->features.begin(), dev->features.end());
  std::vector<std::string> out;
  auto subsets = [&](const std::string& processor) {
    const std::vector<std::string> supported = supportedFeatures(processor);
    std::vector<std::pair<std::string, char>> usable;
    for (const auto& f : feats) {
      if (std::find(supported.begin(), supported.end(), f.first) != supported.end()) usable.push_back(f);
    }
    const std::size_t n = usable.size();
    // Descending masks, bit (n-1-i) for feature i: most features first, dropping
    // from the right first (rocm-kpack's order).
    for (unsigned mask = (1u << n) - 1;; --mask) {
      std::string candidate = processor;
      for (std::size_t i = 0; i < n; ++i) {
        if (mask & (1u << (n - 1 - i))) candidate += ":" + usable[i].first + usable[i].second;
      }
      out.push_back(candidate);
      if (mask == 0) break;
    }
  };
  // Most features first within a processor: order the masks by popcount.
  auto sortByCount = [&](std::size_t from) {
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(),
                     [](const std::string& a, const std::string& b) {
                       return std::count(a.begin(), a.end(), ':') > std::count(b.begin(), b.end(), ':');
                     });
  };
  if (isGenericArch(dev->processor)) return {};
  subsets(dev->processor);
  sortByCount(0);
  const std::string family = genericFamilyOf(dev->processor);
  if (!family.empty()) {
    const std::size_t from = out.size();
    subsets(family);
    sortByCount(from);
  }
  return out;
}

std::string amdgpuMachProcessor(unsigned mach) {
  // EF_AMDGPU_MACH values of the ELF header's e_flags, from the target table; the
  // values LLVM reserves are absent.
  if (mach == 0) return std::string();
  for (const TargetRow& r : targetRows()) {
    if (r.mach == mach) return std::string(r.name);
  }
  return std::string();
}

}  // namespace ukdpack
