// The slot rules beyond what the corpus pins: which arches a slotted engine ships
// for (asked arches, generic families, kernels naming no arch), the loader's
// empty-slot rule per packed arch and only on authored trees, a slot's UHDs
// shipping with its engine, and metadata verdicts per slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/slots.hpp"
#include "ukdpack/rules/set_rules.hpp"

using ukdpack::DescriptorSet;
using ukdpack::LoaderOptions;
using ukdtest::dump;
using ukdtest::findDiag;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

// The generics with a UED 1.1 of slots prep, dkdv, dq; dkdv ranked by a UHD of its own.
void writeSlotted(const TempTree& t) {
  ukdtest::writeGenerics(t);
  Json e = ukdtest::ued();
  e["version"] = "1.1";
  e["slots"] = Json::array(
      {{{"name", "prep"}}, {{"name", "dkdv"}, {"sort_kernel_catalog", {{"default", "uhd-dkdv"}}}}, {{"name", "dq"}}});
  t.write("eng.ued.json", e);
  t.write("h/dkdv.uhd.json", Json{{"id", "uhd-dkdv"},
                                  {"version", "1.1"},
                                  {"name", "dkdv_order"},
                                  {"slot", "dkdv"},
                                  {"adapter", "static_order"},
                                  {"static_order", Json::object()}});
}

Json slotKdp(const std::string& id, const std::string& slot, const Json& kernels,
             const std::vector<std::string>& arch = {}) {
  Json p = ukdtest::kdp(id, kernels, "udd-1", "ued-1", arch);
  p["version"] = "1.1";
  p["slot"] = slot;
  return p;
}

// One KDP per slot of writeSlotted's engine, each of one kernel for every arch; the
// last names `dqSlot`.
void writeOneKernelPerSlot(const TempTree& t, const std::string& dqSlot = "dq") {
  t.write("prep.kdp.json", slotKdp("kdp-prep", "prep", Json::array({ukdtest::single("ukd-p", "p")})));
  t.write("dkdv.kdp.json", slotKdp("kdp-dkdv", "dkdv", Json::array({ukdtest::single("ukd-k", "k")})));
  t.write("dq.kdp.json", slotKdp("kdp-dq", dqSlot, Json::array({ukdtest::single("ukd-q", "q")})));
}

LoaderOptions authored(std::vector<std::string> arches = {}) {
  LoaderOptions o;
  o.authored = true;
  o.arches = std::move(arches);
  return o;
}

std::vector<const ukdpack::Pack*> packsOf(const DescriptorSet& set) {
  std::vector<const ukdpack::Pack*> out;
  for (const ukdpack::Pack& p : set.packs) out.push_back(&p);
  return out;
}

}  // namespace

TEST(Slots, AnEngineShipsForTheArchesItsKernelsRunOnAGenericFamilyForEachMember) {
  TempTree t;
  writeSlotted(t);
  t.write("prep.kdp.json",
          slotKdp("kdp-prep", "prep", Json::array({ukdtest::single("ukd-p", "p")}), {"gfx11-generic", "gfx90a"}));
  t.write("dkdv.kdp.json", slotKdp("kdp-dkdv", "dkdv", Json::array({ukdtest::single("ukd-k", "k")}), {"gfx1100"}));
  t.write("dq.kdp.json", slotKdp("kdp-dq", "dq", Json::array({ukdtest::single("ukd-q", "q")})));  // every arch
  // Without the empty-slot rule (a shard's load), to ask emptySlots directly.
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const ukdpack::Engine& e = *set.findEngine("ued-1");
  const auto gaps = ukdpack::emptySlots(e, packsOf(set));
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].slot, 1u);    // dkdv
  EXPECT_EQ(gaps[0].filler, 0u);  // prep ships there
  // gfx1100 is filled; the other members of gfx11-generic and gfx90a are not.
  EXPECT_EQ(gaps[0].arches, (std::vector<std::string>{"gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152",
                                                      "gfx1153", "gfx90a"}));
  // Asked arches only, feature suffixes dropped.
  const auto asked = ukdpack::emptySlots(e, packsOf(set), {"gfx90a:xnack-", "gfx1100"});
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].arches, std::vector<std::string>{"gfx90a"});
  EXPECT_EQ(ukdpack::emptySlotMessage(e, asked[0]),
            "engine 'test:eng' ships for gfx90a (its slot 'prep' has kernels there), but slot 'dkdv' holds no kernel "
            "for gfx90a; add a kernel for gfx90a to a KDP with \"slot\": \"dkdv\" (or take gfx90a out of the "
            "engine's other kernels)");
  // dq's kernels name no arch, so dq is first to fill any arch asked; its own gaps are none.
  const auto only = ukdpack::emptySlots(e, packsOf(set), {"gfx942"});
  ASSERT_EQ(only.size(), 2u);
  EXPECT_EQ(only[0].filler, 2u);
  EXPECT_EQ(only[0].slot, 0u);
  EXPECT_EQ(only[1].slot, 1u);
}

TEST(Slots, AnEngineWhoseKernelsNameNoArchNeedsAKernelInEverySlot) {
  TempTree t;
  writeSlotted(t);
  t.write("prep.kdp.json", slotKdp("kdp-prep", "prep", Json::array({ukdtest::single("ukd-p", "p")})));
  t.write("dkdv.kdp.json", slotKdp("kdp-dkdv", "dkdv", Json::array({ukdtest::single("ukd-k", "k")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::Engine& e = *set.findEngine("ued-1");
  const auto gaps = ukdpack::emptySlots(e, packsOf(set));
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].slot, 2u);
  EXPECT_EQ(gaps[0].arches, std::vector<std::string>{""});
  // An engine no pack names ships nowhere: no gap.
  EXPECT_TRUE(ukdpack::emptySlots(e, {}).empty());
}

TEST(Slots, TheLoaderJudgesEmptySlotsOnTheArchesPackedAndOnAuthoredTreesOnly) {
  TempTree t;
  writeSlotted(t);
  t.write("prep.kdp.json",
          slotKdp("kdp-prep", "prep", Json::array({ukdtest::single("ukd-p", "p")}), {"gfx90a", "gfx942"}));
  t.write("dkdv.kdp.json",
          slotKdp("kdp-dkdv", "dkdv", Json::array({ukdtest::single("ukd-k", "k")}), {"gfx90a", "gfx942"}));
  t.write("dq.kdp.json", slotKdp("kdp-dq", "dq", Json::array({ukdtest::single("ukd-q", "q")}), {"gfx942"}));
  const auto emptyOn = [&](const LoaderOptions& o) {
    const DescriptorSet set = ukdpack::loadShard(t.root(), o);
    return findDiag(set.diagnostics, "SLOT_EMPTY") != nullptr;
  };
  EXPECT_TRUE(emptyOn(authored()));
  EXPECT_TRUE(emptyOn(authored({"gfx90a"})));
  EXPECT_FALSE(emptyOn(authored({"gfx942"})));   // packing gfx942 alone: every slot is filled there
  EXPECT_FALSE(emptyOn(authored({"gfx1030"})));  // no kernel runs there: the engine does not ship
  EXPECT_FALSE(emptyOn(LoaderOptions{}));        // a shard: its runtime judges its own arch
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored({"gfx90a"}));
  const ukdpack::Diagnostic* d = findDiag(set.diagnostics, "SLOT_EMPTY");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->file, "eng.ued.json");
  EXPECT_EQ(d->jsonPath, "$.slots[2]");
  // The engine stays: the error fails the pack, and nothing else cascades from it.
  EXPECT_NE(set.findEngine("ued-1"), nullptr);
  EXPECT_EQ(set.packs.size(), 3u);
}

TEST(Slots, AKdpRefusedForItsSlotLeavesTheEmptySlotRuleToTheFix) {
  TempTree t;
  writeSlotted(t);
  writeOneKernelPerSlot(t, "dqq");
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  EXPECT_NE(findDiag(set.diagnostics, "SLOT_UNKNOWN", "did you mean 'dq'?"), nullptr) << dump(set.diagnostics);
  EXPECT_EQ(findDiag(set.diagnostics, "SLOT_EMPTY"), nullptr) << dump(set.diagnostics);
  EXPECT_EQ(set.findPack("kdp-dq"), nullptr);  // refused, as a pack with a dangling reference
  ASSERT_EQ(set.refusedPacks.size(), 1u);
}

TEST(Slots, ASlotsHeuristicsShipWithItsEngine) {
  TempTree t;
  writeSlotted(t);
  writeOneKernelPerSlot(t);
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const ukdpack::ShardContents c = ukdpack::shardContents(set, "gfx90a");
  std::vector<std::string> files;
  for (const ukdpack::DescriptorInfo* d : c.generics) files.push_back(d->file);
  EXPECT_NE(std::find(files.begin(), files.end(), "h/dkdv.uhd.json"), files.end());
  EXPECT_TRUE(ukdpack::unreachable(set).empty());
}

TEST(Slots, MetadataIsUniquePerSlotAndTheVerdictNamesThatSlotsKernels) {
  TempTree t;
  writeSlotted(t);
  // One FLOAT kernel in every slot (allowed); two in dkdv (refused). "a.kdp.json" loads
  // first, so a verdict keyed by engine alone would name its kernel.
  t.write("a.kdp.json", slotKdp("kdp-prep", "prep", Json::array({ukdtest::single("ukd-p", "p")})));
  t.write("dkdv.kdp.json",
          slotKdp("kdp-dkdv", "dkdv", Json::array({ukdtest::single("ukd-k1", "k1"), ukdtest::single("ukd-k2", "k2")})));
  t.write("dq.kdp.json", slotKdp("kdp-dq", "dq", Json::array({ukdtest::single("ukd-q", "q")})));
  ukdpack::ValidateOptions options;
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()}, options);
  std::size_t collisions = 0;
  for (const auto& d : r.diagnostics) collisions += d.code == "METADATA_NOT_UNIQUE" ? 1 : 0;
  ASSERT_EQ(collisions, 1u) << dump(r.diagnostics);
  EXPECT_NE(findDiag(r.diagnostics, "METADATA_NOT_UNIQUE", "of kernel 'k2' (id ukd-k2) equals that of kernel 'k1'"),
            nullptr)
      << dump(r.diagnostics);
  EXPECT_NE(findDiag(r.diagnostics, "METADATA_NOT_UNIQUE", "(slot 'dkdv'); the slot cannot tell them apart"), nullptr);
  const Json j = r.toJson();
  ASSERT_EQ(j.at("engine_verdicts").size(), 1u) << j.dump();
  EXPECT_EQ(j.at("engine_verdicts")[0].at("colliding_kernels"), Json::parse(R"([["ukd-k1", "ukd-k2"]])"));
}
