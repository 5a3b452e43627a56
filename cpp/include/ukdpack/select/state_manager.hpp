// The state manager: decides which loaded kernels a set of native
// dispatch handlers can serve on a device, and says why it drops the others.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/registry.hpp"

namespace ukdpack {

// A matcher a kept kernel's pack names (a UMD's match_symbol), as registered.
struct BoundMatcher {
  std::string matcherId;                        // the UMD's id
  std::string symbol;                           // its match_symbol
  std::shared_ptr<const MatchHandler> handler;  // nullptr: none registered, the pack is served without it
};

// A kernel the state manager keeps. The pointers point into the state
// manager's own copy of the descriptor set and its per-pack records: valid
// while the manager lives. Small and flat (no allocation per kernel): what a
// kernel shares with its pack (handler, matchers) is held once per pack.
struct KernelDefinition {
  const PackMember* member = nullptr;
  // The kernel (a set loaded through a shard index builds it here, on first use).
  const Kernel* kernel() const { return member != nullptr ? &member->kernel() : nullptr; }
  const Pack* pack = nullptr;
  const Dispatch* dispatch = nullptr;
  const Engine* engine = nullptr;  // nullptr when the pack names none
  // The registered handler of the pack's dispatch symbol (the manager keeps it alive).
  const DispatchHandler* handler = nullptr;
  // The pack's matchers as bound, in its order (shared by its kept kernels).
  const std::vector<BoundMatcher>* packMatchers = nullptr;

  // The pack's dispatch symbol, which `handler` is registered under.
  const std::string& dispatchSymbol() const { return dispatch->dispatchSymbol; }
  // The pack's matchers, in its order (empty when it names none).
  const std::vector<BoundMatcher>& matchers() const;
};

// A kernel left out, with a stable code and the reason.
struct DroppedKernel {
  std::string kernelId;
  std::string kernelName;
  std::string packId;
  std::string packName;
  std::string file;      // the kernel's file
  std::string jsonPath;  // the kernel's JSON path
  std::string dispatchSymbol;
  // DISPATCH_UNKNOWN, NO_DISPATCH (a warning: the pack names no dispatch),
  // LAUNCH_SET_MISMATCH; ARCH_FILTERED in filtered() only.
  std::string code;
  std::string reason;  // the sentence after "dropping kernel ... :"
};

// One slot of a slotted engine as the manager keeps it for its arch: the
// slot's catalog (the kernels of every KDP naming the slot that run on the
// arch), kept and dropped, and the slot's own ranker.
struct SlotCatalog {
  std::string name;
  std::size_t index = 0;  // position in the engine's run order
  // Kept kernels in catalog order: priority (higher first), then id. A native
  // ranker reorders them per problem when a slot program picks.
  std::vector<const KernelDefinition*> kept;
  std::vector<DroppedKernel> dropped;  // the slot's kernels left out, with codes and reasons
  // The slot's sort_kernel_catalog for the manager's arch (its arch key, else
  // "default"; the first UHD listed): the UHD's adapter ("static_order",
  // "native", "custom_library", "tree_data", "table"), or "priority" when the
  // slot names none. tree_data and table models are not evaluated by the
  // runtime: their slots keep catalog order, as static_order does.
  std::string ranker = "priority";
  const HeuristicDescriptor* rankHeuristic = nullptr;  // that UHD, when it loaded
  // Its registered handler (native, custom_library); nullptr: catalog order.
  std::shared_ptr<const HeuristicHandler> rankHandler;
  // The slot's predict_applicable_kernels for the arch, and its handler
  // (nullptr: every kept kernel of the slot applies, as far as it goes).
  const HeuristicDescriptor* applicabilityHeuristic = nullptr;
  std::shared_ptr<const HeuristicHandler> applicabilityHandler;
};

// A slotted engine that ships for the manager's arch (some kernel of it runs
// there), with one catalog per slot in run order.
struct SlottedEngine {
  const Engine* engine = nullptr;  // points into the manager's set
  std::vector<SlotCatalog> slots;
  // Set when a slot holds no kept kernel on the arch: every kernel of the
  // engine is then dropped (SLOT_EMPTY) and no slot program can be made.
  std::optional<std::string> droppedReason;
};

class StateManager {
 public:
  // `arch` is the device arch; "" keeps every arch.
  StateManager(DescriptorSet set, const Registry& registry, std::string arch = "");
  // The same over a set shared with others (no copy: the set is immutable).
  // `cache` holds the archives and the budget of decompressed bytes its
  // launch code loads draw on; shared, several managers spend one budget
  // (ukdpack-validate's per-arch passes). nullptr: the manager's own, with the
  // set's maxDecompressedBytes.
  StateManager(std::shared_ptr<const DescriptorSet> set, const Registry& registry, std::string arch = "",
               std::shared_ptr<ArchiveCache> cache = nullptr);

  const DescriptorSet& descriptors() const { return *set_; }
  const std::string& arch() const { return arch_; }

  StateManager(const StateManager&) = delete;
  StateManager& operator=(const StateManager&) = delete;
  StateManager(StateManager&&) = default;
  StateManager& operator=(StateManager&&) = default;

  const std::vector<KernelDefinition>& kept() const { return kept_; }
  const std::vector<DroppedKernel>& dropped() const { return dropped_; }
  // Kernels that do not run on the device arch: not a failure, not kept.
  const std::vector<DroppedKernel>& filtered() const { return filtered_; }
  // One line per drop: the kernel, its pack, the dispatch symbol and both sets.
  const std::vector<std::string>& log() const { return log_; }
  // Drops as errors, unknown matcher and heuristic symbols as warnings.
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

  const KernelDefinition* find(std::string_view kernelId) const;

  // The slotted engines that ship for the arch, in load order, with their slot
  // catalogs (select/slots.hpp makes slot programs of them).
  const std::vector<SlottedEngine>& slottedEngines() const { return slotted_; }
  // One of them by engine id (case-insensitively for UUIDs); nullptr when the
  // engine is not loaded, has no slots or ships nothing for the arch.
  const SlottedEngine* slotted(std::string_view engineId) const;

  // The kernel for `problem`: among kept kernels whose pack's registered
  // matchers all accept it, the highest priority, ties by the lower id.
  // Kernels of slotted engines are not candidates: they run only in slot
  // programs (select/slots.hpp), each in its slot.
  // Kernels are tried in that order and matching stops at the first accepted
  // one; nullptr when none is. A matcher's failure is returned (MATCHER_FAILED
  // unless it gives a code), naming the matcher and the kernel.
  Result<const KernelDefinition*> select(const Json& problem) const;

  // The verified code of one launch of a kept kernel (integrity.hpp), with the
  // kernel's handler's expected signature; `arch` "" means the manager's arch.
  // Every decompression is charged to the manager's budget (the set's
  // maxDecompressedBytes): once spent, launches fail DECOMPRESS_BUDGET.
  Result<std::vector<std::uint8_t>> loadLaunchCode(std::string_view kernelId, const std::optional<std::string>& launch,
                                                   const std::string& arch = "") const;

  // loadLaunchCode of every (kernel id, launch) of `launches`, on `threads`
  // threads (0: the hardware's count), its bytes dropped: per launch, the
  // failure or nullopt. Launches whose source names the same archive entry run
  // one after another on one thread, so each entry is decompressed and hashed
  // once (the verified cache serves the rest), as in a loop over them. A pack
  // checks a staged shard with it.
  std::vector<std::optional<Diagnostic>> checkLaunchCodes(
      const std::vector<std::pair<std::string, std::optional<std::string>>>& launches, const std::string& arch = "",
      unsigned threads = 0) const;

 private:
  Result<std::vector<std::uint8_t>> loadLaunchCode(std::string_view kernelId, const std::optional<std::string>& launch,
                                                   const std::string& arch, bool keepBytes,
                                                   LocatedLibraries* located = nullptr) const;
  // A warning (code, symbol, file, JSON path, message), given once per code and symbol.
  using WarnOnce = std::function<void(const std::string&, const std::string&, const std::string&, const std::string&,
                                      const std::string&)>;
  void build(const Registry& registry);
  void buildSlots(const Registry& registry, const WarnOnce& warnOnce);
  // HEURISTIC_UNKNOWN for each UHD of `heuristics` whose symbol nobody registered; `whose`
  // words the owner ("engine 'x'", "slot 's' of engine 'x'").
  void warnUnregistered(const std::map<std::string, HeuristicRoleMap>& heuristics, const Registry& registry,
                        const std::string& whose, const WarnOnce& warnOnce) const;
  void drop(const Pack& pack, const PackMember& m, const std::string& symbol, const std::string& code,
            const std::string& reason);

  // On the heap, so that the pointers in kept_ survive moving the manager.
  std::shared_ptr<const DescriptorSet> set_;
  std::string arch_;
  std::vector<KernelDefinition> kept_;
  // Per pack with a kept kernel, what its kernels point at: the handlers kept
  // alive, and the bound matchers (a deque: its lists stay put as it grows).
  std::vector<std::shared_ptr<const DispatchHandler>> handlers_;
  std::deque<std::vector<BoundMatcher>> packMatchers_;
  // The set's selection tables (its load's, else made from it), per member (g) its
  // kept_ index + 1 (0: not kept), and kept_'s indices in selection order, so neither
  // find() nor select() rescans or re-sorts per call; flat arrays, not a node per kernel.
  std::shared_ptr<const SelectionTables> tables_;
  std::vector<std::uint32_t> keptOf_;
  std::vector<std::size_t> ranked_;
  std::vector<DroppedKernel> dropped_;
  std::vector<DroppedKernel> filtered_;
  std::vector<std::string> log_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<SlottedEngine> slotted_;
  // While the constructor runs: per kept_ index its slot's catalog (nullptr: not slotted).
  std::vector<SlotCatalog*> catalogOfKept_;
  std::shared_ptr<ArchiveCache> cache_;
};

// Whether every registered matcher of a kept kernel's pack accepts `problem`
// (a matcher without a registered handler accepts all): what select() and
// slot programs ask. A matcher's failure is returned as select() words it.
Result<bool> matchersAccept(const KernelDefinition& definition, const Json& problem);

// Whether a kernel of `pack` runs on the device `arch`: its UKD
// arch, else its pack's; an empty list is every arch; generic targets hold
// their members. An empty `arch` matches every kernel.
bool kernelRunsOn(const Pack& pack, const Kernel& kernel, const std::string& arch);
// The same, of a kernel's arch list (absent: its pack's).
bool archesRunOn(const Pack& pack, const std::optional<std::vector<std::string>>& kernelArch, const std::string& arch);

// The arches a kernel names: its UKD arch, else its pack's (empty: every arch).
std::vector<std::string> kernelArches(const Pack& pack, const Kernel& kernel);

// The stub rule of ukdpack-validate: per dispatch symbol, the
// launches of the first UDD naming it that declares some, else the launch set
// of the first kernel of the first pack (load order) naming it; [] otherwise.
// With `arch`, only kernels that run on it count (one shard's view).
std::map<std::string, std::vector<std::string>> stubLaunchSets(const DescriptorSet& set, const std::string& arch = "");

// A registry of stubs for every symbol the set names: dispatch handlers by
// stubLaunchSets, matchers (UMD match_symbol, UED graph_match.native) and
// heuristics (UHD native / custom_library symbols) that only exist.
Registry stubRegistry(const DescriptorSet& set, const std::string& arch = "");

}  // namespace ukdpack
