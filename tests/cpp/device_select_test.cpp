// Selection (StateManager::select): the kept kernel whose pack's matchers all
// accept the problem, highest priority first, ties by the lower id.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/shard_index.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdpack::Json;
using ukdpack::Registry;
using ukdpack::Result;
using ukdpack::StateManager;
using ukdtest::dump;
using ukdtest::TempTree;

namespace {

// Accepts a kernel whose metadata dtype is the problem's; counts its calls.
class DtypeMatcher : public ukdpack::MatchHandler {
 public:
  Result<bool> matches(const ukdpack::Kernel& kernel, const Json& problem) const override {
    asked.push_back(kernel.id);
    if (!problem.contains("dtype")) {
      return Result<bool>::failure(ukdpack::makeError("", "", "", "the problem names no dtype"));
    }
    return Result<bool>::success(kernel.metadata.value("dtype", "") == problem["dtype"]);
  }
  mutable std::vector<std::string> asked;
};

// Accepts problems of at most 1024 elements.
class SizeMatcher : public ukdpack::MatchHandler {
 public:
  Result<bool> matches(const ukdpack::Kernel&, const Json& problem) const override {
    return Result<bool>::success(problem.value("n", 0) <= 1024);
  }
};

// Each its own block size: the engine must tell kernels of one dtype apart.
Json kernel(const std::string& id, int priority, const std::string& dtype, int block) {
  Json k = ukdtest::single(id, id + "_k", dtype);
  k["priority"] = priority;
  k["metadata"]["block"] = block;
  return k;
}

// Pack A (matcher dtype): a1 p1 FLOAT, a2 p5 HALF. Pack B (matchers dtype and
// size): b1 p5 HALF, b2 p9 FLOAT. b-kernels come first in load order.
void writeTree(const TempTree& t) {
  ukdtest::writeGenerics(t);
  t.write("size.umd.json", ukdtest::umd("umd-2", "size_match"));
  Json b = ukdtest::kdp("kdp-b", Json::array({kernel("ukd-b1", 5, "HALF", 64), kernel("ukd-b2", 9, "FLOAT", 128)}));
  b["matchers"] = Json::array({"umd-1", "umd-2"});
  t.write("b.kdp.json", b);
  t.write("c.kdp.json",
          ukdtest::kdp("kdp-c", Json::array({kernel("ukd-a1", 1, "FLOAT", 256), kernel("ukd-a2", 5, "HALF", 512)})));
}

struct Fixture {
  TempTree tree;
  std::shared_ptr<DtypeMatcher> dtype = std::make_shared<DtypeMatcher>();

  StateManager manager(bool withSize = true) {
    writeTree(tree);
    const ukdpack::DescriptorSet set = ukdpack::loadShard(tree.root());
    EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
    Registry r;
    r.addDispatch("sym_one", std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{}));
    r.addMatcher("eng_match", dtype);
    if (withSize) r.addMatcher("size_match", std::make_shared<SizeMatcher>());
    StateManager sm(set, r, "");
    EXPECT_EQ(sm.kept().size(), 4u) << dump(sm.diagnostics());
    return sm;
  }
};

std::string picked(const StateManager& sm, const Json& problem) {
  auto r = sm.select(problem);
  if (!r) return "error: " + r.error().str();
  return r.value() == nullptr ? "none" : r.value()->kernel()->id;
}

}  // namespace

TEST(Select, TheHighestPriorityKernelEveryMatcherAccepts) {
  Fixture s;
  const StateManager sm = s.manager();
  EXPECT_EQ(picked(sm, {{"dtype", "FLOAT"}, {"n", 10}}), "ukd-b2");
  // b2's size matcher refuses: the next FLOAT kernel is a1.
  EXPECT_EQ(picked(sm, {{"dtype", "FLOAT"}, {"n", 4096}}), "ukd-a1");
  // a2 and b1 tie at priority 5: the lower id wins, whatever the load order.
  EXPECT_EQ(picked(sm, {{"dtype", "HALF"}, {"n", 10}}), "ukd-a2");
  EXPECT_EQ(picked(sm, {{"dtype", "HALF"}, {"n", 4096}}), "ukd-a2");
  EXPECT_EQ(picked(sm, {{"dtype", "INT"}}), "none");
}

TEST(Select, KernelsAreTriedInRankOrderAndMatchingStopsAtTheFirstAccepted) {
  Fixture s;
  const StateManager sm = s.manager();
  s.dtype->asked.clear();
  EXPECT_EQ(picked(sm, {{"dtype", "HALF"}, {"n", 10}}), "ukd-a2");
  EXPECT_EQ(s.dtype->asked, (std::vector<std::string>{"ukd-b2", "ukd-a2"}));
}

TEST(Select, AnUnregisteredMatcherFiltersNothing) {
  Fixture s;
  const StateManager sm = s.manager(/*withSize=*/false);
  EXPECT_NE(ukdtest::findDiag(sm.diagnostics(), "MATCHER_UNKNOWN", "size_match"), nullptr) << dump(sm.diagnostics());
  EXPECT_EQ(picked(sm, {{"dtype", "FLOAT"}, {"n", 4096}}), "ukd-b2");
}

TEST(Select, AFailingMatcherStopsTheSelectionNamingItAndTheKernel) {
  Fixture s;
  const StateManager sm = s.manager();
  auto r = sm.select({{"n", 1}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, "MATCHER_FAILED");
  EXPECT_EQ(r.error().message,
            "matcher 'eng_match' failed for kernel 'ukd-b2_k' (id ukd-b2) of pack 'kdp-b': the problem names no dtype");
}

TEST(Select, StubMatchersAcceptEveryProblem) {
  TempTree t;
  writeTree(t);
  const ukdpack::DescriptorSet set = ukdpack::loadShard(t.root());
  const StateManager sm(set, ukdpack::stubRegistry(set), "");
  EXPECT_EQ(picked(sm, Json::object()), "ukd-b2");
}

namespace {

// The kept kernels of the tree at `t` (`kept` of them) in the order a matcher that
// accepts none is asked them: every one, in rank order; and the state manager. With
// `throughIndex`, the tree gets a shard index first and is loaded through it: the state
// manager then takes the index's selection tables, made at its writing.
struct Ranked {
  std::unique_ptr<StateManager> sm;
  std::vector<std::string> asked;
};
Ranked rankedKernels(const TempTree& t, std::size_t kept, bool throughIndex = false) {
  if (throughIndex) {
    auto built = ukdpack::buildShardIndex(t.root());
    EXPECT_TRUE(built) << (built ? "" : built.error().str());
    if (built) std::ofstream(t.root() / ukdpack::kShardIndexFile, std::ios::binary) << built.value();
  }
  const ukdpack::DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
  EXPECT_EQ(set.selection != nullptr, throughIndex) << set.indexReason;
  Registry r;
  r.addDispatch("sym_one", std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{}));
  const auto dtype = std::make_shared<DtypeMatcher>();
  r.addMatcher("eng_match", dtype);
  Ranked out{std::make_unique<StateManager>(set, r, ""), {}};
  EXPECT_EQ(out.sm->kept().size(), kept) << dump(out.sm->diagnostics());
  EXPECT_EQ(picked(*out.sm, {{"dtype", "INT"}}), "none");
  out.asked = dtype->asked;
  return out;
}

}  // namespace

// The rank order at its edges: negative and multi-byte priorities, ids that share
// their first 8 bytes (the whole id decides), a shorter id that is a prefix of
// others, and a UUID written in upper case (ranked by its lower-case key).
TEST(Select, RankOrderIsPriorityThenIdKeyAtEveryEdge) {
  TempTree t;
  ukdtest::writeGenerics(t);
  const std::string upper = "5F0C2A9E-3B1D-4C6E-9A7F-0123456789AB";
  const std::string lower = "5f0c2a9e-0000-4c6e-9a7f-0123456789ab";
  t.write("r.kdp.json",
          ukdtest::kdp("kdp-r", Json::array({kernel("kernel-b", 0, "FLOAT", 1), kernel("kernel-a2", 0, "FLOAT", 2),
                                             kernel("kernel-a10", 0, "FLOAT", 3), kernel("kern", 0, "FLOAT", 4),
                                             kernel("neg-one", -1, "FLOAT", 5), kernel("neg-big", -70000, "FLOAT", 6),
                                             kernel("big", 70000, "FLOAT", 7), kernel(upper, 0, "FLOAT", 8),
                                             kernel(lower, 0, "FLOAT", 9), kernel("one", 1, "FLOAT", 10)})));
  for (const bool throughIndex : {false, true}) {
    SCOPED_TRACE(throughIndex ? "through the index" : "from the JSON");
    const Ranked ranked = rankedKernels(t, 10, throughIndex);
    const StateManager& sm = *ranked.sm;
    EXPECT_EQ(ranked.asked, (std::vector<std::string>{"big", "one", lower, upper, "kern", "kernel-a10", "kernel-a2",
                                                      "kernel-b", "neg-one", "neg-big"}));
    ASSERT_NE(sm.find(ukdpack::idKey(upper)), nullptr);
    EXPECT_EQ(sm.find(ukdpack::idKey(upper))->kernel()->id, upper);
    ASSERT_NE(sm.find(upper), nullptr);
    EXPECT_EQ(sm.find("kernel-a2")->kernel()->id, "kernel-a2");
    EXPECT_EQ(sm.find("kernel-a"), nullptr);
    for (const ukdpack::KernelDefinition& d : sm.kept()) EXPECT_EQ(sm.find(d.kernel()->id), &d) << d.kernel()->id;
  }
}

// Ids that are all UUIDs rank by priority, then the id's text, at the digits' edges
// ('9' against 'a') and where many ids share their first 8 digits (the ranking's
// radix passes sort on those 8 bytes; the whole ids settle the rest).
TEST(Select, RankOrderOfUuidIdsIsTheirTextsOrder) {
  TempTree t;
  ukdtest::writeGenerics(t);
  const std::string hex = "0123456789abcdef";
  std::vector<std::pair<int, std::string>> want;  // (-priority, id)
  Json kernels = Json::array();
  std::uint32_t x = 12345;
  for (int i = 0; i < 300; ++i) {
    std::string id;
    for (int d = 0; d < 32; ++d) {
      x = x * 1103515245u + 12345u;
      // The first 8 digits from few values (9, a, f, 0), so that many ids share them.
      id += d < 8 ? std::string("9af0").at((x >> 16) % (i % 3 == 0 ? 2 : 4)) : hex.at((x >> 16) % 16);
      if (d == 7 || d == 11 || d == 15 || d == 19) id += '-';
    }
    const int priority = static_cast<int>((x >> 20) % 4) - 1;
    kernels.push_back(kernel(id, priority, "FLOAT", i));
    want.emplace_back(-priority, id);
  }
  t.write("r.kdp.json", ukdtest::kdp("kdp-r", kernels));
  std::sort(want.begin(), want.end());
  std::vector<std::string> ids;
  for (const auto& [p, id] : want) ids.push_back(id);
  EXPECT_EQ(rankedKernels(t, 300).asked, ids);
  EXPECT_EQ(rankedKernels(t, 300, true).asked, ids);
}
