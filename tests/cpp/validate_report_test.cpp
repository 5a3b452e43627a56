// The --json report of ukdpack-validate: ukdpack's own fields, upstream
// hipDNN's report fields beside them, and the engine verdicts.
#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "ukdpack/check/validate.hpp"

using ukdtest::dump;
using ukdtest::findDiag;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

ukdpack::ValidationReport run(const TempTree& t, const char* expect = nullptr) {
  ukdpack::ValidateOptions options;
  if (expect != nullptr) options.expectEngines = {expect};
  return ukdpack::validateRoots({t.root()}, options);
}

}  // namespace

TEST(ValidateReport, OkTreeCarriesUpstreamFieldsBesideOurs) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const Json j = run(t, "test:eng").toJson();
  EXPECT_EQ(j.at("format_version"), 2);
  EXPECT_EQ(j.at("success"), true);
  EXPECT_EQ(j.at("ok"), true);
  EXPECT_EQ(j.at("engines"), Json::array({"test:eng"}));
  EXPECT_EQ(j.at("expected_engines_missing"), Json::array());
  EXPECT_EQ(j.at("model_checks"), Json::array());
  EXPECT_EQ(j.at("packs_dropped"), 0);
  EXPECT_EQ(j.at("engines_dropped"), 0);
  ASSERT_EQ(j.at("engine_verdicts").size(), 1u);
  const Json& v = j.at("engine_verdicts")[0];
  EXPECT_EQ(v.at("engine"), "test:eng");
  EXPECT_EQ(v.at("id"), "ued-1");
  EXPECT_EQ(v.at("success"), true);
  EXPECT_EQ(v.at("dropped"), false);
  EXPECT_EQ(v.at("colliding_kernels"), Json::array());
  // The fields of format 1 stay.
  for (const char* key :
       {"roots", "packs", "kernels", "kept", "launches_verified", "dropped", "log", "diagnostics", "summary"})
    EXPECT_TRUE(j.contains(key)) << key;
}

TEST(ValidateReport, ExpectedEngineMissing) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const ukdpack::ValidationReport r = run(t, "other:eng");
  const Json j = r.toJson();
  EXPECT_EQ(j.at("success"), false);
  EXPECT_EQ(j.at("expected_engines_missing"), Json::array({"other:eng"}));
  EXPECT_EQ(j.at("engines"), Json::array({"test:eng"}));
  EXPECT_EQ(j.at("engines_dropped"), 0);
  EXPECT_NE(findDiag(r.diagnostics, "ENGINE_MISSING", "expected engine 'other:eng'"), nullptr);
}

TEST(ValidateReport, EngineWithCollidingMetadataIsReportedDroppedNamingBothKernels) {
  TempTree t;
  ukdtest::writeGenerics(t);
  // Same dtype, so the same completed metadata tuple under one engine.
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({ukdtest::single("ukd-b1", "b1")})));
  const ukdpack::ValidationReport r = run(t, "test:eng");
  // The loader's diagnostic keeps its wording.
  EXPECT_NE(findDiag(r.diagnostics, "METADATA_NOT_UNIQUE", "equals that of kernel 'a1'"), nullptr)
      << dump(r.diagnostics);
  const Json j = r.toJson();
  EXPECT_EQ(j.at("success"), false);
  EXPECT_EQ(j.at("engines"), Json::array());  // upstream leaves a dropped engine out of its sets
  EXPECT_EQ(j.at("expected_engines_missing"), Json::array({"test:eng"}));
  EXPECT_EQ(j.at("engines_dropped"), 1);
  EXPECT_EQ(j.at("packs_dropped"), 0);
  ASSERT_EQ(j.at("engine_verdicts").size(), 1u);
  const Json& v = j.at("engine_verdicts")[0];
  EXPECT_EQ(v.at("engine"), "test:eng");
  EXPECT_EQ(v.at("success"), false);
  EXPECT_EQ(v.at("dropped"), true);
  EXPECT_EQ(v.at("colliding_kernels"), Json::parse(R"([["ukd-a1", "ukd-b1"]])"));
  EXPECT_NE(v.at("reason").get<std::string>().find("'ukd-a1' and 'ukd-b1'"), std::string::npos) << v.dump();
  EXPECT_NE(r.summary().find("1 engine dropped"), std::string::npos) << r.summary();
}

TEST(ValidateReport, DroppedPackIsNotADroppedEngine) {
  TempTree t;
  Json newer = ukdtest::udd("udd-1", "sym_one");
  newer["version"] = "1.2";  // skipped: the pack that needs it is dropped, its engine is not
  ukdtest::writeGenerics(t, newer);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const ukdpack::ValidationReport r = run(t);
  ASSERT_NE(findDiag(r.diagnostics, "PACK_DROPPED"), nullptr) << dump(r.diagnostics);
  const Json j = r.toJson();
  EXPECT_EQ(j.at("success"), false);
  EXPECT_EQ(j.at("packs_dropped"), 1);
  EXPECT_EQ(j.at("engines_dropped"), 0);
  ASSERT_EQ(j.at("engine_verdicts").size(), 1u);
  EXPECT_EQ(j.at("engine_verdicts")[0].at("dropped"), false);
}

TEST(ValidateReport, DroppedEngineIsNotADroppedPack) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json newer = ukdtest::kmd();
  newer["version"] = "1.9";  // skipped: the engine that names it is dropped
  t.write("eng.kmd.json", newer);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const ukdpack::ValidationReport r = run(t);
  ASSERT_NE(findDiag(r.diagnostics, "ENGINE_DROPPED"), nullptr) << dump(r.diagnostics);
  std::size_t packDrops = 0;
  for (const ukdpack::Diagnostic& d : r.diagnostics) packDrops += d.code == "PACK_DROPPED" ? 1 : 0;
  const Json j = r.toJson();
  EXPECT_EQ(j.at("success"), false);
  EXPECT_EQ(j.at("engines_dropped"), 1);
  EXPECT_EQ(j.at("packs_dropped"), packDrops);  // packs only, the engine drop not among them
  ASSERT_EQ(j.at("engine_verdicts").size(), 1u);
  const Json& v = j.at("engine_verdicts")[0];
  EXPECT_EQ(v.at("engine"), "test:eng");
  EXPECT_EQ(v.at("dropped"), true);
  EXPECT_FALSE(v.at("reason").get<std::string>().empty());
}

// A finding of several arch passes is one line naming the arches it holds on (none
// named when it holds on all); findings that differ stay apart, and each drop line
// is logged once. A pack without a dispatch drops its kernels on every arch.
TEST(ValidateReport, FindingsOfSeveralArchesMergeIntoOneLineEach) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json both = ukdtest::single("ukd-both", "both");
  Json one = ukdtest::single("ukd-one", "one");
  one["arch"] = Json::array({"gfx942"});
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({both, one}), nullptr, "ued-1", {"gfx90a", "gfx942"}));
  const ukdpack::ValidationReport r = run(t);
  std::vector<std::string> drops;
  for (const ukdpack::Diagnostic& d : r.diagnostics)
    if (d.code == "NO_DISPATCH") drops.push_back(d.jsonPath + " " + d.message.substr(d.message.rfind('(')));
  EXPECT_EQ(drops, (std::vector<std::string>{"$.kernelDescriptors[0] (\"dispatch\": null), so no handler can launch it",
                                             "$.kernelDescriptors[1] (on gfx942)"}))
      << dump(r.diagnostics);
  EXPECT_EQ(r.log.size(), 2u) << ::testing::PrintToString(r.log);
}
