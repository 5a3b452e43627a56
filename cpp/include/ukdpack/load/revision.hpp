// Selector revision: a digest over a pack's engine-visible content,
// so that any change to what an engine can select gives a new revision.
#pragma once

#include <string>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack {

// The canonical document the revision digests: pack id, arch, engine,
// dispatch symbol; per kernel (in pack order) its id, priority, completed
// metadata and arch; per launch (sorted by name; a single launch is one launch
// named "") its name, kind, toc key, symbol and sha256 (other kinds: their
// fields as written). A pack of a slotted engine adds the engine's slot names
// in run order and the pack's slot; an unslotted pack's document has neither.
Json selectorRevisionDocument(const DescriptorSet& set, const Pack& pack);

// sha256 (lowercase hex) of the compact dump of that document.
std::string selectorRevision(const DescriptorSet& set, const Pack& pack);

// By pack id; PACK_UNKNOWN when no loaded pack has it.
Result<std::string> selectorRevision(const DescriptorSet& set, const std::string& packId);

}  // namespace ukdpack
