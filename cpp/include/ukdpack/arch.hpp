// GPU architecture names: bare ids, feature suffixes, generic families.
#pragma once

#include <string>
#include <string_view>

namespace ukdpack {

// "gfx90a:xnack-" -> "gfx90a"; a bare id is returned unchanged.
std::string bareArch(std::string_view arch);

// Whether a bare id names a GPU target ukdpack knows the shape of:
// gfxNNN[N], a generic family such as gfx11-generic, or sm_NN[a].
bool isArchName(std::string_view bare);

// Whether `arch` is a generic target id (ends in "-generic").
bool isGenericArch(std::string_view arch);

// Whether the code object built for `target` (a bare or generic id) runs on
// `arch`: equal ids, or `target` is a generic family holding `arch`.
bool targetRunsOn(std::string_view target, std::string_view arch);

}  // namespace ukdpack
