#include <gtest/gtest.h>

#include <functional>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/revision.hpp"
#include "ukdpack/plan/plan.hpp"

using ukdpack::DescriptorSet;
using ukdpack::KernelSource;
using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

std::string hex(char c) { return std::string(64, c); }

Json packedSource(const std::string& symbol, char digest, const std::string& toc = "k_000000000000") {
  return {{"kind", "kpack"},       {"library", "../kpack/kernels_gfx90a.kpack"},
          {"toc_key", toc},        {"symbol", symbol},
          {"sha256", hex(digest)}, {"signature", Json::array()}};
}

// A packed pack: a three-launch kernel (alpha sorts first, zeta last) and a
// single-launch kernel.
void writePacked(const TempTree& t, const std::vector<std::string>& order = {"alpha", "mid", "zeta"}) {
  ukdtest::writeGenerics(t);
  std::map<std::string, Json> entries = {{"alpha", packedSource("k_alpha", 'a', "k_aaaaaaaaaaaa")},
                                         {"mid", packedSource("k_mid", 'b')},
                                         {"zeta", packedSource("k_zeta", 'c', "k_cccccccccccc")}};
  // nlohmann sorts object keys, so order is given through the text itself.
  std::string sources = "{";
  for (const std::string& name : order) {
    sources += (sources.size() > 1 ? ", " : "") + Json(name).dump() + ": " + entries.at(name).dump();
  }
  sources += "}";
  const std::string multi = R"({"id": "ukd-m", "version": "1.1", "name": "m", "priority": 1,
      "metadata": {"dtype": "FLOAT"}, "arch": ["gfx90a"], "sources": )" +
                            sources + "}";
  Json single = {{"id", "ukd-s"},
                 {"version", "1.0"},
                 {"name", "s"},
                 {"priority", 0},
                 {"metadata", {{"dtype", "HALF"}}},
                 {"kernel_source", packedSource("k_single", 'd')}};
  Json pack = ukdtest::kdp("kdp-a", Json::array({single, "__MULTI__"}), "udd-1", "ued-1", {"gfx90a"});
  std::string text = pack.dump();
  text.replace(text.find("\"__MULTI__\""), 11, multi);
  t.write("ops/a.kdp.json", text);
}

DescriptorSet loadPacked(const TempTree& t) {
  DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
  EXPECT_EQ(set.packs.size(), 1u);
  return set;
}

std::string revision(const DescriptorSet& set) {
  auto r = ukdpack::selectorRevision(set, "kdp-a");
  EXPECT_TRUE(r) << (r ? "" : r.error().str());
  return r ? r.value() : "";
}

ukdpack::Kernel& kernelOf(DescriptorSet& set, const std::string& id) {
  for (auto& m : set.packs.at(0).members)
    if (m.kernel().id == id) return m.editKernel();
  throw std::runtime_error("no kernel " + id);
}

}  // namespace

TEST(SelectorRevision, IsStableAndIgnoresKeyOrderAndExtensionData) {
  TempTree a;
  TempTree b;
  writePacked(a, {"alpha", "mid", "zeta"});
  writePacked(b, {"zeta", "alpha", "mid"});
  const DescriptorSet sa = loadPacked(a);
  const DescriptorSet sb = loadPacked(b);
  const std::string ra = revision(sa);
  EXPECT_EQ(ra.size(), 64u);
  EXPECT_EQ(ra, revision(sa));
  EXPECT_EQ(ra, revision(sb));
  DescriptorSet extra = sa;
  Json raw = extra.packs[0].members[0].raw().json();
  raw["x-note"] = "not engine-visible";
  extra.packs[0].members[0].setRaw(raw);
  extra.packs[0].provenance = {{"origin", "elsewhere"}};
  EXPECT_EQ(revision(extra), ra);
  EXPECT_FALSE(ukdpack::selectorRevision(sa, "kdp-404"));
}

// Each field of each launch, one at a time, for the launch that sorts first,
// one in the middle, the last, and the one launch of a single-launch kernel.
TEST(SelectorRevision, ChangesForEveryFieldOfEveryLaunch) {
  TempTree t;
  writePacked(t);
  const DescriptorSet base = loadPacked(t);
  const std::string before = revision(base);
  using Edit = std::function<void(KernelSource&)>;
  const std::vector<std::pair<std::string, Edit>> fieldEdits = {
      {"kind", [](KernelSource& s) { s.kind = "hsaco"; }},
      {"toc_key", [](KernelSource& s) { s.tocKey += "x"; }},
      {"symbol", [](KernelSource& s) { s.symbol += "_v2"; }},
      {"sha256", [](KernelSource& s) { s.sha256[63] = s.sha256[63] == 'e' ? 'f' : 'e'; }},
  };
  for (const std::string launch : {"alpha", "mid", "zeta"}) {
    for (const auto& [field, edit] : fieldEdits) {
      DescriptorSet changed = base;
      edit(kernelOf(changed, "ukd-m").sources.at(launch));
      EXPECT_NE(revision(changed), before) << "launch " << launch << " field " << field;
    }
    // The launch name itself.
    DescriptorSet renamed = base;
    auto& sources = kernelOf(renamed, "ukd-m").sources;
    KernelSource moved = sources.at(launch);
    sources.erase(launch);
    sources.emplace(launch + "2", moved);
    EXPECT_NE(revision(renamed), before) << "launch " << launch << " renamed";
  }
  for (const auto& [field, edit] : fieldEdits) {
    DescriptorSet changed = base;
    edit(kernelOf(changed, "ukd-s").source);
    EXPECT_NE(revision(changed), before) << "single launch field " << field;
  }
  // Swapping two launches' contents is a change too, though the multiset of values is equal.
  DescriptorSet swapped = base;
  auto& src = kernelOf(swapped, "ukd-m").sources;
  std::swap(src.at("alpha").symbol, src.at("zeta").symbol);
  EXPECT_NE(revision(swapped), before);
}

TEST(SelectorRevision, ChangesForKernelAndPackFields) {
  TempTree t;
  writePacked(t);
  const DescriptorSet base = loadPacked(t);
  const std::string before = revision(base);
  const std::vector<std::pair<std::string, std::function<void(DescriptorSet&)>>> edits = {
      {"kernel id", [](DescriptorSet& s) { kernelOf(s, "ukd-m").id = "ukd-m2"; }},
      {"priority", [](DescriptorSet& s) { kernelOf(s, "ukd-m").priority = 2; }},
      {"metadata", [](DescriptorSet& s) { s.packs[0].members[1].editCompletedMetadata()["block"] = 128; }},
      {"arch", [](DescriptorSet& s) { kernelOf(s, "ukd-m").arch = std::vector<std::string>{"gfx90a", "gfx942"}; }},
      {"pack arch", [](DescriptorSet& s) { s.packs[0].arch = {"gfx90a", "gfx942"}; }},
      {"engine", [](DescriptorSet& s) { s.engines[0].name = "test:other"; }},
      {"dispatch symbol", [](DescriptorSet& s) { s.dispatches[0].dispatchSymbol = "sym_two"; }},
  };
  for (const auto& [what, edit] : edits) {
    DescriptorSet changed = base;
    edit(changed);
    EXPECT_NE(revision(changed), before) << what;
  }
  DescriptorSet renamed = base;
  renamed.packs[0].id = "kdp-b";
  EXPECT_NE(ukdpack::selectorRevision(renamed, renamed.packs[0]), before) << "pack id";
  EXPECT_EQ(ukdpack::selectorRevision(base, base.packs[0]), before);
  // The revision covers completed metadata: a default the KMD fills counts.
  const Json doc = ukdpack::selectorRevisionDocument(base, base.packs[0]);
  EXPECT_EQ(doc["kernels"][1]["metadata"], (Json{{"block", 256}, {"dtype", "FLOAT"}}));
  EXPECT_EQ(doc["kernels"][1]["launches"][0]["name"], "alpha");
  EXPECT_EQ(doc["kernels"][1]["launches"][2]["name"], "zeta");
  EXPECT_EQ(doc["kernels"][0]["launches"][0]["name"], "");
  EXPECT_EQ(doc["dispatch_symbol"], "sym_one");
}

// --------------------------------------------------------------------------- plans

TEST(PlanCapture, MultiLaunchKernelIsRefusedForHavingSeveralLaunches) {
  TempTree t;
  writePacked(t);
  const DescriptorSet set = loadPacked(t);
  auto refused = ukdpack::capturePlan(set, "ukd-m");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "PLAN_MULTI_LAUNCH");
  EXPECT_EQ(
      refused.error().message,
      "cannot save a plan of kernel 'm' (id ukd-m): the kernel has several launches {alpha, mid, zeta}, and a saved "
      "plan holds one launch");
  // Not mistaken for another kind even when the unused single `source` reads as a packed one.
  DescriptorSet tricked = set;
  kernelOf(tricked, "ukd-m").source.kind = "kpack";
  kernelOf(tricked, "ukd-m").source.tocKey = "k_fake";
  auto still = ukdpack::capturePlan(tricked, "ukd-m");
  ASSERT_FALSE(still);
  EXPECT_EQ(still.error().code, "PLAN_MULTI_LAUNCH");
}

TEST(PlanCapture, SingleLaunchPackedKernelGivesASmallPlan) {
  TempTree t;
  writePacked(t);
  const DescriptorSet set = loadPacked(t);
  auto plan = ukdpack::capturePlan(set, "ukd-s");
  ASSERT_TRUE(plan) << plan.error().str();
  EXPECT_EQ(plan.value().toJson(), (Json{{"kernel_id", "ukd-s"},
                                         {"kernel_name", "s"},
                                         {"toc_key", "k_000000000000"},
                                         {"symbol", "k_single"},
                                         {"library", "../kpack/kernels_gfx90a.kpack"},
                                         {"sha256", hex('d')}}));
  EXPECT_EQ(ukdpack::capturePlan(set, "ukd-404").error().code, "KERNEL_UNKNOWN");

  TempTree authored;
  ukdtest::writeGenerics(authored);
  authored.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  auto hip = ukdpack::capturePlan(ukdpack::loadShard(authored.root()), "ukd-a1");
  ASSERT_FALSE(hip);
  EXPECT_EQ(hip.error().code, "PLAN_NOT_PACKED");
  EXPECT_NE(hip.error().message.find("kind 'hip'"), std::string::npos);
}
