#include "ukdpack/select/state_manager.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
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

// Whether `s` holds an upper-case ASCII letter, 8 bytes at a time (every kept
// kernel's id is asked): a byte of each word in 'A'..'Z' sets its top bit.
bool hasUpper(std::string_view s) {
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t x = 0;
    std::memcpy(&x, s.data() + i, 8);
    const std::uint64_t low = x & (ones * 127);
    if (((ones * (127 + 'Z' + 1) - low) & ~x & (low + ones * (127 - ('A' - 1))) & (ones * 128)) != 0) return true;
  }
  for (; i < s.size(); ++i)
    if (static_cast<unsigned char>(s[i] - 'A') < 26) return true;
  return false;
}

// A kept kernel's place in selection order: priority (higher first), then id
// key, then its place in kept_.
struct Rank {
  std::int64_t priority;
  std::uint64_t prefix;  // the key's first 8 bytes, big-endian: orders as the text does
  std::size_t index;
};

// Sorts `order` by priority (higher first), then key, then index. A stable LSD
// radix sort on (priority, prefix), a pass per byte that is not the same in
// every record (100,000 kernels: about a third of a comparison sort's time);
// the rare runs of equal prefixes are then sorted by their whole keys.
void rankOrder(std::vector<Rank>& order, const std::vector<std::string_view>& keys) {
  const std::size_t n = order.size();
  // Byte b of the 16-byte key: 0-7 the prefix (least significant first), 8-15
  // the priority, flipped so that a higher priority is a smaller key.
  const auto byteOf = [](const Rank& r, int b) -> unsigned {
    if (b < 8) return static_cast<unsigned>((r.prefix >> (8 * b)) & 0xFF);
    const std::uint64_t p = ~(static_cast<std::uint64_t>(r.priority) ^ (std::uint64_t{1} << 63));
    return static_cast<unsigned>((p >> (8 * (b - 8))) & 0xFF);
  };
  std::vector<std::array<std::uint32_t, 256>> counts(16);
  for (auto& c : counts) c.fill(0);
  for (const Rank& r : order)
    for (int b = 0; b < 16; ++b) ++counts[static_cast<std::size_t>(b)][byteOf(r, b)];
  std::vector<Rank> other(n);
  for (int b = 0; b < 16; ++b) {
    std::array<std::uint32_t, 256>& c = counts[static_cast<std::size_t>(b)];
    if (std::find(c.begin(), c.end(), static_cast<std::uint32_t>(n)) != c.end()) continue;  // one value: no pass
    std::uint32_t at = 0;
    for (std::uint32_t& k : c) {
      const std::uint32_t here = k;
      k = at;
      at += here;
    }
    for (const Rank& r : order) other[c[byteOf(r, b)]++] = r;
    order.swap(other);
  }
  // Equal (priority, prefix): the whole keys decide, then kept_'s order (already so).
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && order[j].priority == order[i].priority && order[j].prefix == order[i].prefix) ++j;
    if (j - i > 1) {
      std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(j),
                       [&](const Rank& a, const Rank& b) { return keys[a.index] < keys[b.index]; });
    }
    i = j;
  }
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
  // One pass over the kept kernels (each member read once): its id key, and its
  // ranking record, sorted as small contiguous records: the key's first 8 bytes
  // settle almost every tie of priority without reaching into scattered strings.
  // A kernel's id is nearly always its own key (a lower-case UUID): the key is
  // then a view of the id in the shared set, and only the others are kept here.
  const std::size_t n = kept_.size();
  keys_.reserve(n);
  std::vector<Rank> order(n);
  std::size_t tableSize = 16;
  while (tableSize < 2 * n) tableSize *= 2;
  const std::size_t mask = tableSize - 1;
  std::vector<std::uint32_t> home(n);  // each key's slot in the table below, hashed while the key is at hand
  for (std::size_t i = 0; i < n; ++i) {
    // The member's id and priority: a set read through a shard index builds no kernel for them.
    const PackMember& m = *kept_[i].member;
    const std::string_view id = m.id();
    const bool upper = hasUpper(id);
    if (std::string key = upper ? idKey(id) : std::string(); !upper || key == id) {
      keys_.emplace_back(id);
    } else {
      keys_.emplace_back(ownKeys_.emplace_back(std::move(key)));
    }
    const std::string_view key = keys_.back();
    std::uint64_t prefix = 0;
    for (std::size_t b = 0; b < 8; ++b)
      prefix = (prefix << 8) | (b < key.size() ? static_cast<unsigned char>(key[b]) : 0U);
    order[i] = Rank{m.priority(), prefix, i};
    const std::size_t hash = std::hash<std::string_view>{}(key);
    home[i] = static_cast<std::uint32_t>(hash & mask);
  }
  keySlots_.assign(tableSize, 0);
  // The slots are hashed first and fetched ahead: a table of 100,000 kernels is
  // larger than the cache, and waiting on each slot in turn was most of its build.
  // Ids are unique (the load refuses a second one); were one not, find() meets the
  // first one inserted first, as a map's emplace keeps it.
  constexpr std::size_t kAhead = 16;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&keySlots_[home[i + kAhead]], 1);
    std::size_t slot = home[i];
    while (keySlots_[slot] != 0) slot = (slot + 1) & mask;
    keySlots_[slot] = static_cast<std::uint32_t>(i + 1);
  }
  rankOrder(order, keys_);
  if (catalogOfKept_.empty()) {
    ranked_.resize(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) ranked_[i] = order[i].index;
    return;
  }
  // A slotted engine's kernels run only in its slot programs: each goes to its
  // slot's catalog, which so keeps the same order as select()'s.
  ranked_.reserve(order.size());
  for (const Rank& r : order) {
    if (SlotCatalog* catalog = catalogOfKept_[r.index]) {
      catalog->kept.push_back(&kept_[r.index]);
    } else {
      ranked_.push_back(r.index);
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

std::size_t StateManager::keptIndexOf(std::string_view key) const {
  if (keySlots_.empty()) return kept_.size();
  const std::size_t mask = keySlots_.size() - 1;
  for (std::size_t slot = std::hash<std::string_view>{}(key)&mask; keySlots_[slot] != 0; slot = (slot + 1) & mask) {
    if (keys_[keySlots_[slot] - 1] == key) return keySlots_[slot] - 1;
  }
  return kept_.size();
}

const KernelDefinition* StateManager::find(std::string_view kernelId) const {
  const std::size_t i = keptIndexOf(idKey(kernelId));
  return i == kept_.size() ? nullptr : &kept_[i];
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
