#include "ukdpack/select/state_manager.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "base/worker_threads.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

bool listRunsOn(const std::vector<std::string>& list, const std::string& arch) {
  return list.empty() ||
         std::any_of(list.begin(), list.end(), [&](const std::string& a) { return targetRunsOn(a, arch); });
}

}  // namespace

bool kernelRunsOn(const Pack& pack, const Kernel& kernel, const std::string& arch) {
  return archesRunOn(pack, kernel.arch, arch);
}

bool archesRunOn(const Pack& pack, const std::optional<std::vector<std::string>>& kernelArch, const std::string& arch) {
  if (arch.empty()) return true;
  const std::string bare = bareArch(arch);
  static const std::vector<std::string> none;
  return listRunsOn(pack.arch, bare) && listRunsOn(kernelArch ? *kernelArch : none, bare);
}

std::vector<std::string> kernelArches(const Pack& pack, const Kernel& kernel) {
  if (kernel.arch && !kernel.arch->empty()) return *kernel.arch;
  return pack.arch;
}

StateManager::StateManager(DescriptorSet set, const Registry& registry, std::string arch)
    : StateManager(std::make_shared<const DescriptorSet>(std::move(set)), registry, std::move(arch)) {}

StateManager::StateManager(std::shared_ptr<const DescriptorSet> set, const Registry& registry, std::string arch,
                           std::shared_ptr<ArchiveCache> cache)
    : set_(std::move(set)), arch_(std::move(arch)), cache_(std::move(cache)) {
  if (!cache_) {
    cache_ = std::make_shared<ArchiveCache>(ArchiveCache::kDefaultMaxVerifiedBytes, set_->maxDecompressedBytes);
  }
  build(registry);
  // The set's order and id table over all its members: those its load read from the
  // shard's index, else made here. Filtered to the kept kernels, the order is theirs: a
  // kept kernel's place in kept_ follows its place in the set.
  std::size_t total = 0;
  std::vector<std::size_t> base;  // per pack, the g of its first member
  base.reserve(set_->packs.size());
  for (const Pack& pack : set_->packs) {
    base.push_back(total);
    total += pack.members.size();
  }
  // A set's tables are taken when made for its members (one its load read; any other,
  // a set edited since or built by hand, is made again here).
  const SelectionTables* given = set_->selection.get();
  const bool fits = given != nullptr && given->members == total && given->ranking.size() == total &&
                    given->idSlots.size() == SelectionTables::idSlotsFor(total);
  tables_ = fits ? set_->selection : std::make_shared<const SelectionTables>(selectionTablesOf(*set_));
  keptOf_.assign(total, 0);
  for (std::size_t k = 0; k < kept_.size(); ++k) {
    const Pack* pack = kept_[k].pack;
    const std::size_t g = base[static_cast<std::size_t>(pack - set_->packs.data())] +
                          static_cast<std::size_t>(kept_[k].member - pack->members.data());
    keptOf_[g] = static_cast<std::uint32_t>(k + 1);
  }
  // A slotted engine's kernels run only in its slot programs: each goes to its
  // slot's catalog, which so keeps the same order as select()'s.
  ranked_.reserve(kept_.size());
  for (const std::uint32_t g : tables_->ranking) {
    const std::uint32_t k = g < total ? keptOf_[g] : 0;
    if (k == 0) continue;
    SlotCatalog* catalog = catalogOfKept_.empty() ? nullptr : catalogOfKept_[k - 1];
    if (catalog != nullptr) {
      catalog->kept.push_back(&kept_[k - 1]);
    } else {
      ranked_.push_back(k - 1);
    }
  }
  catalogOfKept_ = {};  // only the constructor uses it
}

void StateManager::drop(const Pack& pack, const PackMember& m, const std::string& symbol, const std::string& code,
                        const std::string& reason) {
  const std::string line =
      "dropping " + kernelLabel(m.kernel()) + " of pack '" + pack.name + "' (" + pack.file + "): " + reason;
  dropped_.push_back(DroppedKernel{m.kernel().id, m.kernel().name, pack.id, pack.name, m.kernel().file,
                                   m.kernel().jsonPath, symbol, code, reason});
  log_.push_back(line);
  // A pack without a dispatch is served by nothing native, by its author's
  // choice (a handler may decline a launch set): a warning. Every other drop is an error.
  diagnostics_.push_back(code == codes::NO_DISPATCH ? makeWarning(code, m.kernel().file, m.kernel().jsonPath, line)
                                                    : makeError(code, m.kernel().file, m.kernel().jsonPath, line));
}

void StateManager::build(const Registry& registry) {
  std::set<std::string> warned;
  auto warnOnce = [&](const std::string& code, const std::string& symbol, const std::string& file,
                      const std::string& path, const std::string& message) {
    if (!warned.insert(code + "\n" + symbol).second) return;
    diagnostics_.push_back(makeWarning(code, file, path, message));
  };
  std::size_t total = 0;
  for (const Pack& pack : set_->packs) total += pack.members.size();
  kept_.reserve(total);
  // The arch's bare name and each pack's arches judged once, not per kernel.
  const std::string bare = arch_.empty() ? std::string() : bareArch(arch_);
  static const std::vector<std::string> none;
  for (const Pack& pack : set_->packs) {
    std::vector<const PackMember*> members;
    const bool packRuns = arch_.empty() || listRunsOn(pack.arch, bare);
    // Kernels read through a shard index share their arch lists: each judged once.
    const std::optional<std::vector<std::string>>* lastArch = nullptr;
    bool lastRuns = false;
    for (const PackMember& m : pack.members) {
      const std::optional<std::vector<std::string>>& arch = m.arch();
      if (&arch != lastArch) {
        lastArch = &arch;
        lastRuns = arch_.empty() || listRunsOn(arch ? *arch : none, bare);
      }
      if (packRuns && lastRuns) {
        members.push_back(&m);
      } else {
        filtered_.push_back(DroppedKernel{m.kernel().id, m.kernel().name, pack.id, pack.name, m.kernel().file,
                                          m.kernel().jsonPath, "", codes::ARCH_FILTERED,
                                          "it does not run on " + bareArch(arch_)});
      }
    }
    if (members.empty()) continue;
    const Dispatch* dispatch = set_->dispatchOf(pack);
    if (dispatch == nullptr) {
      for (const PackMember* m : members) {
        drop(pack, *m, "", codes::NO_DISPATCH,
             "its pack names no dispatch (\"dispatch\": null), so no handler can launch it");
      }
      continue;
    }
    const std::string& symbol = dispatch->dispatchSymbol;
    std::shared_ptr<const DispatchHandler> handler = registry.dispatch(symbol);
    if (!handler) {
      for (const PackMember* m : members) {
        drop(pack, *m, symbol, codes::DISPATCH_UNKNOWN,
             "no dispatch handler is registered for dispatch symbol '" + symbol + "' (" + dispatch->file + ")");
      }
      continue;
    }
    const std::vector<std::string> declaredList = handler->launchNames();
    const std::set<std::string> declared(declaredList.begin(), declaredList.end());
    bool anyKept = false;
    const Engine* engine = set_->engineOf(pack);  // once per pack, not per kernel
    const std::vector<BoundMatcher>* packMatchers = nullptr;
    for (const PackMember* m : members) {
      // Compared in place, the kernel's set built only to word a mismatch.
      if (!m->launchesAre(declared)) {
        const std::set<std::string> has = launchNamesOf(m->kernel());
        drop(pack, *m, symbol, codes::LAUNCH_SET_MISMATCH,
             "dispatch symbol '" + symbol + "' declares launches " + describeLaunchSet(declared) + ", the kernel has " +
                 describeLaunchSet(has));
        continue;
      }
      if (packMatchers == nullptr) {  // the pack's matchers, looked up once for all its kernels
        std::vector<BoundMatcher>& bound = packMatchers_.emplace_back();
        for (const std::string& id : pack.matchers) {
          if (const MatcherDescriptor* umd = set_->findMatcher(id)) {
            bound.push_back(BoundMatcher{umd->id, umd->matchSymbol, registry.matcher(umd->matchSymbol)});
          }
        }
        packMatchers = &bound;
        handlers_.push_back(handler);
      }
      kept_.push_back(KernelDefinition{m, &pack, dispatch, engine, handler.get(), packMatchers});
      anyKept = true;
    }
    if (!anyKept) continue;
    // Matchers and heuristics are looked up, not required: a missing one is a warning.
    for (const std::string& id : pack.matchers) {
      const MatcherDescriptor* umd = set_->findMatcher(id);
      if (umd != nullptr && !registry.matcher(umd->matchSymbol)) {
        warnOnce(codes::MATCHER_UNKNOWN, umd->matchSymbol, umd->file, "$.match_symbol",
                 "no matcher is registered for match symbol '" + umd->matchSymbol + "' (UMD '" + umd->name +
                     "'); pack '" + pack.name + "' is served without it");
      }
    }
    if (const Engine* engine = set_->engineOf(pack)) {
      if (engine->graphMatchSymbol && !registry.matcher(*engine->graphMatchSymbol)) {
        warnOnce(codes::MATCHER_UNKNOWN, *engine->graphMatchSymbol, engine->file, "$.graph_match.native",
                 "no matcher is registered for graph match symbol '" + *engine->graphMatchSymbol + "' of engine '" +
                     engine->name + "'");
      }
      warnUnregistered(engine->heuristics, registry, "engine '" + engine->name + "'", warnOnce);
    }
  }
  buildSlots(registry, warnOnce);
}

void StateManager::warnUnregistered(const std::map<std::string, HeuristicRoleMap>& heuristics, const Registry& registry,
                                    const std::string& whose, const WarnOnce& warnOnce) const {
  for (const auto& [role, table] : heuristics) {
    for (const auto& [arch, ids] : table) {
      for (const std::string& id : ids) {
        const HeuristicDescriptor* uhd = set_->findHeuristic(id);
        if (uhd == nullptr || !uhd->symbol || registry.heuristic(*uhd->symbol)) continue;
        warnOnce(codes::HEURISTIC_UNKNOWN, *uhd->symbol, uhd->file, "$." + uhd->adapter + ".symbol",
                 "no heuristic is registered for symbol '" + *uhd->symbol + "' (UHD '" + uhd->name + "', " + role +
                     " of " + whose + ")");
      }
    }
  }
}

const KernelDefinition* StateManager::find(std::string_view kernelId) const {
  const std::string key = idKey(kernelId);
  const std::vector<std::uint32_t>& slots = tables_->idSlots;
  const std::size_t mask = slots.size() - 1;
  // A member not kept is passed over: the kept one of its key may lie further on.
  std::size_t slot = tables_->home(key);
  for (std::size_t probes = 0; probes < slots.size() && slots[slot] != 0; ++probes, slot = (slot + 1) & mask) {
    const std::uint32_t g = slots[slot] - 1;
    const std::uint32_t k = g < keptOf_.size() ? keptOf_[g] : 0;
    if (k != 0 && sameIdKey(kept_[k - 1].member->id(), key)) return &kept_[k - 1];
  }
  return nullptr;
}

const std::vector<BoundMatcher>& KernelDefinition::matchers() const {
  static const std::vector<BoundMatcher> none;
  return packMatchers != nullptr ? *packMatchers : none;
}

Result<bool> matchersAccept(const KernelDefinition& d, const Json& problem) {
  for (const BoundMatcher& m : d.matchers()) {
    if (!m.handler) continue;
    auto verdict = m.handler->matches(*d.kernel(), problem);
    if (!verdict) {
      Diagnostic e = verdict.error();
      if (e.code.empty()) e.code = codes::MATCHER_FAILED;
      e.message = "matcher '" + m.symbol + "' failed for " + kernelLabel(*d.kernel()) + " of pack '" + d.pack->name +
                  "': " + e.message;
      return Result<bool>::failure(std::move(e));
    }
    if (!verdict.value()) return Result<bool>::success(false);
  }
  return Result<bool>::success(true);
}

Result<const KernelDefinition*> StateManager::select(const Json& problem) const {
  using R = Result<const KernelDefinition*>;
  for (const std::size_t index : ranked_) {
    const KernelDefinition* d = &kept_[index];
    auto accepted = matchersAccept(*d, problem);
    if (!accepted) return R::failure(accepted.error());
    if (accepted.value()) return R::success(d);
  }
  return R::success(nullptr);
}

Result<std::vector<std::uint8_t>> StateManager::loadLaunchCode(std::string_view kernelId,
                                                               const std::optional<std::string>& launch,
                                                               const std::string& arch) const {
  return loadLaunchCode(kernelId, launch, arch, true);
}

Result<std::vector<std::uint8_t>> StateManager::loadLaunchCode(std::string_view kernelId,
                                                               const std::optional<std::string>& launch,
                                                               const std::string& arch, bool keepBytes,
                                                               LocatedLibraries* located) const {
  const KernelDefinition* def = find(kernelId);
  if (def == nullptr) {
    std::string why = "no kept kernel has id '" + std::string(kernelId) + "'";
    const std::string key = idKey(kernelId);
    for (const DroppedKernel& d : dropped_) {
      if (idKey(d.kernelId) == key) why = kernelLabel(d.kernelName, d.kernelId) + " was dropped: " + d.reason;
    }
    for (const DroppedKernel& d : filtered_) {
      if (idKey(d.kernelId) == key) why = kernelLabel(d.kernelName, d.kernelId) + " is not kept: " + d.reason;
    }
    return Result<std::vector<std::uint8_t>>::failure(makeError(codes::KERNEL_UNKNOWN, "", "", why));
  }
  LaunchCodeOptions options;
  options.handler = def->handler;
  options.dispatchSymbol = def->dispatchSymbol();
  options.cache = cache_.get();
  options.keepBytes = keepBytes;
  options.located = located;
  return ukdpack::loadLaunchCode(*def->kernel(), set_->rootOf(*def->member), launch, arch.empty() ? arch_ : arch,
                                 options);
}

std::vector<std::optional<Diagnostic>> StateManager::checkLaunchCodes(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& launches, const std::string& arch,
    unsigned threads) const {
  // Group by the archive entry a launch's source names (library as written from
  // its folder, toc key); a launch whose source is not found is a group of its
  // own (loadLaunchCode words its failure).
  std::vector<std::vector<std::size_t>> groups;
  std::unordered_map<std::string, std::size_t> groupOf;
  // Each launch is loaded as each device it may run on would (every feature variant).
  std::vector<std::vector<std::string>> devices(launches.size(), std::vector<std::string>{arch});
  for (std::size_t i = 0; i < launches.size(); ++i) {
    std::string key;
    if (const KernelDefinition* def = find(launches[i].first)) {
      const Kernel& k = *def->kernel();
      const KernelSource* src = singleLaunchSource(k);
      if (src == nullptr && launches[i].second) {
        const auto it = k.sources.find(*launches[i].second);
        if (it != k.sources.end()) src = &it->second;
      }
      if (src != nullptr && isPackedSource(*src)) {
        key = (k.baseDir / src->library).lexically_normal().string() + '\n' + src->tocKey;
        devices[i] = checkDevices(*src, arch.empty() ? arch_ : arch);
      }
    }
    if (key.empty()) key = "\n" + std::to_string(i);  // no path starts with a newline
    const auto [it, added] = groupOf.emplace(key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<std::optional<Diagnostic>> out(launches.size());
  std::atomic<std::size_t> next{0};
  // A handler's exception (one given from Python may raise) ends the work and
  // reaches the caller from its own thread, as it would from a loop.
  std::exception_ptr thrown;
  std::mutex thrownMutex;
  auto work = [&] {
    // The archives' locations and files are looked at once per thread, not per launch.
    LocatedLibraries located;
    try {
      for (std::size_t g = next++; g < groups.size(); g = next++) {
        for (const std::size_t i : groups[g]) {
          for (const std::string& device : devices[i]) {
            auto code = loadLaunchCode(launches[i].first, launches[i].second, device, false, &located);
            if (!code) {
              out[i] = code.error();
              break;
            }
          }
        }
      }
    } catch (...) {
      next = groups.size();
      const std::lock_guard<std::mutex> lock(thrownMutex);
      if (!thrown) thrown = std::current_exception();
    }
  };
  detail::runOnThreads(threads, groups.size(), work);
  if (thrown) std::rethrow_exception(thrown);
  return out;
}

// --------------------------------------------------------------------------- stubs

std::map<std::string, std::vector<std::string>> stubLaunchSets(const DescriptorSet& set, const std::string& arch) {
  std::map<std::string, std::vector<std::string>> out;
  for (const Dispatch& d : set.dispatches) {
    if (d.launches) out.emplace(d.dispatchSymbol, *d.launches);
  }
  for (const Pack& p : set.packs) {
    const Dispatch* d = set.dispatchOf(p);
    if (d == nullptr || out.count(d->dispatchSymbol) != 0) continue;  // the first one stays
    const auto first = std::find_if(p.members.begin(), p.members.end(),
                                    [&](const PackMember& m) { return archesRunOn(p, m.arch(), arch); });
    if (first == p.members.end()) continue;
    // Read from the member: a set loaded through a shard index builds no kernel for it.
    out.emplace(d->dispatchSymbol, first->launchNames());
  }
  for (const Dispatch& d : set.dispatches) out.emplace(d.dispatchSymbol, std::vector<std::string>{});
  return out;
}

Registry stubRegistry(const DescriptorSet& set, const std::string& arch) {
  Registry registry;
  for (const auto& [symbol, launches] : stubLaunchSets(set, arch)) {
    registry.addDispatch(symbol, std::make_shared<DeclaredDispatchHandler>(launches));
  }
  const auto matcher = std::make_shared<MatchHandler>();
  for (const MatcherDescriptor& m : set.matchers) registry.addMatcher(m.matchSymbol, matcher);
  for (const Engine& e : set.engines) {
    if (e.graphMatchSymbol) registry.addMatcher(*e.graphMatchSymbol, matcher);
  }
  const auto heuristic = std::make_shared<HeuristicHandler>();
  for (const HeuristicDescriptor& h : set.heuristics) {
    if (h.symbol) registry.addHeuristic(*h.symbol, heuristic);
  }
  return registry;
}

}  // namespace ukdpack
