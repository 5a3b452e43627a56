#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdpack::DeclaredDispatchHandler;
using ukdpack::DescriptorSet;
using ukdpack::Registry;
using ukdpack::StateManager;
using ukdtest::dump;
using ukdtest::findDiag;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

// split_kv.kdp.json: two two-launch kernels and one single-launch kernel
// under one dispatch symbol, the single one the odd one out.
void writeSplitTree(const TempTree& t) {
  ukdtest::writeGenerics(t, ukdtest::udd("udd-1", "example_split_kv_dispatch"));
  Json odd = ukdtest::multi("ukd-odd", "split.odd", {"produce", "consume"}, "INT");
  odd["sources"].erase("consume");
  odd["sources"]["finish"] = ukdtest::hipSource("finish");
  Json pack = ukdtest::kdp("kdp-split",
                           Json::array({ukdtest::multi("ukd-f32", "split.f32", {"produce", "consume"}, "FLOAT"),
                                        ukdtest::multi("ukd-f16", "split.f16", {"consume", "produce"}, "HALF"), odd}));
  pack["name"] = "split_kv";
  t.write("split_kv.kdp.json", pack);
}

Registry registryWith(const std::string& symbol, std::vector<std::string> launches) {
  Registry r;
  EXPECT_TRUE(r.addDispatch(symbol, std::make_shared<DeclaredDispatchHandler>(std::move(launches))));
  EXPECT_TRUE(r.addMatcher("eng_match", std::make_shared<ukdpack::MatchHandler>()));
  return r;
}

std::vector<std::string> keptIds(const StateManager& sm) {
  std::vector<std::string> out;
  for (const auto& d : sm.kept()) out.push_back(d.kernel()->id);
  return out;
}

}  // namespace

TEST(StateManager, HandlerDeclaringFewerLaunchesDropsTheKernelNamingBothSets) {
  TempTree t;
  writeSplitTree(t);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const StateManager sm(set, registryWith("example_split_kv_dispatch", {"produce"}), "");
  EXPECT_TRUE(sm.kept().empty());
  ASSERT_EQ(sm.dropped().size(), 3u);
  ASSERT_EQ(sm.log().size(), 3u);
  EXPECT_EQ(sm.log()[0],
            "dropping kernel 'split.f32' (id ukd-f32) of pack 'split_kv' (split_kv.kdp.json): dispatch symbol "
            "'example_split_kv_dispatch' declares launches {produce}, the kernel has {consume, produce}");
  EXPECT_EQ(sm.dropped()[0].code, "LAUNCH_SET_MISMATCH");
  EXPECT_EQ(sm.dropped()[0].kernelId, "ukd-f32");
  EXPECT_EQ(sm.dropped()[0].packId, "kdp-split");
  EXPECT_EQ(sm.dropped()[0].reason,
            "dispatch symbol 'example_split_kv_dispatch' declares launches {produce}, the kernel has "
            "{consume, produce}");
  EXPECT_EQ(sm.log()[0].find('\n'), std::string::npos);
  const ukdpack::Diagnostic* d = findDiag(sm.diagnostics(), "LAUNCH_SET_MISMATCH", "split.f32");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, ukdpack::Severity::Error);
  EXPECT_EQ(d->file, "split_kv.kdp.json");
  EXPECT_EQ(d->jsonPath, "$.kernelDescriptors[0]");
}

TEST(StateManager, AgreeingHandlerKeepsTheKernelsAndDropsOnlyTheOddSibling) {
  TempTree t;
  writeSplitTree(t);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  // Run order differs from sorted order: compared as sets.
  const StateManager sm(set, registryWith("example_split_kv_dispatch", {"produce", "consume"}), "");
  EXPECT_EQ(keptIds(sm), (std::vector<std::string>{"ukd-f32", "ukd-f16"}));
  ASSERT_EQ(sm.dropped().size(), 1u);
  EXPECT_EQ(sm.log().at(0),
            "dropping kernel 'split.odd' (id ukd-odd) of pack 'split_kv' (split_kv.kdp.json): dispatch symbol "
            "'example_split_kv_dispatch' declares launches {consume, produce}, the kernel has {finish, produce}");
  // Kept definitions point into the manager's own storage, with the pack and handler.
  const ukdpack::KernelDefinition* def = sm.find("ukd-f16");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->pack->id, "kdp-split");
  EXPECT_EQ(def->dispatchSymbol(), "example_split_kv_dispatch");
  EXPECT_EQ(def->handler->launchNames(), (std::vector<std::string>{"produce", "consume"}));
  EXPECT_EQ(def->engine->name, "test:eng");
  EXPECT_EQ(def->kernel(), &sm.descriptors().packs[0].members[1].kernel());

  // find() knows kept kernels only: not the dropped one, not an unknown id.
  EXPECT_EQ(sm.find("ukd-odd"), nullptr);
  EXPECT_EQ(sm.find("ukd-nope"), nullptr);

  // Moving the manager keeps those pointers valid.
  StateManager moved = StateManager(set, registryWith("example_split_kv_dispatch", {"produce", "consume"}), "");
  const ukdpack::Kernel* before = moved.find("ukd-f32")->kernel();
  StateManager other = std::move(moved);
  EXPECT_EQ(other.find("ukd-f32")->kernel(), before);
  EXPECT_EQ(other.find("ukd-f32")->kernel()->name, "split.f32");

  // Execution plans run launches in the handler's order.
  auto plan = ukdpack::makeExecutionPlan(other, "ukd-f16");
  ASSERT_TRUE(plan) << plan.error().str();
  EXPECT_EQ(plan.value().launches, (std::vector<std::string>{"produce", "consume"}));
}

TEST(StateManager, SingleLaunchHandlerKeepsSingleLaunchKernels) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1"),
                                                           ukdtest::multi("ukd-m", "m", {"produce", "consume"})})));
  const StateManager sm(ukdpack::loadShard(t.root()), registryWith("sym_one", {}), "");
  EXPECT_EQ(keptIds(sm), std::vector<std::string>{"ukd-a1"});
  ASSERT_EQ(sm.log().size(), 1u);
  EXPECT_NE(sm.log()[0].find("declares launches {}, the kernel has {consume, produce}"), std::string::npos)
      << sm.log()[0];
}

TEST(StateManager, UnknownSymbolAndNullDispatchDropThePack) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({ukdtest::single("ukd-b1", "b1", "HALF")}), nullptr));
  const StateManager sm(ukdpack::loadShard(t.root()), registryWith("another_symbol", {}), "");
  EXPECT_TRUE(sm.kept().empty());
  ASSERT_EQ(sm.dropped().size(), 2u);
  EXPECT_EQ(sm.dropped()[0].code, "DISPATCH_UNKNOWN");
  EXPECT_NE(sm.dropped()[0].reason.find("no dispatch handler is registered for dispatch symbol 'sym_one'"),
            std::string::npos);
  EXPECT_EQ(sm.dropped()[1].code, "NO_DISPATCH");
  EXPECT_EQ(findDiag(sm.diagnostics(), "DISPATCH_UNKNOWN")->severity, ukdpack::Severity::Error);
  EXPECT_EQ(findDiag(sm.diagnostics(), "NO_DISPATCH")->severity, ukdpack::Severity::Warning);
}

TEST(StateManager, FiltersByDeviceArch) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json on90a = ukdtest::single("ukd-90a", "on90a");
  on90a["arch"] = {"gfx90a"};
  Json generic = ukdtest::single("ukd-gen", "gen", "HALF");
  generic["arch"] = {"gfx11-generic"};
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({on90a, generic, ukdtest::single("ukd-any", "any", "INT")})));
  Json onlyOther =
      ukdtest::kdp("kdp-b", Json::array({ukdtest::single("ukd-b", "b", "BF16")}), "udd-1", "ued-1", {"gfx1030"});
  t.write("b.kdp.json", onlyOther);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const Registry r = registryWith("sym_one", {});
  EXPECT_EQ(keptIds(StateManager(set, r, "gfx90a:xnack-")), (std::vector<std::string>{"ukd-90a", "ukd-any"}));
  EXPECT_EQ(keptIds(StateManager(set, r, "gfx1100")), (std::vector<std::string>{"ukd-gen", "ukd-any"}));
  EXPECT_EQ(keptIds(StateManager(set, r, "gfx1030")), (std::vector<std::string>{"ukd-any", "ukd-b"}));
  EXPECT_EQ(keptIds(StateManager(set, r, "")).size(), 4u);
  const StateManager sm(set, r, "gfx1030");
  EXPECT_TRUE(sm.dropped().empty());
  EXPECT_EQ(sm.filtered().size(), 2u);
  EXPECT_EQ(sm.filtered()[0].code, "ARCH_FILTERED");
}

TEST(StateManager, UnknownMatcherIsAWarningNotADrop) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  Registry r;
  ASSERT_TRUE(r.addDispatch("sym_one", std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{})));
  const StateManager sm(ukdpack::loadShard(t.root()), r, "");
  EXPECT_EQ(keptIds(sm), std::vector<std::string>{"ukd-a1"});
  const ukdpack::Diagnostic* w = findDiag(sm.diagnostics(), "MATCHER_UNKNOWN", "eng_match");
  ASSERT_NE(w, nullptr) << dump(sm.diagnostics());
  EXPECT_EQ(w->severity, ukdpack::Severity::Warning);
}

TEST(Registry, RefusesEmptyNullAndTakenSymbols) {
  Registry r;
  auto h = std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{"a", "b"});
  EXPECT_TRUE(r.addDispatch("s", h));
  EXPECT_FALSE(r.addDispatch("s", std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{})));
  EXPECT_EQ(r.dispatch("s")->launchNames(), (std::vector<std::string>{"a", "b"}));  // the first stays
  EXPECT_FALSE(r.addDispatch("", h));
  EXPECT_FALSE(r.addDispatch("t", nullptr));
  EXPECT_EQ(r.dispatch("t"), nullptr);
  EXPECT_EQ(r.dispatchSymbols(), std::vector<std::string>{"s"});
}

// --------------------------------------------------------------------------- stubs

TEST(StubRule, UddLaunchesElseTheFirstKernelOfTheFirstPack) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("two.udd.json", ukdtest::udd("udd-2", "sym_two", std::vector<std::string>{"produce", "consume"}));
  t.write("three.udd.json", ukdtest::udd("udd-3", "sym_three"));
  // a.kdp.json is first in load order, so its first kernel sets sym_one's set.
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::multi("ukd-a1", "a1", {"x", "y"}),
                                                           ukdtest::single("ukd-a2", "a2")})));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({ukdtest::single("ukd-b1", "b1", "INT")})));
  // The UDD's declaration wins over the kernels it serves.
  t.write("c.kdp.json", ukdtest::kdp("kdp-c", Json::array({ukdtest::single("ukd-c1", "c1", "BF16")}), "udd-2"));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const auto stubs = ukdpack::stubLaunchSets(set);
  EXPECT_EQ(stubs.at("sym_one"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(stubs.at("sym_two"), (std::vector<std::string>{"produce", "consume"}));
  EXPECT_EQ(stubs.at("sym_three"), std::vector<std::string>{});
  // A shard's view: only kernels on that arch count.
  Json pack =
      ukdtest::kdp("kdp-a", Json::array({ukdtest::multi("ukd-a1", "a1", {"x", "y"}), ukdtest::single("ukd-a2", "a2")}));
  pack["kernelDescriptors"][0]["arch"] = {"gfx90a"};
  t.write("a.kdp.json", pack);
  const DescriptorSet perArch = ukdpack::loadShard(t.root());
  EXPECT_EQ(ukdpack::stubLaunchSets(perArch, "gfx1030").at("sym_one"), std::vector<std::string>{});
  EXPECT_EQ(ukdpack::stubLaunchSets(perArch, "gfx90a").at("sym_one"), (std::vector<std::string>{"x", "y"}));
}

// --------------------------------------------------------------------------- validate

TEST(Validate, PackWhoseKernelsDisagreeLoadsItsEngineButFailsNamingBothSets) {
  TempTree t;
  writeSplitTree(t);
  ukdpack::ValidateOptions options;
  options.expectEngines = {"test:eng"};
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()}, options);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exitCode(), 1);
  EXPECT_EQ(r.engines, std::vector<std::string>{"test:eng"});  // the engine still loads
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].kernelName, "split.odd");
  EXPECT_NE(findDiag(r.diagnostics, "LAUNCH_SET_MISMATCH",
                     "declares launches {consume, produce}, the kernel has {finish, produce}"),
            nullptr)
      << dump(r.diagnostics);
  EXPECT_EQ(findDiag(r.diagnostics, "ENGINE_MISSING"), nullptr);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_EQ(r.toJson().at("ok"), false);
  // The whole-set rule and the stub handler's drop both say it.
  EXPECT_EQ(r.summary().rfind("failed: 2 errors, 1 kernel dropped", 0), 0u) << r.summary();
}

TEST(Validate, OkTreeAndExpectedEngine) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  ukdpack::ValidateOptions options;
  options.expectEngines = {"test:eng"};
  const ukdpack::ValidationReport ok = ukdpack::validateRoots({t.root()}, options);
  EXPECT_TRUE(ok.ok) << dump(ok.diagnostics);
  EXPECT_EQ(ok.summary(), "ok: 1 root, 1 pack, 1 kernel (1 kept, 0 launches verified)");
  options.expectEngines = {"other:eng"};
  const ukdpack::ValidationReport missing = ukdpack::validateRoots({t.root()}, options);
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(findDiag(missing.diagnostics, "ENGINE_MISSING", "expected engine 'other:eng'"), nullptr);
  // A null-dispatch pack is legal, but its kernels share one launch set.
  t.write("n.kdp.json", ukdtest::kdp("kdp-n",
                                     Json::array({ukdtest::single("ukd-n1", "n1", "HALF"),
                                                  ukdtest::multi("ukd-n2", "n2", {"p", "q"}, "INT")}),
                                     nullptr));
  const ukdpack::ValidationReport nulls = ukdpack::validateRoots({t.root()});
  EXPECT_FALSE(nulls.ok);
  EXPECT_NE(findDiag(nulls.diagnostics, "LAUNCH_SET_MISMATCH",
                     "KDP 'kdp-n' has no dispatch and holds kernels with different launch sets: n.kdp.json: 'n1' "
                     "(id ukd-n1) {}, 'n2' (id ukd-n2) {p, q}; a pack's kernels share one launch set"),
            nullptr)
      << dump(nulls.diagnostics);
  t.write("n.kdp.json", ukdtest::kdp("kdp-n", Json::array({ukdtest::single("ukd-n1", "n1", "HALF")}), nullptr));
  EXPECT_TRUE(ukdpack::validateRoots({t.root()}).ok);
}

TEST(Validate, LaunchSetsAreCheckedPerArchShard) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json a = ukdtest::single("ukd-a1", "a1");
  a["arch"] = {"gfx1030"};
  Json b = ukdtest::multi("ukd-b1", "b1", {"p", "q"});
  b["arch"] = {"gfx90a"};
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({a}), "udd-1", "ued-1", {"gfx90a", "gfx1030"}));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({b}), "udd-1", "ued-1", {"gfx90a", "gfx1030"}));
  EXPECT_TRUE(ukdpack::validateRoots({t.root()}).ok);  // no shard holds both
  b["arch"] = {"gfx90a", "gfx1030"};
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({b}), "udd-1", "ued-1", {"gfx90a", "gfx1030"}));
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(findDiag(r.diagnostics, "LAUNCH_SET_MISMATCH", "(on gfx1030)"), nullptr) << dump(r.diagnostics);
}

TEST(StateManager, FindsKernelsByUuidInAnyCase) {
  TempTree t;
  ukdtest::writeGenerics(t, ukdtest::udd("udd-1", "example_split_kv_dispatch"));
  const std::string lower = "5f0c2a9e-3b1d-4c6e-9a7f-0123456789ab";
  Json pack =
      ukdtest::kdp("kdp-split", Json::array({ukdtest::multi(lower, "split.f32", {"produce", "consume"}, "FLOAT"),
                                             ukdtest::multi("ukd-f16", "split.f16", {"produce", "consume"}, "HALF")}));
  t.write("split_kv.kdp.json", pack);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const StateManager sm(set, registryWith("example_split_kv_dispatch", {"produce", "consume"}), "");
  ASSERT_EQ(sm.kept().size(), 2u) << dump(sm.diagnostics());
  const ukdpack::KernelDefinition* def = sm.find("5F0C2A9E-3B1D-4C6E-9A7F-0123456789AB");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->kernel()->name, "split.f32");
  EXPECT_EQ(sm.find(lower), def);
  // Other ids compare verbatim.
  EXPECT_EQ(sm.find("UKD-F16"), nullptr);
  ASSERT_NE(sm.find("ukd-f16"), nullptr);
}
