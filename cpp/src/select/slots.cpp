#include "ukdpack/select/slots.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

constexpr std::size_t kNoSlot = std::numeric_limits<std::size_t>::max();

std::string quotedList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

std::vector<std::string> slotNames(const Engine& e) {
  std::vector<std::string> out;
  for (const EngineSlot& s : e.slots) out.push_back(s.name);
  return out;
}

// The UHD a slot's role names for `arch` (its bare arch key, else "default";
// the first listed), when it loaded.
const HeuristicDescriptor* slotHeuristic(const DescriptorSet& set, const EngineSlot& slot, const std::string& role,
                                         const std::string& arch) {
  const auto table = slot.heuristics.find(role);
  if (table == slot.heuristics.end()) return nullptr;
  auto ids = arch.empty() ? table->second.end() : table->second.find(bareArch(arch));
  if (ids == table->second.end()) ids = table->second.find("default");
  if (ids == table->second.end() || ids->second.empty()) return nullptr;
  return set.findHeuristic(ids->second.front());
}

std::string engineLabel(const Engine& e) { return "engine '" + e.name + "'"; }

}  // namespace

// --------------------------------------------------------------------------- catalogs

void StateManager::buildSlots(const Registry& registry, const WarnOnce& warnOnce) {
  const bool anySlots =
      std::any_of(set_->engines.begin(), set_->engines.end(), [](const Engine& e) { return e.slotted(); }) ||
      std::any_of(set_->packs.begin(), set_->packs.end(), [](const Pack& p) { return p.slot; });
  if (!anySlots) return;  // an unslotted set: nothing here changes what the manager keeps
  const std::string archText = arch_.empty() ? std::string("any arch") : bareArch(arch_);

  // The slotted engines that ship for the arch: some kernel of theirs runs on it,
  // kept or dropped. Engines are found by their place in the set (no lookups by id).
  const auto placeOf = [&](const Engine* e) { return static_cast<std::size_t>(e - set_->engines.data()); };
  std::vector<std::size_t> engineIndex(set_->engines.size(), kNoSlot);  // place -> index into slotted_
  const Engine* lastShipping = nullptr;
  for (const KernelDefinition& d : kept_) {
    if (d.engine == lastShipping || d.engine == nullptr || !d.engine->slotted()) continue;
    lastShipping = d.engine;
    engineIndex[placeOf(d.engine)] = 0;
  }
  // The (rare) dropped kernels' packs, by id key, for their engines and slots.
  std::unordered_map<std::string, const Pack*> packById;
  for (const DroppedKernel& d : dropped_) {
    std::string key = idKey(d.packId);
    if (packById.count(key) != 0) continue;
    const Pack* p = set_->findPack(d.packId);
    packById.emplace(std::move(key), p);
    const Engine* e = p != nullptr ? set_->engineOf(*p) : nullptr;
    if (e != nullptr && e->slotted()) engineIndex[placeOf(e)] = 0;
  }
  slotted_.reserve(static_cast<std::size_t>(
      std::count_if(engineIndex.begin(), engineIndex.end(), [](std::size_t i) { return i != kNoSlot; })));
  for (const Engine& e : set_->engines) {
    std::size_t& index = engineIndex[placeOf(&e)];
    if (index == kNoSlot) continue;
    index = slotted_.size();
    SlottedEngine se;
    se.engine = &e;
    se.slots.reserve(e.slots.size());
    for (std::size_t i = 0; i < e.slots.size(); ++i) {
      const EngineSlot& s = e.slots[i];
      SlotCatalog c;
      c.name = s.name;
      c.index = i;
      c.rankHeuristic = slotHeuristic(*set_, s, "sort_kernel_catalog", arch_);
      if (c.rankHeuristic != nullptr) {
        c.ranker = c.rankHeuristic->adapter;
        if (c.rankHeuristic->symbol) c.rankHandler = registry.heuristic(*c.rankHeuristic->symbol);
      }
      c.applicabilityHeuristic = slotHeuristic(*set_, s, "predict_applicable_kernels", arch_);
      if (c.applicabilityHeuristic != nullptr && c.applicabilityHeuristic->symbol) {
        c.applicabilityHandler = registry.heuristic(*c.applicabilityHeuristic->symbol);
      }
      // Heuristics are looked up, not required: a missing one is a warning, as an engine's.
      if (!s.heuristics.empty()) {
        warnUnregistered(s.heuristics, registry, "slot '" + s.name + "' of engine '" + e.name + "'", warnOnce);
      }
      se.slots.push_back(std::move(c));
    }
    slotted_.push_back(std::move(se));
  }

  // Each kept kernel's slot catalog, judged once per pack (kept_ holds a pack's
  // kernels together); a kernel whose pack's slot does not fit its engine is dropped.
  std::vector<SlotCatalog*> catalog(kept_.size(), nullptr);
  std::vector<std::size_t> engineOfKept(kept_.size(), kNoSlot);
  std::vector<std::vector<std::size_t>> counts(slotted_.size());
  for (std::size_t e = 0; e < slotted_.size(); ++e) counts[e].assign(slotted_[e].slots.size(), 0);
  std::vector<bool> gone(kept_.size(), false);
  const Pack* lastPack = nullptr;
  SlotCatalog* lastCatalog = nullptr;
  std::size_t lastEngine = kNoSlot;
  std::string dropCode, dropReason;
  for (std::size_t i = 0; i < kept_.size(); ++i) {
    const KernelDefinition& d = kept_[i];
    if (d.pack != lastPack) {
      lastPack = d.pack;
      const Pack& p = *d.pack;
      const Engine* e = d.engine;
      lastCatalog = nullptr;
      lastEngine = kNoSlot;
      dropCode.clear();
      if (e == nullptr || !e->slotted()) {
        if (p.slot) {
          dropCode = codes::SLOT_UNEXPECTED;
          dropReason = "its pack names slot '" + *p.slot + "', but " +
                       (e == nullptr ? std::string("names no engine") : engineLabel(*e) + " has no slots");
        }
      } else if (const std::optional<std::size_t> slot = p.slot ? e->slotIndex(*p.slot) : std::nullopt) {
        lastEngine = engineIndex[placeOf(e)];  // set: a kept kernel of it runs on the arch
        lastCatalog = &slotted_[lastEngine].slots[*slot];
      } else {
        dropCode = p.slot ? codes::SLOT_UNKNOWN : codes::SLOT_MISSING;
        dropReason = (p.slot ? "its pack names slot '" + *p.slot + "', which " + engineLabel(*e) + " does not have"
                             : "its pack names no slot, but " + engineLabel(*e) + " runs slots") +
                     " (its slots: " + quotedList(slotNames(*e)) + ")";
      }
    }
    if (!dropCode.empty()) {
      drop(*d.pack, *d.member, d.dispatchSymbol(), dropCode, dropReason);
      gone[i] = true;
    } else if (lastCatalog != nullptr) {
      catalog[i] = lastCatalog;
      engineOfKept[i] = lastEngine;
      ++counts[lastEngine][lastCatalog->index];
    }
  }

  // What was dropped joins its slot's catalog (in drop order: load order, then the slot rules).
  auto catalogOf = [&](const std::string& packId) -> SlotCatalog* {
    std::string key = idKey(packId);
    auto p = packById.find(key);
    if (p == packById.end()) p = packById.emplace(std::move(key), set_->findPack(packId)).first;
    if (p->second == nullptr || !p->second->slot) return nullptr;
    const Engine* e = set_->engineOf(*p->second);
    const auto slot = e != nullptr ? e->slotIndex(*p->second->slot) : std::nullopt;
    if (!slot || engineIndex[placeOf(e)] == kNoSlot) return nullptr;
    return &slotted_[engineIndex[placeOf(e)]].slots[*slot];
  };

  // A slot without a kept kernel drops its engine for the arch: every slot must run.
  std::vector<bool> engineGone(slotted_.size(), false);
  for (std::size_t e = 0; e < slotted_.size(); ++e) {
    SlottedEngine& se = slotted_[e];
    std::vector<std::string> empty;
    std::string detail;
    for (std::size_t s = 0; s < se.slots.size(); ++s) {
      if (counts[e][s] != 0) continue;
      empty.push_back(se.slots[s].name);
      if (!detail.empty()) continue;
      std::size_t droppedHere = 0;
      for (const DroppedKernel& d : dropped_)
        if (catalogOf(d.packId) == &se.slots[s]) ++droppedHere;
      detail = droppedHere != 0 ? "its " + std::to_string(droppedHere) + " kernel" + (droppedHere == 1 ? "" : "s") +
                                      " there " + (droppedHere == 1 ? "was" : "were") + " dropped"
                                : "none of its kernels runs on " + archText;
    }
    if (empty.empty()) {
      for (std::size_t c = 0; c < se.slots.size(); ++c) se.slots[c].kept.reserve(counts[e][c]);
      continue;
    }
    engineGone[e] = true;
    const std::string slots = (empty.size() == 1 ? "slot " : "slots ") + quotedList(empty);
    se.droppedReason = engineLabel(*se.engine) + " is dropped for " + archText + ": its " + slots +
                       (empty.size() == 1 ? " holds" : " hold") + " no kept kernel for " + archText + " (" + detail +
                       "), and every slot must run";
  }
  for (std::size_t i = 0; i < kept_.size(); ++i) {
    if (catalog[i] == nullptr || !engineGone[engineOfKept[i]]) continue;
    drop(*kept_[i].pack, *kept_[i].member, kept_[i].dispatchSymbol(), codes::SLOT_EMPTY,
         *slotted_[engineOfKept[i]].droppedReason);
    gone[i] = true;
    catalog[i] = nullptr;
  }
  for (const DroppedKernel& d : dropped_) {
    if (SlotCatalog* c = catalogOf(d.packId)) c->dropped.push_back(d);
  }

  // kept_ is final from here on: the constructor fills each catalog, in its
  // ranking order, through catalogOfKept_.
  if (std::find(gone.begin(), gone.end(), true) != gone.end()) {
    std::vector<KernelDefinition> survivors;
    std::vector<SlotCatalog*> survivorCatalog;
    survivors.reserve(kept_.size());
    for (std::size_t i = 0; i < kept_.size(); ++i) {
      if (gone[i]) continue;
      survivors.push_back(std::move(kept_[i]));
      survivorCatalog.push_back(catalog[i]);
    }
    kept_ = std::move(survivors);
    catalog = std::move(survivorCatalog);
  }
  catalogOfKept_ = std::move(catalog);
}

const SlottedEngine* StateManager::slotted(std::string_view engineId) const {
  const std::string key = idKey(engineId);
  for (const SlottedEngine& se : slotted_)
    if (idKey(se.engine->id) == key) return &se;
  return nullptr;
}

// --------------------------------------------------------------------------- programs

Result<std::vector<const KernelDefinition*>> rankSlot(const SlotCatalog& slot, const Json& problem) {
  using R = Result<std::vector<const KernelDefinition*>>;
  if (!slot.rankHandler || slot.kept.size() < 2) return R::success(slot.kept);
  std::vector<const Kernel*> kernels;
  kernels.reserve(slot.kept.size());
  for (const KernelDefinition* d : slot.kept) kernels.push_back(d->kernel());
  const HeuristicDescriptor& uhd = *slot.rankHeuristic;
  const std::string who = "sort_kernel_catalog heuristic '" + uhd.name + "' (symbol '" + uhd.symbol.value_or("") +
                          "') of slot '" + slot.name + "'";
  auto order = slot.rankHandler->rank(kernels, problem);
  if (!order) {
    Diagnostic e = order.error();
    if (e.code.empty()) e.code = codes::HEURISTIC_FAILED;
    e.message = who + " failed: " + e.message;
    return R::failure(std::move(e));
  }
  std::vector<bool> taken(kernels.size(), false);
  std::vector<const KernelDefinition*> out;
  out.reserve(kernels.size());
  for (const std::size_t i : order.value()) {
    if (i >= kernels.size() || taken[i]) {
      return R::failure(makeError(
          codes::HEURISTIC_FAILED, uhd.file, "",
          who + " answered badly: index " + std::to_string(i) +
              (i >= kernels.size() ? " is out of range (it was given " + std::to_string(kernels.size()) + " kernels)"
                                   : " is named twice")));
    }
    taken[i] = true;
    out.push_back(slot.kept[i]);
  }
  for (std::size_t i = 0; i < kernels.size(); ++i)
    if (!taken[i]) out.push_back(slot.kept[i]);  // left out: after the ranked ones, in catalog order
  return R::success(std::move(out));
}

namespace {

// Whether a kept kernel of `slot` applies to `problem`: "" when it does, else why not.
Result<std::string> whyNotApplicable(const SlotCatalog& slot, const KernelDefinition& d, const Json& problem) {
  using R = Result<std::string>;
  auto accepted = matchersAccept(d, problem);
  if (!accepted) return R::failure(accepted.error());
  if (!accepted.value()) return R::success("a matcher of its pack '" + d.pack->name + "' does not accept the problem");
  if (!slot.applicabilityHandler) return R::success(std::string());
  const HeuristicDescriptor& uhd = *slot.applicabilityHeuristic;
  auto applies = slot.applicabilityHandler->applicable(*d.kernel(), problem);
  if (!applies) {
    Diagnostic e = applies.error();
    if (e.code.empty()) e.code = codes::HEURISTIC_FAILED;
    e.message = "predict_applicable_kernels heuristic '" + uhd.name + "' of slot '" + slot.name + "' failed for " +
                kernelLabel(*d.kernel()) + ": " + e.message;
    return R::failure(std::move(e));
  }
  if (!applies.value()) return R::success("predict_applicable_kernels heuristic '" + uhd.name + "' rules it out");
  return R::success(std::string());
}

Diagnostic pickError(const Engine& e, const std::string& message) {
  return makeError(codes::SLOT_PICK, e.file, "", message);
}

// Why `kernelId` cannot be chosen for `slot`: it fills another slot, was dropped, or is no kernel of the engine.
std::string notInSlot(const SlottedEngine& se, const SlotCatalog& slot, const std::string& kernelId) {
  const std::string key = idKey(kernelId);
  const std::string asked =
      "kernel '" + kernelId + "' cannot run in slot '" + slot.name + "' of " + engineLabel(*se.engine) + ": ";
  for (const SlotCatalog& c : se.slots) {
    for (const KernelDefinition* d : c.kept) {
      if (idKey(d->kernel()->id) == key) {
        return asked + kernelLabel(*d->kernel()) + " is a kernel of slot '" + c.name + "', not of slot '" + slot.name +
               "'";
      }
    }
    for (const DroppedKernel& d : c.dropped) {
      if (idKey(d.kernelId) != key) continue;
      return asked + kernelLabel(d.kernelName, d.kernelId) +
             (&c == &slot ? std::string() : " (a kernel of slot '" + c.name + "')") + " is not kept: " + d.reason;
    }
  }
  return asked + "no kernel of the engine on this arch has that id";
}

}  // namespace

Result<SlotProgram> makeSlotProgram(const StateManager& manager, std::string_view engineId, const Json& problem,
                                    const std::map<std::string, std::string>& choices) {
  using R = Result<SlotProgram>;
  const DescriptorSet& set = manager.descriptors();
  const Engine* engine = set.findEngine(engineId);
  if (engine == nullptr) {
    for (const Engine& e : set.engines)
      if (e.name == engineId) engine = &e;
  }
  if (engine == nullptr) {
    return R::failure(
        makeError(codes::ENGINE_UNKNOWN, "", "", "no loaded engine has id (or name) '" + std::string(engineId) + "'"));
  }
  if (!engine->slotted()) {
    return R::failure(
        makeError(codes::ENGINE_NOT_SLOTTED, engine->file, "",
                  engineLabel(*engine) + " has no slots: select() picks its kernels, not a slot program"));
  }
  const SlottedEngine* se = manager.slotted(engine->id);
  if (se == nullptr) {
    const std::string arch = manager.arch().empty() ? std::string("any arch") : bareArch(manager.arch());
    return R::failure(
        makeError(codes::ENGINE_UNKNOWN, engine->file, "", engineLabel(*engine) + " ships no kernel for " + arch));
  }
  if (se->droppedReason) return R::failure(makeError(codes::SLOT_EMPTY, engine->file, "", *se->droppedReason));
  for (const auto& [slot, kernel] : choices) {
    if (engine->slot(slot) != nullptr) continue;
    return R::failure(makeError(codes::SLOT_UNKNOWN, engine->file, "",
                                "a pick names slot '" + slot + "' (kernel '" + kernel + "'), which " +
                                    engineLabel(*engine) +
                                    " does not have (its slots: " + quotedList(slotNames(*engine)) + ")"));
  }
  SlotProgram program;
  program.engine = engine;
  for (const SlotCatalog& slot : se->slots) {
    SlotPick pick;
    pick.slot = slot.name;
    pick.index = slot.index;
    const auto chosen = choices.find(slot.name);
    if (chosen != choices.end()) {
      // Found by the manager's id table, then placed: a scan that built each kernel's
      // id would build every deferred kernel of the slot ahead of it.
      const KernelDefinition* found = manager.find(chosen->second);
      const auto it = found == nullptr ? slot.kept.end() : std::find(slot.kept.begin(), slot.kept.end(), found);
      if (it == slot.kept.end()) return R::failure(pickError(*engine, notInSlot(*se, slot, chosen->second)));
      auto why = whyNotApplicable(slot, **it, problem);
      if (!why) return R::failure(why.error());
      if (!why.value().empty()) {
        return R::failure(pickError(*engine, "kernel '" + chosen->second + "' cannot run in slot '" + slot.name +
                                                 "' of " + engineLabel(*engine) + ": " + kernelLabel(*(*it)->kernel()) +
                                                 " does not apply to the problem: " + why.value()));
      }
      pick.definition = *it;
      pick.chosen = true;
    } else {
      auto ranked = rankSlot(slot, problem);
      if (!ranked) return R::failure(ranked.error());
      for (const KernelDefinition* d : ranked.value()) {
        auto why = whyNotApplicable(slot, *d, problem);
        if (!why) return R::failure(why.error());
        if (why.value().empty()) {
          pick.definition = d;
          break;
        }
      }
      if (pick.definition == nullptr) {
        return R::failure(pickError(*engine, "slot '" + slot.name + "' of " + engineLabel(*engine) +
                                                 " has no kept kernel that applies to the problem (" +
                                                 std::to_string(slot.kept.size()) + " kept)"));
      }
    }
    program.picks.push_back(std::move(pick));
  }
  return R::success(std::move(program));
}

}  // namespace ukdpack
