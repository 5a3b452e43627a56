#include <gtest/gtest.h>

#include "ukdpack/model/arch.hpp"
#include "ukdpack/model/descriptors.hpp"

using ukdpack::Json;

namespace {

Json multiLaunch() {
  return Json::parse(R"({
    "id": "k1", "version": "1.1", "name": "split", "priority": 0, "metadata": {},
    "sources": {
      "produce": {"kind": "hip", "source": "s.hip", "entry": "produce", "build": {}},
      "consume": {"kind": "hip", "source": "s.hip", "entry": "consume", "build": {}}}})");
}

Json singleLaunch() {
  return Json::parse(R"({
    "id": "k2", "version": "1.0", "name": "one", "priority": 3, "metadata": {"a": 1},
    "kernel_source": {"kind": "hip", "source": "s.hip", "entry": "one",
                      "build": {"defines": {"N": 4}, "flags": ["-O3"]}}})");
}

std::optional<ukdpack::Kernel> parse(const Json& j, std::vector<ukdpack::Diagnostic>& diags) {
  return ukdpack::parseKernel(j, ukdpack::KernelContext{"k.ukd.json", "$", {}}, diags);
}

bool mentions(const std::vector<ukdpack::Diagnostic>& diags, const std::string& fragment) {
  for (const auto& d : diags)
    if (d.str().find(fragment) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(LaunchHelpers, MultiLaunchKernelHasSortedNamesAndNoSingleSource) {
  std::vector<ukdpack::Diagnostic> diags;
  auto k = parse(multiLaunch(), diags);
  ASSERT_TRUE(k) << (diags.empty() ? "" : diags[0].str());
  EXPECT_EQ(ukdpack::launchNamesOf(*k), (std::set<std::string>{"consume", "produce"}));
  EXPECT_EQ(ukdpack::singleLaunchSource(*k), nullptr);
  int seen = 0;
  EXPECT_TRUE(ukdpack::allLaunchSources(*k, [&](const ukdpack::KernelSource& s) {
    ++seen;
    return s.kind == "hip";
  }));
  EXPECT_EQ(seen, 2);
  EXPECT_FALSE(ukdpack::allLaunchSources(
      *k, [](const ukdpack::KernelSource& s) { return s.fields.json()["entry"] == "produce"; }));
}

TEST(LaunchHelpers, SingleLaunchKernelHasEmptySetAndItsSource) {
  std::vector<ukdpack::Diagnostic> diags;
  auto k = parse(singleLaunch(), diags);
  ASSERT_TRUE(k);
  EXPECT_TRUE(ukdpack::launchNamesOf(*k).empty());
  const ukdpack::KernelSource* src = ukdpack::singleLaunchSource(*k);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->kind, "hip");
  EXPECT_EQ(src->fields.json()["entry"], "one");
  int seen = 0;
  EXPECT_TRUE(ukdpack::allLaunchSources(*k, [&](const ukdpack::KernelSource&) { return ++seen; }));
  EXPECT_EQ(seen, 1);
}

TEST(ParseKernel, RefusesBothShapesAndNeither) {
  Json both = multiLaunch();
  both["kernel_source"] = singleLaunch()["kernel_source"];
  std::vector<ukdpack::Diagnostic> diags;
  EXPECT_FALSE(parse(both, diags));
  EXPECT_TRUE(mentions(diags, "exactly one of 'kernel_source' and 'sources'"));

  Json neither = multiLaunch();
  neither.erase("sources");
  diags.clear();
  EXPECT_FALSE(parse(neither, diags));
  EXPECT_TRUE(mentions(diags, "missing required field 'kernel_source'"));
}

TEST(ParseKernel, SourcesRulesOfSpec32) {
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"one launch", [](Json& j) { j["sources"].erase("consume"); }, "at least two launches"},
      {"underscore name", [](Json& j) { j["sources"]["_x"] = j["sources"]["produce"]; },
       "$.sources._x: expected a launch name"},
      {"mixed kinds",
       [](Json& j) {
         j["sources"]["consume"] = Json{{"kind", "hsaco"}, {"file", "a.hsaco"}, {"symbol", "c"}};
         j["arch"] = {"gfx90a"};
       },
       "one kind, found hip {produce}, hsaco {consume}"},
      {"embedded launch",
       [](Json& j) {
         j["sources"]["consume"] = Json{{"kind", "embedded_source"}, {"source_file", "a"}, {"entry_point", "b"}};
       },
       "cannot be embedded_source"},
      {"role on hip", [](Json& j) { j["sources"]["consume"]["role"] = "x"; },
       "$.sources.consume.role: 'role' is a builder-only field"},
      {"version 1.0", [](Json& j) { j["version"] = "1.0"; }, "needs UKD version 1.1"},
      {"hsaco without arch",
       [](Json& j) {
         j["sources"]["consume"] = Json{{"kind", "hsaco"}, {"file", "a.hsaco"}, {"symbol", "c"}};
         j["sources"]["produce"] = Json{{"kind", "hsaco"}, {"file", "a.hsaco"}, {"symbol", "p"}};
       },
       "must name a non-empty arch"},
      {"unknown key", [](Json& j) { j["bogus"] = 1; }, "$.bogus: unknown key 'bogus'"},
  };
  for (const Case& c : cases) {
    Json j = multiLaunch();
    c.edit(j);
    std::vector<ukdpack::Diagnostic> diags;
    EXPECT_FALSE(parse(j, diags)) << c.what;
    EXPECT_TRUE(mentions(diags, c.fragment)) << c.what << ": " << (diags.empty() ? "" : diags[0].str());
  }
}

TEST(ParseKernel, ExtensionKeysAreCarried) {
  Json j = singleLaunch();
  j["x-note"] = "kept";
  j["_internal"] = {1, 2};
  j["kernel_source"]["x-flag"] = true;
  std::vector<ukdpack::Diagnostic> diags;
  EXPECT_TRUE(parse(j, diags));
  EXPECT_TRUE(diags.empty());
}

TEST(Arch, BareNamesAndFamilies) {
  EXPECT_EQ(ukdpack::bareArch("gfx90a:xnack-"), "gfx90a");
  EXPECT_EQ(ukdpack::bareArch("gfx1030"), "gfx1030");
  EXPECT_TRUE(ukdpack::isArchName("gfx90a"));
  EXPECT_TRUE(ukdpack::isArchName("gfx11-generic"));
  EXPECT_TRUE(ukdpack::isArchName("sm_90"));
  EXPECT_FALSE(ukdpack::isArchName("x86_64"));
  EXPECT_FALSE(ukdpack::isArchName("gfx90a:xnack-"));
  EXPECT_TRUE(ukdpack::targetRunsOn("gfx11-generic", "gfx1101"));
  EXPECT_FALSE(ukdpack::targetRunsOn("gfx11-generic", "gfx1030"));
  EXPECT_TRUE(ukdpack::targetRunsOn("gfx90a", "gfx90a:sramecc+"));
}

// A member is four words; what it owns is shared by its copies until one is
// edited, and an edit of a copy never shows through the original (or the reverse).
TEST(PackMember, CopiesShareUntilOneIsEdited) {
  EXPECT_LE(sizeof(ukdpack::PackMember), 6 * sizeof(void*));
  ukdpack::PackMember a;
  EXPECT_TRUE(a.ref().empty());
  EXPECT_TRUE(a.raw().isNull());
  EXPECT_TRUE(a.completedMetadata().is_null());
  EXPECT_TRUE(a.kernel().id.empty());
  a.editKernel().id = "ukd-a";
  a.setRef("ukd-a");
  a.setRaw(ukdpack::JsonText(Json{{"id", "ukd-a"}}));
  a.setCompletedMetadata(Json{{"block", 1}});
  ukdpack::PackMember b = a;
  EXPECT_EQ(&b.kernel(), &a.kernel());  // shared, not copied
  b.editKernel().id = "ukd-b";
  b.setRef("ukd-b");
  b.setRaw(ukdpack::JsonText(Json{{"id", "ukd-b"}}));
  b.editCompletedMetadata()["block"] = 2;
  EXPECT_EQ(a.kernel().id, "ukd-a");
  EXPECT_EQ(a.ref(), "ukd-a");
  EXPECT_EQ(a.raw().json(), (Json{{"id", "ukd-a"}}));
  EXPECT_EQ(a.completedMetadata(), (Json{{"block", 1}}));
  EXPECT_EQ(b.kernel().id, "ukd-b");
  EXPECT_EQ(b.ref(), "ukd-b");
  EXPECT_EQ(b.completedMetadata(), (Json{{"block", 2}}));
  ukdpack::PackMember c = a;
  a.setCompletedMetadata(Json{{"block", 3}});
  EXPECT_EQ(c.completedMetadata(), (Json{{"block", 1}}));
}
