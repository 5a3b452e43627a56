// Kernel slots across a set: which arches a slotted engine ships for, and
// which of its slots hold no kernel there. One answer for the loader (an
// authored tree: SLOT_EMPTY) and for whoever judges one shard's arch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ukdpack/model/descriptors.hpp"

namespace ukdpack {

// One slot of an engine empty where the engine ships.
struct SlotGap {
  std::size_t slot = 0;    // index into Engine::slots of the empty slot
  std::size_t filler = 0;  // the first slot (run order) with a kernel on those arches
  // Bare arch ids, sorted; {""} when the engine's kernels name no arch (it ships for
  // every arch and the slot holds no kernel at all).
  std::vector<std::string> arches;
};

// The slots of `engine` empty on an arch it ships for. `packs` are the packs
// whose kernels fill its slots (each pack's `slot` names its catalog; a pack
// naming no slot of the engine is left out). The engine ships for an arch a
// kernel of one of them runs on. `arches`: only these (bare ids, as a shard's);
// empty: every arch some kernel names, a generic family standing for its
// members. One gap per empty slot and filler, in slot order.
std::vector<SlotGap> emptySlots(const Engine& engine, const std::vector<const Pack*>& packs,
                                const std::vector<std::string>& arches = {});

// The SLOT_EMPTY message for `gap`: engine, slot and arches, and what to add.
std::string emptySlotMessage(const Engine& engine, const SlotGap& gap);

// "'prep', 'dkdv', 'dq'": an engine's slot names in run order, quoted.
std::string slotNamesText(const Engine& engine);

}  // namespace ukdpack
