// Selection (StateManager::select): the kept kernel whose pack's matchers all
// accept the problem, highest priority first, ties by the lower id.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
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
