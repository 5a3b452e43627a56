// GPU architecture names and AMD target IDs: bare ids, feature settings, generic
// families, and the rule deciding which code object runs on which device. The one
// table of targets ukdpack knows (reached from Python through the extension).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ukdpack {

// "gfx90a:xnack-" -> "gfx90a"; a bare id is returned unchanged.
std::string bareArch(std::string_view arch);

// Whether a bare id names a GPU target ukdpack knows the shape of:
// gfxNNN[N], a generic family such as gfx11-generic, or sm_NN[a].
bool isArchName(std::string_view bare);

// Whether `arch` is a generic target id (ends in "-generic").
bool isGenericArch(std::string_view arch);

// Whether the code object built for `target` (a bare or generic id; features are
// ignored) runs on `arch`: equal ids, or `target` is a generic family holding `arch`.
bool targetRunsOn(std::string_view target, std::string_view arch);

// An AMD target ID: a processor and the setting of each feature it names
// ('+' on, '-' off; a feature not named is "any").
struct TargetId {
  std::string processor;
  std::map<std::string, char> features;  // feature name -> '+' or '-'
  // The canonical text: processor, then each feature in name order ("gfx90a:sramecc+:xnack-").
  std::string str() const;
};

// "gfx90a:xnack+" -> {gfx90a, {xnack: '+'}}. Empty when the text is no target ID:
// an unknown processor shape, a feature without '+'/'-', one named twice, or one the
// processor does not support (per the table: xnack, sramecc).
std::optional<TargetId> parseTargetId(std::string_view text);

// Why `text` is no target ID (for messages), or empty.
std::string targetIdProblem(std::string_view text);

// The generic families and their member processors, as LLVM's AMDGPU
// documentation lists them.
const std::vector<std::string>& genericTargets();
std::vector<std::string> genericMembers(std::string_view generic);
// The generic family holding `processor` (bare), or empty.
std::string genericFamilyOf(std::string_view processor);

// Every target of the table (targets.def: AMD processors, generic families, sm_ arches),
// in table order; whether `bare` is one; the known targets nearest to `bare` (at most
// two edits away, at the least distance, those extending `bare` first, three at most)
// for a "did you mean".
const std::vector<std::string>& knownTargets();
bool isKnownTarget(std::string_view bare);
std::vector<std::string> nearestTargets(std::string_view bare);

// The features (xnack, sramecc) `processor` (bare or generic) supports, by name.
std::vector<std::string> supportedFeatures(std::string_view processor);

// Whether an object built for target ID `object` runs on a device whose target ID
// is `device`: the object's processor is the device's or a generic family holding
// it, and each feature the object sets ('+'/'-') is set the same way on the
// device; a feature the object leaves "any" runs either way. A device feature left
// unset (the device's setting unknown) runs only objects that leave it "any".
bool targetIdRunsOn(std::string_view object, std::string_view device);

// The target IDs an archive entry may be filed under to run on `device`, most
// specific first: the device's processor with all its features, then with fewer
// (dropping from the right, as rocm-kpack does), then its generic family the same
// way (features the family does not support left out). Empty for no target ID.
std::vector<std::string> compatibleTargets(std::string_view device);

// The processor an AMDGPU ELF header's EF_AMDGPU_MACH value (e_flags & 0xff)
// names ("gfx90a", "gfx10-3-generic"), or empty for a value LLVM does not assign.
std::string amdgpuMachProcessor(unsigned mach);

}  // namespace ukdpack
