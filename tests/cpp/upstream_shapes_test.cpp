// The descriptor shapes upstream hipDNN writes (UHD score/objective/bodies,
// string revisions, role maps, behavior notes) and the one refusal each legacy
// construct gets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"

using ukdpack::Diagnostic;
using ukdpack::Json;

namespace {

const ukdpack::DescriptorContext kCtx{"x.json", "$", {}};

std::vector<std::string> errorsOf(const std::vector<Diagnostic>& diags) {
  std::vector<std::string> out;
  for (const Diagnostic& d : diags)
    if (d.severity == ukdpack::Severity::Error) out.push_back(d.str());
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

Json nativeUhd() {
  return Json::parse(R"({"id": "h", "version": "1.0", "name": "h", "adapter": "native",
    "objective": "max", "score": {"metric": "tflops", "calibrated": true, "transform": "log1p"},
    "provenance": {"tool": "t"}, "native": {"symbol": "rank"}})");
}

Json treeUhd() {
  return Json::parse(R"({"id": "h", "version": "1.0", "name": "h", "adapter": "tree_data",
    "objective": "min", "score": {"metric": "time"},
    "features_signature": ["$m", {"mul": ["$m", "$n"]}], "features_hash": "sha256:0123456789abcdef",
    "trained_against": {"ued": {"id": "e", "revision": "1.0"}, "kmd": {"id": "k", "revision": "2.1"},
                        "umd": [{"id": "u", "revision": "1.0"}], "selector_revision": "abc"},
    "categorical_encoding": {"$dtype": {"FLOAT": 0, "HALF": 1}},
    "tree_data": {"artifact": "m.bin", "hash": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}})");
}

Json engine() { return Json::parse(R"({"id": "e", "version": "1.0", "name": "a:b", "metadata": "k"})"); }

std::vector<std::string> uhdErrors(const Json& doc) {
  std::vector<Diagnostic> diags;
  const auto h = ukdpack::parseHeuristic(doc, kCtx, diags);
  std::vector<std::string> errors = errorsOf(diags);
  EXPECT_EQ(h.has_value(), errors.empty()) << joined(errors);
  return errors;
}

std::vector<std::string> uedErrors(const Json& doc) {
  std::vector<Diagnostic> diags;
  const auto e = ukdpack::parseEngine(doc, kCtx, diags);
  std::vector<std::string> errors = errorsOf(diags);
  EXPECT_EQ(e.has_value(), errors.empty()) << joined(errors);
  return errors;
}

}  // namespace

TEST(UpstreamUhd, EveryAdapterAsUpstreamWritesItParses) {
  EXPECT_TRUE(uhdErrors(nativeUhd()).empty());
  EXPECT_TRUE(uhdErrors(treeUhd()).empty());
  Json table = treeUhd();
  table.erase("tree_data");
  table["adapter"] = "table";
  table["table"] = {{"artifact", "t.bin"}};
  EXPECT_TRUE(uhdErrors(table).empty());
  EXPECT_TRUE(uhdErrors(Json::parse(R"({"id": "h", "version": "1.0", "name": "h",
    "adapter": "static_order", "static_order": {}})"))
                  .empty());
  std::vector<Diagnostic> diags;
  const auto lib = ukdpack::parseHeuristic(Json::parse(R"({"id": "h", "version": "1.0", "name": "h",
    "adapter": "custom_library", "objective": "max",
    "custom_library": {"library": "libh.so", "symbol": "rank", "config": {}}})"),
                                           kCtx, diags);
  ASSERT_TRUE(lib) << joined(errorsOf(diags));
  EXPECT_EQ(lib->library, std::optional<std::string>("libh.so"));
  EXPECT_FALSE(lib->artifact);
  EXPECT_EQ(lib->symbol, std::optional<std::string>("rank"));
}

TEST(UpstreamUhd, ScoreMetricDecidesTheObjective) {
  Json doc = nativeUhd();
  doc["objective"] = "min";
  EXPECT_EQ(uhdErrors(doc),
            std::vector<std::string>{
                "x.json: $.objective: a score of metric 'tflops' is maximised: expected objective 'max', found 'min'"});
  doc = treeUhd();
  doc["objective"] = "max";
  ASSERT_EQ(uhdErrors(doc).size(), 1u);
  doc = nativeUhd();
  doc["score"] = "tflops";
  EXPECT_EQ(uhdErrors(doc), std::vector<std::string>{"x.json: $.score: expected object, found 'tflops'"});
}

TEST(UpstreamUhd, ObjectiveIsRequiredExceptForStaticOrder) {
  Json doc = nativeUhd();
  doc.erase("objective");
  doc.erase("score");
  EXPECT_EQ(uhdErrors(doc),
            std::vector<std::string>{"x.json: $: legacy form: a UHD without 'objective' (adapter 'native'); write "
                                     "\"objective\": \"max\" instead (`ukdpack migrate ROOT --out NEW` rewrites it)"});
}

TEST(UpstreamUhd, TrainedAdaptersNeedFeaturesAndTrainedAgainst) {
  for (const char* key : {"features_signature", "features_hash", "trained_against"}) {
    Json doc = treeUhd();
    doc.erase(key);
    const auto errors = uhdErrors(doc);
    ASSERT_EQ(errors.size(), 1u) << key;
    EXPECT_NE(errors[0].find(std::string("missing required field '") + key + "'"), std::string::npos);
  }
  Json doc = treeUhd();
  doc["features_hash"] = "sha256:0123";
  EXPECT_EQ(uhdErrors(doc).size(), 1u);
  doc = treeUhd();
  doc["trained_against"]["ued"]["revision"] = 1;
  EXPECT_EQ(uhdErrors(doc),
            std::vector<std::string>{
                "x.json: $.trained_against.ued.revision: expected a revision '<major>.<minor>', found integer 1"});
  doc = treeUhd();
  doc["categorical_encoding"]["$dtype"]["FLOAT"] = "0";
  EXPECT_EQ(uhdErrors(doc).size(), 1u);
}

TEST(UpstreamUhd, BodyHashIsASha256InEitherSpellingOrAnyOtherString) {
  EXPECT_EQ(ukdpack::statedSha256(std::string(64, 'A')), std::optional<std::string>(std::string(64, 'a')));
  EXPECT_EQ(ukdpack::statedSha256("sha256:" + std::string(64, '0')), std::optional<std::string>(std::string(64, '0')));
  EXPECT_FALSE(ukdpack::statedSha256("sha256:abc"));
  EXPECT_FALSE(ukdpack::statedSha256(std::string(63, '0')));
  EXPECT_FALSE(ukdpack::statedSha256(std::string(64, 'g')));
  Json doc = treeUhd();
  doc["tree_data"]["hash"] = "model-build-42";  // upstream carries any non-empty string
  EXPECT_TRUE(uhdErrors(doc).empty());
  doc["tree_data"]["hash"] = 7;
  EXPECT_EQ(uhdErrors(doc), std::vector<std::string>{"x.json: $.tree_data.hash: expected string, found integer 7"});
}

TEST(UpstreamUhd, TrainedAgainstNamesASetOrASelectorRevision) {
  Json doc = treeUhd();
  doc["trained_against"] = {{"selector_revision", "r"}, {"feature_semantics_revision", 3}};
  EXPECT_TRUE(uhdErrors(doc).empty());
  doc["trained_against"]["feature_semantics_revision"] = true;
  EXPECT_EQ(uhdErrors(doc).size(), 1u);
  doc["trained_against"] = Json::object();
  EXPECT_EQ(uhdErrors(doc).size(), 1u);
  doc["trained_against"] = {{"kmd", {{"id", "k"}, {"revision", "1.0"}}}};
  EXPECT_EQ(uhdErrors(doc).size(), 2u);  // ued and umd missing
}

TEST(UpstreamUhd, StaticOrderRefusesAnOrderAndTreeDataAFormat) {
  const auto errors = uhdErrors(Json::parse(R"({"id": "h", "version": "1.0", "name": "h",
    "adapter": "static_order", "static_order": {"order": ["a"]}})"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("$.static_order.order: static_order takes no 'order'"), std::string::npos);
  Json doc = treeUhd();
  doc["tree_data"]["format"] = "text";
  ASSERT_EQ(uhdErrors(doc).size(), 1u);
}

TEST(UpstreamUed, RevisionsAreMajorMinorStrings) {
  Json doc = engine();
  doc["revision"] = "1.2";
  std::vector<Diagnostic> diags;
  const auto e = ukdpack::parseEngine(doc, kCtx, diags);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->revision, std::optional<std::string>("1.2"));
  doc["revision"] = 1;
  EXPECT_EQ(uedErrors(doc),
            std::vector<std::string>{"x.json: $.revision: expected a revision '<major>.<minor>', found integer 1"});

  Json kmd = Json::parse(R"({"id": "k", "version": "1.0", "name": "k", "revision": "3.0", "fields": []})");
  diags.clear();
  const auto m = ukdpack::parseMetadataSchema(kmd, kCtx, diags);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->revision, std::optional<std::string>("3.0"));
  Json umd = Json::parse(R"({"id": "u", "version": "1.0", "name": "u", "revision": 1,
    "scope": "graph", "match_symbol": "m"})");
  diags.clear();
  EXPECT_FALSE(ukdpack::parseMatcher(umd, kCtx, diags));
}

TEST(UpstreamUed, BehaviorNotesAreAClosedVocabulary) {
  Json doc = engine();
  doc["behavior_notes"] = {"runtime_compilation"};
  EXPECT_TRUE(uedErrors(doc).empty());
  doc["behavior_notes"] = {"uses a workspace"};
  EXPECT_EQ(uedErrors(doc),
            std::vector<std::string>{
                "x.json: $.behavior_notes[0]: expected one of 'runtime_compilation', found 'uses a workspace'"});
}

TEST(UpstreamUed, RoleMapsTakeDistinctIdsAndApplicableKernelsOne) {
  Json doc = engine();
  doc["sort_kernel_catalog"] = {{"default", {"a", "b"}}};
  doc["predict_engine"] = {{"gfx90a", "c"}};
  doc["predict_applicable_kernels"] = {{"default", "d"}};
  doc["provenance"] = {{"from", "hkp"}};
  doc["graph_match"] = {{"native", "gm"}, {"provenance", {{"x", 1}}}};
  EXPECT_TRUE(uedErrors(doc).empty());
  doc["predict_engine"] = {{"default", {"a", "a"}}};
  EXPECT_EQ(uedErrors(doc), std::vector<std::string>{
                                "x.json: $.predict_engine.default: expected each UHD id once, found a repeated id"});
  doc = engine();
  doc["predict_applicable_kernels"] = {{"default", {"d"}}};
  EXPECT_EQ(uedErrors(doc),
            std::vector<std::string>{"x.json: $.predict_applicable_kernels.default: expected one UHD id, found array"});
}

TEST(UpstreamLoader, StaticOrderCannotServePredictEngine) {
  ukdpack::LoaderOptions options;
  options.authored = true;
  const ukdpack::DescriptorSet set =
      ukdpack::loadShard(std::string(UKDPACK_TEST_DATA_DIR) + "/corpus/ued_predict_engine_static_order/tree", options);
  std::vector<std::string> errors = errorsOf(set.diagnostics);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("eng.ued.json: $.predict_engine.gfx90a[1]: predict_engine cannot use UHD 's' "
                           "(s.uhd.json): its adapter 'static_order'"),
            std::string::npos)
      << errors[0];
}

// Each legacy construct: exactly one error, calling it a legacy form and naming the replacement.
TEST(Legacy, EachConstructIsOneRefusalNamingItsReplacement) {
  auto one = [](const std::vector<Diagnostic>& diags, const std::string& fragment) {
    const auto errors = errorsOf(diags);
    ASSERT_EQ(errors.size(), 1u) << joined(errors);
    EXPECT_NE(errors[0].find("legacy form: "), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find(fragment), std::string::npos) << errors[0];
  };
  std::vector<Diagnostic> diags;
  Json ued = engine();
  ued["heuristic"] = "h1";
  EXPECT_FALSE(ukdpack::parseEngine(ued, kCtx, diags));
  one(diags,
      "$.heuristic: legacy form: a UED 'heuristic'; write \"sort_kernel_catalog\": {\"default\": \"h1\"} instead "
      "(`ukdpack migrate ROOT --out NEW`");

  diags.clear();
  EXPECT_FALSE(ukdpack::parseHeuristic(Json::parse(R"({"id": "h", "version": "1.0", "name": "h",
    "kind": "native", "payload": "f"})"),
                                       kCtx, diags));
  one(diags, "\"adapter\": \"native\", \"native\": {\"symbol\": \"f\"}, \"objective\": \"max\"");

  const Json kernel = Json::parse(R"({"id": "k", "version": "1.0", "name": "k", "priority": 0,
    "metadata": {}, "kernel_source": {"kind": "hip", "source": "k.hip", "entry": "k", "build": {}}})");
  diags.clear();
  Json pack = {{"id", "p"},
               {"version", "1.0"},
               {"name", "p"},
               {"matchers", Json::array()},
               {"engine", nullptr},
               {"dispatch", nullptr},
               {"kernelDescriptors", {kernel}}};
  EXPECT_FALSE(ukdpack::parsePack(pack, kCtx, diags));
  one(diags, "$: legacy form: a KDP without 'arch'; write \"arch\": [] (every arch)");

  diags.clear();
  pack["arch"] = Json::array();
  pack["kernelDescriptors"][0].erase("version");
  const auto p = ukdpack::parsePack(pack, kCtx, diags);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->members.empty());
  one(diags, "$.kernelDescriptors[0]: legacy form: an inline UKD without 'version'; write \"version\": \"1.0\"");

  diags.clear();
  Json hsaco = kernel;
  hsaco["kernel_source"] = {{"kind", "hsaco_file"}, {"code_object_file", "k.co"}, {"code_object_symbol", "k"}};
  EXPECT_FALSE(ukdpack::parseKernel(hsaco, kCtx, diags));
  one(diags,
      "{\"kind\": \"hsaco\", \"file\": \"k.co\", \"symbol\": \"k\"} and name the prebuilt object's arches in the UKD's "
      "'arch'");

  for (const char* kind : {"rocke", "rocke_recipe", "rocke_builder"}) {
    diags.clear();
    Json rk = kernel;
    rk["kernel_source"] = {{"kind", kind}, {"recipe", "r.yaml"}};
    EXPECT_FALSE(ukdpack::parseKernel(rk, kCtx, diags));
    one(diags,
        std::string("the rocKE kind '") + kind + "'; write a 'builder' source whose module wraps the rocKE compiler");
    EXPECT_EQ(errorsOf(diags).at(0).find("ukdpack migrate"), std::string::npos);
  }
}
