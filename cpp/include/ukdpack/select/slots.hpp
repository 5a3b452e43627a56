// Slot programs: a slotted engine runs one kernel per slot, in slot order,
// each picked from its slot's catalog (StateManager::slottedEngines()).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/model/descriptors.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace ukdpack {

// The kernel one slot runs.
struct SlotPick {
  std::string slot;
  std::size_t index = 0;                         // the slot's position in run order
  const KernelDefinition* definition = nullptr;  // points into the state manager
  bool chosen = false;                           // the caller chose it (else the slot's default)
};

// Per slot, in run order, the pick. Points into the state manager: valid
// while that lives.
struct SlotProgram {
  const Engine* engine = nullptr;
  std::vector<SlotPick> picks;
};

// The slot program of a slotted engine (by id, else by name) for `problem`.
// A slot's default pick is its best-ranked kept kernel that applies: its
// pack's registered matchers accept the problem (as in select()) and the
// slot's predict_applicable_kernels heuristic, if registered, says yes. The
// ranking is the slot's catalog order, or its native ranker's for the problem.
// `choices` (slot name -> kernel id) replaces a slot's default, checked.
// Refusals: ENGINE_UNKNOWN (no such engine, or none of its kernels runs on
// the manager's arch), ENGINE_NOT_SLOTTED, SLOT_EMPTY (the engine is dropped
// for the arch), SLOT_UNKNOWN (a choice names no slot of the engine),
// SLOT_PICK (a choice is not a kept, applicable kernel of that slot, or a slot
// has no applicable kernel), MATCHER_FAILED and HEURISTIC_FAILED (a native
// check failed).
Result<SlotProgram> makeSlotProgram(const StateManager& manager, std::string_view engineId, const Json& problem,
                                    const std::map<std::string, std::string>& choices = {});

// The kept kernels of one slot in the order a pick tries them for `problem`:
// its catalog order, reordered by its native ranker when it has one
// (HEURISTIC_FAILED when the ranker fails or answers badly).
Result<std::vector<const KernelDefinition*>> rankSlot(const SlotCatalog& slot, const Json& problem);

}  // namespace ukdpack
