// Slotted engines in the state manager: per-slot catalogs, ranking, slot
// programs and their refusals, the SLOT_EMPTY drop, saved plans and revisions.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/revision.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/slots.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdpack::DeclaredDispatchHandler;
using ukdpack::DescriptorSet;
using ukdpack::Registry;
using ukdpack::Result;
using ukdpack::StateManager;
using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

Json slottedUed(const std::vector<std::string>& slots, const Json& mainHeuristics = Json::object()) {
  Json list = Json::array();
  for (const std::string& s : slots) {
    Json slot = {{"name", s}};
    if (s == "main")
      for (const auto& [role, map] : mainHeuristics.items()) slot[role] = map;
    list.push_back(slot);
  }
  return {{"id", "ued-s"}, {"version", "1.1"}, {"name", "test:slotted"}, {"metadata", "kmd-1"}, {"slots", list}};
}

Json slotPack(const std::string& id, const std::string& slot, const Json& kernels,
              const std::vector<std::string>& arch = {}) {
  Json p = ukdtest::kdp(id, kernels, "udd-1", "ued-s", arch);
  p["version"] = "1.1";
  p["slot"] = slot;
  return p;
}

Json prioritized(const std::string& id, const std::string& name, int priority) {
  Json k = ukdtest::single(id, name, name);  // its name as its dtype: metadata stays unique
  k["priority"] = priority;
  return k;
}

Json nativeUhd(const std::string& id, const std::string& symbol) {
  return {{"id", id},           {"version", "1.1"},
          {"name", id},         {"adapter", "native"},
          {"objective", "max"}, {"native", {{"symbol", symbol}}},
          {"slot", "main"}};
}

// The slotted engine (prep, main, finish), an unslotted engine's pack beside it.
// prep: ukd-p1 (priority 1), ukd-p2 (priority 5); main: ukd-m1, ukd-m2 and the
// two-launch ukd-m3 (dropped by the single-launch handler); finish: ukd-f1,
// built for `finishArch` only.
struct Tree {
  TempTree t;
  explicit Tree(const std::vector<std::string>& finishArch = {}, const Json& mainHeuristics = Json::object(),
                const std::vector<std::string>& slots = {"prep", "main", "finish"}) {
    ukdtest::writeGenerics(t);
    t.write("s/eng.ued.json", slottedUed(slots, mainHeuristics));
    t.write("s/rank.uhd.json", nativeUhd("uhd-rank", "rank_main"));
    t.write("s/fit.uhd.json", nativeUhd("uhd-fit", "fit_main"));
    t.write("s/prep.kdp.json", slotPack("kdp-prep", "prep",
                                        Json::array({prioritized("ukd-p1", "p1", 1), prioritized("ukd-p2", "p2", 5)})));
    t.write("s/main.kdp.json", slotPack("kdp-main", "main",
                                        Json::array({prioritized("ukd-m2", "m2", 0), prioritized("ukd-m1", "m1", 0),
                                                     ukdtest::multi("ukd-m3", "m3", {"produce", "consume"}, "m3")})));
    t.write("s/finish.kdp.json",
            slotPack("kdp-finish", "finish", Json::array({prioritized("ukd-f1", "f1", 0)}), finishArch));
    t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1", "a1")})));
  }
  DescriptorSet load() const {
    DescriptorSet set = ukdpack::loadShard(t.root());
    EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
    return set;
  }
};

// A matcher that refuses the kernels it names.
class Refusing : public ukdpack::MatchHandler {
 public:
  explicit Refusing(std::set<std::string> names) : names_(std::move(names)) {}
  Result<bool> matches(const ukdpack::Kernel& k, const Json&) const override {
    return Result<bool>::success(names_.count(k.name) == 0);
  }

 private:
  std::set<std::string> names_;
};

// A ranker answering a fixed order (by kernel name); a checker refusing the names it holds.
class Heuristic : public ukdpack::HeuristicHandler {
 public:
  std::vector<std::string> order;
  std::vector<std::size_t> raw;  // answered as it is when set
  std::set<std::string> refuse;
  mutable std::vector<std::string> ranked;  // what rank() was given, by name
  Result<std::vector<std::size_t>> rank(const std::vector<const ukdpack::Kernel*>& kernels,
                                        const Json& problem) const override {
    ranked.clear();
    for (const auto* k : kernels) ranked.push_back(k->name);
    EXPECT_EQ(problem, Json({{"n", 7}}));
    if (!raw.empty()) return Result<std::vector<std::size_t>>::success(raw);
    std::vector<std::size_t> out;
    for (const std::string& name : order)
      for (std::size_t i = 0; i < kernels.size(); ++i)
        if (kernels[i]->name == name) out.push_back(i);
    return Result<std::vector<std::size_t>>::success(out);
  }
  Result<bool> applicable(const ukdpack::Kernel& k, const Json&) const override {
    return Result<bool>::success(refuse.count(k.name) == 0);
  }
};

Registry registry(std::shared_ptr<const ukdpack::MatchHandler> matcher = std::make_shared<ukdpack::MatchHandler>(),
                  std::shared_ptr<Heuristic> rank = nullptr, std::shared_ptr<Heuristic> fit = nullptr) {
  Registry r;
  r.addDispatch("sym_one", std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{}));
  r.addMatcher("eng_match", std::move(matcher));
  if (rank) r.addHeuristic("rank_main", rank);
  if (fit) r.addHeuristic("fit_main", fit);
  return r;
}

std::vector<std::string> names(const std::vector<const ukdpack::KernelDefinition*>& defs) {
  std::vector<std::string> out;
  for (const auto* d : defs) out.push_back(d->kernel()->name);
  return out;
}

std::vector<std::string> picks(const ukdpack::SlotProgram& p) {
  std::vector<std::string> out;
  for (const auto& pick : p.picks) out.push_back(pick.slot + "=" + pick.definition->kernel()->name);
  return out;
}

std::string failure(const Result<ukdpack::SlotProgram>& r) {
  return r ? std::string("<made>") : r.error().code + ": " + r.error().message;
}

const Json kProblem = {{"n", 7}};

}  // namespace

TEST(SlotRuntime, CatalogsKeepEachSlotsKernelsInPriorityThenIdOrderAndSelectSkipsThem) {
  Tree tree;
  const StateManager sm(tree.load(), registry(), "gfx90a");
  ASSERT_EQ(sm.slottedEngines().size(), 1u);
  const ukdpack::SlottedEngine* se = sm.slotted("ued-s");
  ASSERT_NE(se, nullptr);
  EXPECT_EQ(se, &sm.slottedEngines()[0]);
  EXPECT_FALSE(se->droppedReason);
  ASSERT_EQ(se->slots.size(), 3u);
  EXPECT_EQ(se->slots[0].name, "prep");
  EXPECT_EQ(se->slots[2].index, 2u);
  EXPECT_EQ(names(se->slots[0].kept), (std::vector<std::string>{"p2", "p1"}));  // priority 5 first
  EXPECT_EQ(names(se->slots[1].kept), (std::vector<std::string>{"m1", "m2"}));  // a tie: by id
  EXPECT_EQ(se->slots[1].ranker, "priority");
  ASSERT_EQ(se->slots[1].dropped.size(), 1u);
  EXPECT_EQ(se->slots[1].dropped[0].kernelId, "ukd-m3");
  EXPECT_EQ(se->slots[1].dropped[0].code, "LAUNCH_SET_MISMATCH");
  EXPECT_TRUE(se->slots[0].dropped.empty());
  EXPECT_EQ(sm.slotted("ued-1"), nullptr);  // unslotted
  // Slotted kernels are kept (plans find them) but only slot programs run them.
  EXPECT_NE(sm.find("ukd-p2"), nullptr);
  auto picked = sm.select(kProblem);
  ASSERT_TRUE(picked);
  ASSERT_NE(picked.value(), nullptr);
  EXPECT_EQ(picked.value()->kernel()->id, "ukd-a1");
  const StateManager withoutA(tree.load(), registry(std::make_shared<Refusing>(std::set<std::string>{"a1"})));
  EXPECT_EQ(withoutA.select(kProblem).value(), nullptr);
}

TEST(SlotRuntime, DefaultPicksAreEachSlotsBestRankedApplicableKernel) {
  Tree tree;
  const StateManager sm(tree.load(), registry(), "gfx90a");
  auto program = ukdpack::makeSlotProgram(sm, "ued-s", kProblem);
  ASSERT_TRUE(program) << failure(program);
  EXPECT_EQ(program.value().engine->name, "test:slotted");
  EXPECT_EQ(picks(program.value()), (std::vector<std::string>{"prep=p2", "main=m1", "finish=f1"}));
  EXPECT_FALSE(program.value().picks[0].chosen);
  // By name too.
  EXPECT_TRUE(ukdpack::makeSlotProgram(sm, "test:slotted", kProblem));
  // A matcher refusing the best-ranked kernel of a slot: the next one.
  const StateManager refusing(tree.load(), registry(std::make_shared<Refusing>(std::set<std::string>{"p2", "m1"})));
  auto next = ukdpack::makeSlotProgram(refusing, "ued-s", kProblem);
  ASSERT_TRUE(next) << failure(next);
  EXPECT_EQ(picks(next.value()), (std::vector<std::string>{"prep=p1", "main=m2", "finish=f1"}));
  // None left in a slot: SLOT_PICK naming it.
  const StateManager none(tree.load(), registry(std::make_shared<Refusing>(std::set<std::string>{"f1"})));
  auto empty = ukdpack::makeSlotProgram(none, "ued-s", kProblem);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, "SLOT_PICK");
  EXPECT_EQ(empty.error().message,
            "slot 'finish' of engine 'test:slotted' has no kept kernel that applies to the problem (1 kept)");
}

TEST(SlotRuntime, ChosenPicksAreCheckedAgainstTheirSlot) {
  Tree tree;
  const StateManager sm(tree.load(), registry(std::make_shared<Refusing>(std::set<std::string>{"m2"})), "gfx90a");
  auto chosen = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"prep", "ukd-p1"}});
  ASSERT_TRUE(chosen) << failure(chosen);
  EXPECT_EQ(picks(chosen.value()), (std::vector<std::string>{"prep=p1", "main=m1", "finish=f1"}));
  EXPECT_TRUE(chosen.value().picks[0].chosen);
  EXPECT_FALSE(chosen.value().picks[1].chosen);

  auto wrongSlot = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"prep", "ukd-m1"}});
  ASSERT_FALSE(wrongSlot);
  EXPECT_EQ(wrongSlot.error().code, "SLOT_PICK");
  EXPECT_EQ(wrongSlot.error().message,
            "kernel 'ukd-m1' cannot run in slot 'prep' of engine 'test:slotted': kernel 'm1' (id ukd-m1) is a kernel "
            "of slot 'main', not of slot 'prep'");

  auto notKept = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"main", "ukd-m3"}});
  ASSERT_FALSE(notKept);
  EXPECT_EQ(notKept.error().code, "SLOT_PICK");
  EXPECT_EQ(notKept.error().message,
            "kernel 'ukd-m3' cannot run in slot 'main' of engine 'test:slotted': kernel 'm3' (id ukd-m3) is not kept: "
            "dispatch symbol 'sym_one' declares launches {}, the kernel has {consume, produce}");

  auto notApplicable = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"main", "ukd-m2"}});
  ASSERT_FALSE(notApplicable);
  EXPECT_EQ(notApplicable.error().code, "SLOT_PICK");
  EXPECT_NE(notApplicable.error().message.find("does not apply to the problem: a matcher of its pack 'kdp-main'"),
            std::string::npos)
      << notApplicable.error().message;

  auto foreign = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"main", "ukd-a1"}});
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, "SLOT_PICK");
  EXPECT_NE(foreign.error().message.find("no kernel of the engine on this arch has that id"), std::string::npos);

  auto unknownSlot = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"reduce", "ukd-m1"}});
  ASSERT_FALSE(unknownSlot);
  EXPECT_EQ(unknownSlot.error().code, "SLOT_UNKNOWN");
  EXPECT_EQ(unknownSlot.error().message,
            "a pick names slot 'reduce' (kernel 'ukd-m1'), which engine 'test:slotted' does not have (its slots: "
            "'prep', 'main', 'finish')");

  EXPECT_EQ(ukdpack::makeSlotProgram(sm, "ued-nope", kProblem).error().code, "ENGINE_UNKNOWN");
  EXPECT_EQ(ukdpack::makeSlotProgram(sm, "ued-1", kProblem).error().code, "ENGINE_NOT_SLOTTED");
}

TEST(SlotRuntime, NativeRankerAndApplicabilityArePerSlotAndPerProblem) {
  const Json roles = {{"sort_kernel_catalog", {{"default", "uhd-rank"}}},
                      {"predict_applicable_kernels", {{"gfx90a", "uhd-fit"}}}};
  Tree tree({}, roles);
  auto rank = std::make_shared<Heuristic>();
  rank->order = {"m2"};  // a top-1 answer: the rest follow in catalog order
  auto fit = std::make_shared<Heuristic>();
  const StateManager sm(tree.load(), registry(std::make_shared<ukdpack::MatchHandler>(), rank, fit), "gfx90a");
  const ukdpack::SlotCatalog& main = sm.slotted("ued-s")->slots[1];
  EXPECT_EQ(main.ranker, "native");
  ASSERT_NE(main.rankHeuristic, nullptr);
  EXPECT_EQ(main.rankHeuristic->id, "uhd-rank");
  EXPECT_EQ(main.applicabilityHeuristic->id, "uhd-fit");
  EXPECT_EQ(sm.slotted("ued-s")->slots[0].ranker, "priority");
  auto ranked = ukdpack::rankSlot(main, kProblem);
  ASSERT_TRUE(ranked);
  EXPECT_EQ(names(ranked.value()), (std::vector<std::string>{"m2", "m1"}));
  EXPECT_EQ(rank->ranked, (std::vector<std::string>{"m1", "m2"}));  // given in catalog order

  auto program = ukdpack::makeSlotProgram(sm, "ued-s", kProblem);
  ASSERT_TRUE(program) << failure(program);
  EXPECT_EQ(picks(program.value()), (std::vector<std::string>{"prep=p2", "main=m2", "finish=f1"}));

  fit->refuse = {"m2"};  // predict_applicable_kernels rules the ranker's best out
  auto fitted = ukdpack::makeSlotProgram(sm, "ued-s", kProblem);
  ASSERT_TRUE(fitted) << failure(fitted);
  EXPECT_EQ(picks(fitted.value()), (std::vector<std::string>{"prep=p2", "main=m1", "finish=f1"}));
  auto refused = ukdpack::makeSlotProgram(sm, "ued-s", kProblem, {{"main", "ukd-m2"}});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("predict_applicable_kernels heuristic 'uhd-fit' rules it out"),
            std::string::npos)
      << refused.error().message;

  rank->raw = {0, 0};
  auto twice = ukdpack::makeSlotProgram(sm, "ued-s", kProblem);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, "HEURISTIC_FAILED");
  EXPECT_EQ(twice.error().message,
            "sort_kernel_catalog heuristic 'uhd-rank' (symbol 'rank_main') of slot 'main' answered badly: index 0 is "
            "named twice");

  // The arch key misses on another arch, and nothing registered: catalog order, a warning.
  const StateManager bare(tree.load(), registry(), "gfx942");
  EXPECT_EQ(bare.slotted("ued-s")->slots[1].applicabilityHeuristic, nullptr);
  EXPECT_EQ(bare.slotted("ued-s")->slots[1].rankHandler, nullptr);
  EXPECT_NE(ukdtest::findDiag(bare.diagnostics(), "HEURISTIC_UNKNOWN", "sort_kernel_catalog of slot 'main'"), nullptr)
      << dump(bare.diagnostics());
  EXPECT_EQ(picks(ukdpack::makeSlotProgram(bare, "ued-s", kProblem).value()),
            (std::vector<std::string>{"prep=p2", "main=m1", "finish=f1"}));
}

TEST(SlotRuntime, ASlotEmptyOnTheArchDropsTheEngineForThatArch) {
  Tree tree({"gfx942"});
  const StateManager other(tree.load(), registry(), "gfx942");
  EXPECT_FALSE(other.slotted("ued-s")->droppedReason);
  EXPECT_TRUE(ukdpack::makeSlotProgram(other, "ued-s", kProblem));

  const StateManager sm(tree.load(), registry(), "gfx90a:sramecc+:xnack-");
  const ukdpack::SlottedEngine* se = sm.slotted("ued-s");
  ASSERT_NE(se, nullptr);
  const std::string reason =
      "engine 'test:slotted' is dropped for gfx90a: its slot 'finish' holds no kept kernel for gfx90a (none of its "
      "kernels runs on gfx90a), and every slot must run";
  EXPECT_EQ(se->droppedReason.value_or(""), reason);
  for (const auto& slot : se->slots) EXPECT_TRUE(slot.kept.empty()) << slot.name;
  EXPECT_EQ(se->slots[0].dropped.size(), 2u);
  EXPECT_EQ(sm.find("ukd-p1"), nullptr);
  EXPECT_NE(sm.find("ukd-a1"), nullptr);  // another engine's kernels stay
  std::size_t slotEmpty = 0;
  for (const auto& d : sm.dropped()) {
    if (d.code != "SLOT_EMPTY") continue;
    ++slotEmpty;
    EXPECT_EQ(d.reason, reason);
  }
  EXPECT_EQ(slotEmpty, 4u);  // p1, p2, m1, m2 (m3 was dropped already)
  const ukdpack::Diagnostic* d = ukdtest::findDiag(sm.diagnostics(), "SLOT_EMPTY", "kernel 'p2'");
  ASSERT_NE(d, nullptr) << dump(sm.diagnostics());
  EXPECT_EQ(d->severity, ukdpack::Severity::Error);
  auto program = ukdpack::makeSlotProgram(sm, "ued-s", kProblem);
  ASSERT_FALSE(program);
  EXPECT_EQ(program.error().code, "SLOT_EMPTY");
  EXPECT_EQ(program.error().message, reason);

  // Dropped kernels empty a slot too: a handler that keeps only two-launch kernels.
  Registry twoLaunch;
  twoLaunch.addDispatch("sym_one",
                        std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{"produce", "consume"}));
  const StateManager multi(tree.load(), twoLaunch, "gfx942");
  EXPECT_EQ(multi.slotted("ued-s")->droppedReason.value_or(""),
            "engine 'test:slotted' is dropped for gfx942: its slots 'prep', 'finish' hold no kept kernel for gfx942 "
            "(its 2 kernels there were dropped), and every slot must run");

  // An arch the engine does not ship for is no drop: the engine is not there.
  Tree only({"gfx942"});
  only.t.write("s/prep.kdp.json", slotPack("kdp-prep", "prep", Json::array({prioritized("ukd-p1", "p1", 1)}),
                                           std::vector<std::string>{"gfx942"}));
  only.t.write("s/main.kdp.json", slotPack("kdp-main", "main", Json::array({prioritized("ukd-m1", "m1", 1)}),
                                           std::vector<std::string>{"gfx942"}));
  const StateManager absent(only.load(), registry(), "gfx90a");
  EXPECT_TRUE(absent.slottedEngines().empty());
  EXPECT_TRUE(absent.dropped().empty()) << dump(absent.diagnostics());
  auto none = ukdpack::makeSlotProgram(absent, "ued-s", kProblem);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, "ENGINE_UNKNOWN");
  EXPECT_EQ(none.error().message, "engine 'test:slotted' ships no kernel for gfx90a");
}

TEST(SlotRuntime, SavingAPlanOfASlottedKernelIsRefused) {
  Tree tree;
  const DescriptorSet set = tree.load();
  auto refused = ukdpack::capturePlan(set, "ukd-p1");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "PLAN_SLOTTED");
  EXPECT_EQ(refused.error().message,
            "cannot save a plan of kernel 'p1' (id ukd-p1): it fills slot 'prep' of engine 'test:slotted', whose "
            "kernels run only in slot programs, and slotted plans are not saved");
  EXPECT_EQ(refused.error().file, "s/prep.kdp.json");
  // An unslotted kernel is judged as before (here: not packed).
  EXPECT_EQ(ukdpack::capturePlan(set, "ukd-a1").error().code, "PLAN_NOT_PACKED");
}

TEST(SlotRuntime, SelectorRevisionCoversSlotNamesOrderAndMembership) {
  Tree tree;
  const DescriptorSet set = tree.load();
  const std::string before = ukdpack::selectorRevision(set, "kdp-prep").value();
  const Json doc = ukdpack::selectorRevisionDocument(set, *set.findPack("kdp-prep"));
  EXPECT_EQ(doc["slot"], "prep");
  EXPECT_EQ(doc["engine"]["slots"], Json({"prep", "main", "finish"}));
  // An unslotted pack's document has no slot keys, and its revision is what it was
  // before slots (the digest 2512e68 gives this pack).
  const Json plain = ukdpack::selectorRevisionDocument(set, *set.findPack("kdp-a"));
  EXPECT_FALSE(plain.contains("slot"));
  EXPECT_FALSE(plain["engine"].contains("slots"));
  EXPECT_EQ(ukdpack::selectorRevision(set, "kdp-a").value(),
            "114e7d60eeae1436c0ac60e4ded5d93bd47ba8d5010408dbf65a1d0b731df034");

  Tree reordered({}, Json::object(), {"main", "prep", "finish"});
  EXPECT_NE(ukdpack::selectorRevision(reordered.load(), "kdp-prep").value(), before);
  Tree renamed({}, Json::object(), {"prep", "main", "finish", "reduce"});
  EXPECT_NE(ukdpack::selectorRevision(renamed.load(), "kdp-prep").value(), before);
  Tree moved;
  moved.t.write(
      "s/prep.kdp.json",
      slotPack("kdp-prep", "finish", Json::array({prioritized("ukd-p1", "p1", 1), prioritized("ukd-p2", "p2", 5)})));
  EXPECT_NE(ukdpack::selectorRevision(moved.load(), "kdp-prep").value(), before);
}
