// The slot rules of a set (UED 1.1 slots, KDP 1.1 slot, UHD 1.1 slot): each KDP
// of a slotted engine fills one of its slots and no other KDP names one; each
// slot's heuristics declare that slot; each slot holds a kernel on every arch
// its engine ships for.
#include "ukdpack/load/slots.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "load/loader_impl.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

// Whether an arch list lets a kernel onto `arch`: an empty list is every arch;
// an empty arch stands for one no descriptor names, which only an empty list reaches.
bool listRunsOn(const std::vector<std::string>& list, const std::string& arch) {
  if (list.empty()) return true;
  return !arch.empty() &&
         std::any_of(list.begin(), list.end(), [&](const std::string& a) { return targetRunsOn(a, arch); });
}

bool kernelOn(const Pack& pack, const Kernel& kernel, const std::string& arch) {
  static const std::vector<std::string> none;
  return listRunsOn(pack.arch, arch) && listRunsOn(kernel.arch ? *kernel.arch : none, arch);
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string slotNamesText(const Engine& engine) {
  std::string out;
  for (const EngineSlot& s : engine.slots) out += (out.empty() ? "'" : ", '") + s.name + "'";
  return out;
}

std::vector<SlotGap> emptySlots(const Engine& engine, const std::vector<const Pack*>& packs,
                                const std::vector<std::string>& arches) {
  std::vector<SlotGap> out;
  if (!engine.slotted()) return out;
  using Member = std::pair<const Pack*, const Kernel*>;
  std::vector<std::vector<Member>> bySlot(engine.slots.size());
  for (const Pack* p : packs) {
    const auto at = p->slot ? engine.slotIndex(*p->slot) : std::nullopt;
    if (!at) continue;
    for (const PackMember& m : p->members) bySlot[*at].emplace_back(p, &m.kernel());
  }
  std::set<std::string> candidates;
  for (const std::string& a : arches) candidates.insert(bareArch(a));
  if (arches.empty()) {
    // Every arch a kernel names; a generic family ships to each of its members.
    for (const auto& members : bySlot) {
      for (const auto& [p, k] : members) {
        for (const std::string& a : k->arch && !k->arch->empty() ? *k->arch : p->arch) {
          const std::vector<std::string> family = isGenericArch(a) ? genericMembers(a) : std::vector<std::string>{};
          if (family.empty()) {
            candidates.insert(a);
          } else {
            candidates.insert(family.begin(), family.end());
          }
        }
      }
    }
    if (candidates.empty()) candidates.insert("");  // no kernel names an arch: every arch
  }
  std::map<std::pair<std::size_t, std::size_t>, std::vector<std::string>> gaps;  // (slot, filler) -> arches
  for (const std::string& arch : candidates) {
    std::vector<bool> filled(engine.slots.size(), false);
    std::optional<std::size_t> filler;
    for (std::size_t i = 0; i < bySlot.size(); ++i) {
      filled[i] = std::any_of(bySlot[i].begin(), bySlot[i].end(),
                              [&](const Member& m) { return kernelOn(*m.first, *m.second, arch); });
      if (filled[i] && !filler) filler = i;
    }
    if (!filler) continue;  // the engine does not ship for this arch
    for (std::size_t i = 0; i < filled.size(); ++i)
      if (!filled[i]) gaps[{i, *filler}].push_back(arch);
  }
  for (auto& [key, on] : gaps) out.push_back(SlotGap{key.first, key.second, std::move(on)});
  return out;
}

std::string emptySlotMessage(const Engine& engine, const SlotGap& gap) {
  const std::string& slot = engine.slots[gap.slot].name;
  const std::string& filler = engine.slots[gap.filler].name;
  const std::string kdp = "a KDP with \"slot\": \"" + slot + "\"";
  if (gap.arches.size() == 1 && gap.arches.front().empty()) {
    return "engine '" + engine.name + "' ships for every arch (its slot '" + filler +
           "' has kernels that name no arch), but slot '" + slot + "' holds no kernel; add a kernel to " + kdp;
  }
  const std::string on = joined(gap.arches);
  if (gap.arches.size() == 1) {
    return "engine '" + engine.name + "' ships for " + on + " (its slot '" + filler +
           "' has kernels there), but slot '" + slot + "' holds no kernel for " + on + "; add a kernel for " + on +
           " to " + kdp + " (or take " + on + " out of the engine's other kernels)";
  }
  return "engine '" + engine.name + "' ships for " + on + " (its slot '" + filler + "' has kernels there), but slot '" +
         slot + "' holds no kernel for any of them; add kernels for them to " + kdp +
         " (or take them out of the engine's other kernels)";
}

namespace detail {

// A KDP names a slot exactly when its engine has slots, and then one of them.
void Loader::checkPackSlot(const Pack& p, bool& refused) {
  const auto refuse = [&](const char* code, const std::string& path, const std::string& message) {
    set_.diagnostics.push_back(makeError(code, p.file, path, message));
    refused = true;
  };
  if (!p.engine) {
    if (p.slot) {
      refuse(codes::SLOT_UNEXPECTED, "$.slot",
             "KDP names slot '" + *p.slot +
                 "', but its engine is null; only a KDP of a slotted engine names a slot: remove \"slot\"");
    }
    return;
  }
  const Engine* e = kept(set_.engines, "ued", *p.engine);
  if (e == nullptr) return;  // the engine's own problem is reported
  const std::string engine = "engine '" + e->name + "' (" + e->file + ")";
  if (!e->slotted()) {
    if (p.slot) {
      refuse(codes::SLOT_UNEXPECTED, "$.slot",
             "KDP names slot '" + *p.slot + "', but " + engine +
                 " has no slots; remove \"slot\" (an engine lists its slots in \"slots\", UED 1.1)");
    }
    return;
  }
  if (!p.slot) {
    refuse(codes::SLOT_MISSING, "$",
           engine + " has slots " + slotNamesText(*e) +
               ", but this KDP names none; add \"slot\" naming the one its kernels fill (KDP version 1.1)");
  } else if (e->slot(*p.slot) == nullptr) {
    std::vector<std::string> names;
    for (const EngineSlot& s : e->slots) names.push_back(s.name);
    refuse(codes::SLOT_UNKNOWN, "$.slot",
           "slot '" + *p.slot + "' is no slot of " + engine + "; its slots are " + slotNamesText(*e) +
               didYouMean(*p.slot, names));
  } else {
    return;
  }
  slotRefused_.insert(idKey(e->id));
}

// A slot's role map names UHDs that declare that slot (a UHD 1.0 declares none);
// an engine-wide role map (an unslotted engine's, or predict_engine) names none
// that declares a slot.
void Loader::checkHeuristicSlot(const Engine& e, const EngineSlot* slot, const std::string& role,
                                const HeuristicDescriptor& h, const std::string& path, bool& refused) {
  const std::string uhd = "UHD '" + h.name + "' (" + h.file + ")";
  if (slot != nullptr) {
    if (h.slot && *h.slot == slot->name) return;
    const std::string found = h.slot                      ? "declares slot '" + *h.slot + "'"
                              : h.version < Version{1, 1} ? "is version " + h.version.str() + ", which declares no slot"
                                                          : "declares no slot";
    set_.diagnostics.push_back(makeError(codes::SLOT_HEURISTIC, e.file, path,
                                         "slot '" + slot->name + "' " + role + " names " + uhd + ", which " + found +
                                             "; a slot's heuristics serve that slot: expected \"slot\": \"" +
                                             slot->name + "\" in it (UHD version 1.1)"));
  } else {
    if (!h.slot) return;
    const std::string why =
        e.slotted() ? "predict_engine ranks the engine as a whole" : "engine '" + e.name + "' has no slots";
    set_.diagnostics.push_back(makeError(codes::SLOT_HEURISTIC, e.file, path,
                                         role + " names " + uhd + ", which declares slot '" + *h.slot + "', but " +
                                             why + ": expected a UHD that declares no slot"));
  }
  refused = true;
}

// A model trained for a slot names a slot of the engine it was trained against.
void Loader::checkTrainedSlots() {
  for (std::size_t i = 0; i < set_.heuristics.size(); ++i) {
    if (removed_.count({"uhd", i}) != 0) continue;
    const HeuristicDescriptor& h = set_.heuristics[i];
    for (const HeuristicDescriptor::TrainedRef& ref : h.trainedAgainst) {
      if (ref.type != "ued" || !ref.slot) continue;
      const Engine* e = kept(set_.engines, "ued", ref.id);
      if (e == nullptr || e->slot(*ref.slot) != nullptr) continue;
      std::string has = "which has no slots";
      std::string hint;
      if (e->slotted()) {
        std::vector<std::string> names;
        for (const EngineSlot& s : e->slots) names.push_back(s.name);
        has = "whose slots are " + slotNamesText(*e);
        hint = didYouMean(*ref.slot, names);
      }
      set_.diagnostics.push_back(
          makeError(codes::SLOT_UNKNOWN, h.file, ref.path.substr(0, ref.path.rfind('.')) + ".slot",
                    "trained_against names slot '" + *ref.slot + "' of engine '" + e->name + "' (" + e->file + "), " +
                        has + ": expected the slot of that engine the model was trained for" + hint));
      removed_.insert({"uhd", i});
      markUnloaded(h, "did not load");
      break;
    }
  }
}

// Each slot of a slotted engine holds a kernel on every arch the engine ships for
// (an authored tree; a shard holds one arch's kernels, and the runtime judges that
// arch). Packs refused for a reference still fill their slot: one typo, one error.
void Loader::checkSlotsFilled() {
  if (!options_.authored) return;
  std::map<std::string, std::vector<const Pack*>> byEngine;  // engine id key -> its packs
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    const Pack& p = set_.packs[i];
    if ((removed_.count({"kdp", i}) != 0 && judgedOnly_.count(i) == 0) || !p.engine) continue;
    byEngine[idKey(*p.engine)].push_back(&p);
  }
  for (std::size_t i = 0; i < set_.engines.size(); ++i) {
    const Engine& e = set_.engines[i];
    if (removed_.count({"ued", i}) != 0 || !e.slotted() || slotRefused_.count(idKey(e.id)) != 0) continue;
    const auto packs = byEngine.find(idKey(e.id));
    if (packs == byEngine.end()) continue;  // no kernel: the engine ships nowhere
    for (const SlotGap& gap : emptySlots(e, packs->second, options_.arches)) {
      set_.diagnostics.push_back(
          makeError(codes::SLOT_EMPTY, e.file, e.slots[gap.slot].jsonPath, emptySlotMessage(e, gap)));
    }
  }
}

}  // namespace detail

}  // namespace ukdpack
