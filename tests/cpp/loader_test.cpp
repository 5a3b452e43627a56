#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"

using ukdpack::DescriptorSet;
using ukdpack::LoaderOptions;
using ukdpack::Severity;
using ukdtest::dump;
using ukdtest::findDiag;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

LoaderOptions ukd10Reader() {
  LoaderOptions o;
  o.maxVersions.ukd = {1, 0};
  return o;
}

std::vector<std::string> kernelIds(const ukdpack::Pack& p) {
  std::vector<std::string> out;
  for (const auto& m : p.members) out.push_back(m.kernel().id);
  return out;
}

}  // namespace

TEST(Loader, LoadsAValidTreeWithEveryReference) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("sub/a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  ASSERT_EQ(set.packs.size(), 1u);
  const ukdpack::Pack& p = set.packs[0];
  EXPECT_EQ(p.file, "sub/a.kdp.json");
  ASSERT_NE(set.dispatchOf(p), nullptr);
  EXPECT_EQ(set.dispatchOf(p)->dispatchSymbol, "sym_one");
  ASSERT_NE(set.engineOf(p), nullptr);
  EXPECT_EQ(set.engineOf(p)->name, "test:eng");
  ASSERT_EQ(p.members.size(), 1u);
  const ukdpack::Kernel& k = p.members[0].kernel();
  EXPECT_EQ(k.file, "sub/a.kdp.json");
  EXPECT_EQ(k.jsonPath, "$.kernelDescriptors[0]");
  EXPECT_EQ(k.baseDir, (t.root() / "sub").lexically_normal());
  EXPECT_EQ(set.rootOf(p.members[0]), t.root());
  // The KMD's default is filled in.
  EXPECT_EQ(p.members[0].completedMetadata(), (Json{{"dtype", "FLOAT"}, {"block", 256}}));
}

TEST(Loader, StandaloneKernelKeepsItsOwnFileAndFolder) {
  TempTree t;
  ukdpack::Json ukd = ukdtest::single("ukd-s1", "s1");
  ukdtest::writeGenerics(t);
  t.write("kernels/deep/s1.ukd.json", ukd);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({"ukd-s1"})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  ASSERT_EQ(set.packs.size(), 1u);
  ASSERT_EQ(set.packs[0].members.size(), 1u);
  const ukdpack::PackMember& m = set.packs[0].members[0];
  EXPECT_EQ(m.ref(), "ukd-s1");
  EXPECT_EQ(m.kernel().file, "kernels/deep/s1.ukd.json");
  EXPECT_EQ(m.kernel().jsonPath, "$");
  EXPECT_EQ(m.kernel().baseDir, (t.root() / "kernels/deep").lexically_normal());
}

TEST(Loader, KernelsKeepKernelDescriptorsOrderAcrossInlineAndStandalone) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("s.ukd.json", ukdtest::single("ukd-s", "s", "HALF"));
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-1", "one"), "ukd-s",
                                                           ukdtest::single("ukd-3", "three", "INT")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  EXPECT_EQ(kernelIds(set.packs.at(0)), (std::vector<std::string>{"ukd-1", "ukd-s", "ukd-3"}));
}

// --------------------------------------------------------------------------- versions

TEST(LoaderVersions, OlderUkdReaderSkipsNewerKernelsAndKeepsTheRestOfThePack) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("mixed.kdp.json",
          ukdtest::kdp("kdp-mixed", Json::array({ukdtest::single("ukd-old", "old"),
                                                 ukdtest::multi("ukd-new", "new", {"produce", "consume"})})));
  const DescriptorSet set = ukdpack::loadShard(t.root(), ukd10Reader());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  ASSERT_EQ(set.packs.size(), 1u);
  EXPECT_EQ(kernelIds(set.packs[0]), std::vector<std::string>{"ukd-old"});
  const ukdpack::Diagnostic* w = findDiag(set.diagnostics, "VERSION_SKIPPED");
  ASSERT_NE(w, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(w->severity, Severity::Warning);
  EXPECT_EQ(w->file, "mixed.kdp.json");
  EXPECT_EQ(w->jsonPath, "$.kernelDescriptors[1]");
  EXPECT_NE(w->message.find("kernel 'new'"), std::string::npos) << w->message;
  EXPECT_NE(w->message.find("UKD version 1.1"), std::string::npos) << w->message;
  EXPECT_NE(w->message.find("UKD 1.0)"), std::string::npos) << w->message;  // what this build reads

  // The default reader reads both.
  const DescriptorSet all = ukdpack::loadShard(t.root());
  ASSERT_EQ(all.packs.size(), 1u);
  EXPECT_EQ(kernelIds(all.packs[0]), (std::vector<std::string>{"ukd-old", "ukd-new"}));
  EXPECT_EQ(findDiag(all.diagnostics, "VERSION_SKIPPED"), nullptr);
}

TEST(LoaderVersions, PackOfOnlyNewerKernelsIsDroppedWithAWarning) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  t.write("b.kdp.json",
          ukdtest::kdp("kdp-b", Json::array({ukdtest::multi("ukd-b1", "b1", {"produce", "consume"}),
                                             ukdtest::multi("ukd-b2", "b2", {"produce", "consume"}, "INT")})));
  const DescriptorSet set = ukdpack::loadShard(t.root(), ukd10Reader());
  EXPECT_TRUE(set.ok()) << dump(set.diagnostics);  // warnings only
  ASSERT_EQ(set.packs.size(), 1u);
  EXPECT_EQ(set.packs[0].id, "kdp-a");
  const ukdpack::Diagnostic* d = findDiag(set.diagnostics, "PACK_DROPPED", "kdp-b");
  ASSERT_NE(d, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(d->severity, Severity::Warning);
  EXPECT_EQ(d->file, "b.kdp.json");
  int skipped = 0;
  for (const auto& diag : set.diagnostics) skipped += diag.code == "VERSION_SKIPPED" ? 1 : 0;
  EXPECT_EQ(skipped, 2);
}

TEST(LoaderVersions, NewerFileIsSkippedNamingPathVersionAndReader) {
  TempTree t;
  Json newer = ukdtest::udd("udd-1", "sym_one");
  newer["version"] = "1.2";
  ukdtest::writeGenerics(t, newer);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::Diagnostic* w = findDiag(set.diagnostics, "VERSION_SKIPPED");
  ASSERT_NE(w, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(w->message, "skipping one.udd.json: UDD version 1.2 is newer than this build reads (UDD 1.0, 1.1)");
  // The pack cannot be served without its dispatch: dropped, with the reason, not an unresolved id.
  EXPECT_TRUE(set.packs.empty());
  EXPECT_NE(findDiag(set.diagnostics, "PACK_DROPPED", "'udd-1' (one.udd.json) was skipped"), nullptr)
      << dump(set.diagnostics);
  EXPECT_EQ(findDiag(set.diagnostics, "UNRESOLVED_REF"), nullptr) << dump(set.diagnostics);

  Json otherMajor = ukdtest::udd("udd-1", "sym_one");
  otherMajor["version"] = "2.0";
  t.write("one.udd.json", otherMajor);
  const DescriptorSet again = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(again.diagnostics, "VERSION_SKIPPED", "UDD version 2.0 is another major version"), nullptr)
      << dump(again.diagnostics);
}

TEST(LoaderVersions, MalformedVersionIsAnErrorWordedAsTheSchema) {
  TempTree t;
  Json bad = ukdtest::kmd();
  bad["version"] = "1";
  ukdtest::writeGenerics(t);
  t.write("eng.kmd.json", bad);
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::Diagnostic* e = findDiag(set.diagnostics, "SCHEMA", "KMD version");
  ASSERT_NE(e, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(e->str(), "eng.kmd.json: $.version: expected a KMD version this ukdpack reads (1.0), found '1'");
}

// --------------------------------------------------------------------------- shape

TEST(LoaderShape, UnknownKeysAreRefusedExtensionKeysAreCarried) {
  TempTree t;
  Json dispatch = ukdtest::udd("udd-1", "sym_one");
  dispatch["x-owner"] = "team";
  dispatch["_note"] = 1;
  ukdtest::writeGenerics(t, dispatch);
  Json k = ukdtest::single("ukd-a1", "a1");
  k["x-tuning"] = {{"tile", 4}};
  Json pack = ukdtest::kdp("kdp-a", Json::array({k}));
  pack["_comment"] = "carried";
  pack["provenance"] = {{"origin", "test"}};
  t.write("a.kdp.json", pack);
  const DescriptorSet ok = ukdpack::loadShard(t.root());
  ASSERT_TRUE(ok.ok()) << dump(ok.diagnostics);
  ASSERT_EQ(ok.packs.size(), 1u);
  EXPECT_EQ(ok.packs[0].raw.at("_comment"), "carried");
  // The kernels live in the members, not twice.
  EXPECT_FALSE(ok.packs[0].raw.contains("kernelDescriptors"));
  EXPECT_EQ(ok.packs[0].provenance.at("origin"), "test");
  EXPECT_EQ(ok.packs[0].members.at(0).raw().json().at("x-tuning").at("tile"), 4);
  EXPECT_EQ(ok.dispatches.at(0).raw.at("x-owner"), "team");

  dispatch["owner"] = "team";
  t.write("one.udd.json", dispatch);
  const DescriptorSet bad = ukdpack::loadShard(t.root());
  const ukdpack::Diagnostic* e = findDiag(bad.diagnostics, "SCHEMA", "unknown key 'owner'");
  ASSERT_NE(e, nullptr) << dump(bad.diagnostics);
  EXPECT_EQ(e->str(), "one.udd.json: $.owner: unknown key 'owner'; extension keys start with 'x-' or '_'");
  EXPECT_TRUE(bad.dispatches.empty());
  EXPECT_TRUE(bad.packs.empty());  // its dispatch did not load
}

TEST(LoaderShape, MalformedInlineKernelDropsOnlyThatKernel) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json bad = ukdtest::single("ukd-bad", "bad", "HALF");
  bad["bogus"] = true;
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1"), bad})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::Diagnostic* e = findDiag(set.diagnostics, "SCHEMA", "unknown key 'bogus'");
  ASSERT_NE(e, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(e->jsonPath, "$.kernelDescriptors[1].bogus");
  ASSERT_EQ(set.packs.size(), 1u);
  EXPECT_EQ(kernelIds(set.packs[0]), std::vector<std::string>{"ukd-a1"});
}

TEST(LoaderShape, ParsersWordRefusalsAsTheSchemas) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json engine = ukdtest::ued();
  engine["name"] = "eng";
  engine["sdk_version"] = "1.2";
  engine["sort_kernel_catalog"] = {{"fast", "uhd-1"}};
  t.write("eng.ued.json", engine);
  Json matcher = ukdtest::umd();
  matcher["scope"] = "node";
  t.write("eng.umd.json", matcher);
  Json dispatch = ukdtest::udd("udd-1", "sym_one");
  dispatch.erase("dispatch_symbol");
  t.write("one.udd.json", dispatch);
  Json pack = ukdtest::kdp("kdp-a", Json::array({7}));
  pack["arch"] = {"gfx90a:xnack-"};
  pack["engine"] = 5;
  t.write("a.kdp.json", pack);
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array()));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const std::string all = dump(set.diagnostics);
  for (const char* want : {
           "eng.ued.json: $.name: expected a scoped engine name 'namespace:local', found 'eng'",
           "eng.ued.json: $.sdk_version: expected a version 'MAJOR.MINOR.PATCH', found '1.2'",
           "eng.ued.json: $.sort_kernel_catalog.fast: expected an arch id or 'default', found 'fast'",
           "eng.umd.json: $.scope: expected one of 'graph', 'kernel', found 'node'",
           "one.udd.json: $: missing required field 'dispatch_symbol'",
           "a.kdp.json: $.arch[0]: expected a bare arch id such as gfx90a or sm_90, found 'gfx90a:xnack-'",
           "a.kdp.json: $.engine: expected a UED id or null, found integer 5",
           "a.kdp.json: $.kernelDescriptors[0]: expected an inline UKD object or the id string of a standalone "
           "UKD, found integer 7",
           "b.kdp.json: $.kernelDescriptors: expected at least one kernel, found an empty list",
       }) {
    EXPECT_NE(all.find(want), std::string::npos) << "missing: " << want << "\n" << all;
  }
  EXPECT_TRUE(set.packs.empty());
}

TEST(LoaderShape, KmdAndUhdRules) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json md = ukdtest::kmd();
  md["fields"].push_back({{"name", "dtype"}, {"type", "int"}});
  md["fields"][1]["default_value"] = "big";
  t.write("eng.kmd.json", md);
  t.write("h/x.uhd.json", Json{{"id", "uhd-1"},
                               {"version", "1.0"},
                               {"name", "h"},
                               {"adapter", "native"},
                               {"table", {{"artifact", "t.bin"}}}});
  t.write("h/y.uhd.json", Json{{"id", "uhd-2"},
                               {"version", "1.0"},
                               {"name", "h2"},
                               {"adapter", "tree_data"},
                               {"objective", "min"},
                               {"features_signature", {"$m"}},
                               {"features_hash", "sha256:0123456789abcdef"},
                               {"trained_against", {{"selector_revision", "r1"}}},
                               {"tree_data", {{"artifact", "x.model"}}}});
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const std::string all = dump(set.diagnostics);
  for (const char* want : {
           "eng.kmd.json: $.fields[1].default_value: expected integer, found 'big'",
           "eng.kmd.json: $.fields[2].name: field 'dtype' is defined twice",
           "h/x.uhd.json: $: missing required field 'native' (the body of adapter 'native')",
           "h/x.uhd.json: $.table: adapter 'native' takes exactly one body, 'native', found 'table' too",
           "h/y.uhd.json: $.tree_data.artifact: artifact 'x.model' not found: expected h/x.model",
       }) {
    EXPECT_NE(all.find(want), std::string::npos) << "missing: " << want << "\n" << all;
  }
}

TEST(LoaderShape, DuplicateKeysAreRefused) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("one.udd.json",
          std::string(R"({"id": "udd-1", "version": "1.0", "name": "a", "name": "b", "dispatch_symbol": "s"})"));
  // Nested: a duplicate inside an inline kernel's metadata counts too.
  t.write("a.kdp.json", std::string(R"({"id": "kdp-a", "version": "1.0", "name": "kdp-a", "arch": [],
      "matchers": [], "engine": null, "dispatch": null, "kernelDescriptors": [
        {"id": "k", "version": "1.0", "name": "k", "priority": 0, "metadata": {"a": 1, "a": 2},
         "kernel_source": {"kind": "hip", "source": "k.hip", "entry": "k", "build": {}}}]})"));
  // The same key in two different objects is fine.
  t.write("ok.kdp.json", std::string(R"({"id": "kdp-ok", "version": "1.0", "name": "ok", "arch": [],
      "matchers": [], "engine": null, "dispatch": null, "kernelDescriptors": [
        {"id": "k2", "version": "1.0", "name": "k2", "priority": 0, "metadata": {"name": 1},
         "kernel_source": {"kind": "hip", "source": "k.hip", "entry": "k", "build": {}}}]})"));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const ukdpack::Diagnostic* d = findDiag(set.diagnostics, "DUPLICATE_KEY", "one.udd.json");
  ASSERT_NE(d, nullptr) << dump(set.diagnostics);
  EXPECT_EQ(d->str(), "one.udd.json: $: duplicate key 'name' in one object");
  EXPECT_NE(findDiag(set.diagnostics, "DUPLICATE_KEY",
                     "a.kdp.json: $.kernelDescriptors[0].metadata: duplicate key 'a' in one object"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_EQ(findDiag(set.diagnostics, "", "ok.kdp.json"), nullptr) << dump(set.diagnostics);
  ASSERT_NE(set.findPack("kdp-ok"), nullptr);
  EXPECT_EQ(set.findPack("kdp-a"), nullptr);
}

TEST(LoaderShape, CommentsAreAcceptedAndBadTextIsNamed) {
  const auto ok = ukdpack::parseDescriptorText("// a comment\n{\"a\": /* inline */ 1}\n");
  ASSERT_TRUE(ok) << ok.error().str();
  EXPECT_EQ(ok.value().at("a"), 1);
  const auto open = ukdpack::parseDescriptorText("{\"a\": 1 /* never closed\n}");
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().message, "unterminated /* comment starting on line 1");
  const auto bad = ukdpack::parseDescriptorText("{no");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "JSON_SYNTAX");
  EXPECT_EQ(bad.error().message.rfind("not valid JSON: ", 0), 0u) << bad.error().message;
  const auto latin1 = ukdpack::parseDescriptorText(std::string("{\"a\": \"caf\xe9\"}"));
  ASSERT_FALSE(latin1);
  EXPECT_EQ(latin1.error().message, "not UTF-8 text: byte 10 cannot be decoded");
}

// --------------------------------------------------------------------------- references

TEST(LoaderReferences, UnresolvedReferencesDropThePack) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")}), "udd-404"));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({ukdtest::single("ukd-b1", "b1", "HALF"), "ukd-404"})));
  Json c = ukdtest::kdp("kdp-c", Json::array({ukdtest::single("ukd-c1", "c1", "INT")}), "udd-1", "kmd-1");
  t.write("c.kdp.json", c);
  Json d = ukdtest::kdp("kdp-d", Json::array({"ukd-a1"}), "udd-1", nullptr);
  d["matchers"] = {"umd-404"};
  t.write("d.kdp.json", d);
  t.write("ok.kdp.json", ukdtest::kdp("kdp-ok", Json::array({ukdtest::single("ukd-ok", "ok", "BF16")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  const std::string all = dump(set.diagnostics);
  for (const char* want : {
           "a.kdp.json: $.dispatch: 'udd-404' names no descriptor of this root; expected the id of a UDD",
           "b.kdp.json: $.kernelDescriptors[1]: 'ukd-404' names no descriptor of this root; expected the id of a UKD",
           "c.kdp.json: $.engine: 'kmd-1' is a KMD (eng.kmd.json), expected the id of a UED",
           "d.kdp.json: $.matchers[0]: 'umd-404' names no descriptor",
           "d.kdp.json: $.kernelDescriptors[0]: 'ukd-a1' is an inline UKD of a.kdp.json; only standalone UKDs",
       }) {
    EXPECT_NE(all.find(want), std::string::npos) << "missing: " << want << "\n" << all;
  }
  ASSERT_EQ(set.packs.size(), 1u) << all;
  EXPECT_EQ(set.packs[0].id, "kdp-ok");
}

TEST(LoaderReferences, EngineReferencesResolve) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json engine = ukdtest::ued("ued-1", "kmd-404");
  engine["knobs"] = {"tile"};
  t.write("eng.ued.json", engine);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(set.diagnostics, "UNRESOLVED_REF", "eng.ued.json: $.metadata: 'kmd-404' names no descriptor"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_TRUE(set.engines.empty());
  EXPECT_TRUE(set.packs.empty()) << dump(set.diagnostics);

  engine["metadata"] = "kmd-1";
  t.write("eng.ued.json", engine);
  const DescriptorSet knob = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(knob.diagnostics, "UNRESOLVED_REF",
                     "$.knobs[0]: knob 'tile' is no field of KMD 'eng_md' (eng.kmd.json); expected one of 'dtype', "
                     "'block'"),
            nullptr)
      << dump(knob.diagnostics);
  EXPECT_TRUE(knob.packs.empty());
}

TEST(LoaderReferences, IdsAreUniqueAndUuidsCompareCaseInsensitively) {
  TempTree t;
  ukdtest::writeGenerics(t);
  const std::string uuid = "3f2a0c4e-1b2d-4c3e-9f00-aabbccddeeff";
  std::string upper = uuid;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  t.write("a.kdp.json",
          ukdtest::kdp("kdp-a", Json::array({ukdtest::single(uuid, "a1"), ukdtest::single(upper, "a2", "HALF")})));
  t.write("z.udd.json", ukdtest::udd("kmd-1", "sym_b"));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(set.diagnostics, "DUPLICATE_ID",
                     "a.kdp.json: $.kernelDescriptors[1].id: id '" + upper +
                         "' is already used by a.kdp.json ($.kernelDescriptors[0])"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "DUPLICATE_ID", "z.udd.json: $.id: id 'kmd-1' is already used by eng.kmd.json"),
            nullptr)
      << dump(set.diagnostics);
  ASSERT_EQ(set.packs.size(), 1u);
  EXPECT_EQ(set.packs[0].members.size(), 1u);
  EXPECT_NE(set.findKernel(upper), nullptr);  // lookups ignore UUID case too
  // Non-UUID ids compare verbatim.
  EXPECT_EQ(ukdpack::idKey("Kdp-A"), "Kdp-A");
  EXPECT_EQ(ukdpack::idKey(upper), uuid);
}

TEST(LoaderReferences, KernelBelongsToOnePackAndArchIsASubset) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("s.ukd.json", ukdtest::single("ukd-s", "s", "HALF"));
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({"ukd-s"})));
  Json k = ukdtest::single("ukd-b1", "b1");
  k["arch"] = {"gfx1030"};
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({"ukd-s", k, ukdtest::single("ukd-b2", "b2", "INT")}),
                                     "udd-1", "ued-1", {"gfx90a"}));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(set.diagnostics, "DUPLICATE_MEMBER", "a kernel belongs to one pack"), nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "ARCH_NOT_SUBSET",
                     "b.kdp.json: $.kernelDescriptors[1].arch: arch 'gfx1030' not in its KDP's arch [gfx90a]"),
            nullptr)
      << dump(set.diagnostics);
  ASSERT_NE(set.findPack("kdp-b"), nullptr);
  EXPECT_EQ(kernelIds(*set.findPack("kdp-b")), std::vector<std::string>{"ukd-b2"});
  EXPECT_EQ(kernelIds(*set.findPack("kdp-a")), std::vector<std::string>{"ukd-s"});
}

TEST(LoaderReferences, MetadataFillsTheKmdAndIsUniquePerEngineAndArch) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json typed = ukdtest::single("ukd-t", "t", "INT");
  typed["metadata"]["block"] = true;
  Json same = ukdtest::single("ukd-same", "same");  // FLOAT, as a1
  Json gfx90a = ukdtest::single("ukd-90a", "on90a", "HALF");
  gfx90a["arch"] = {"gfx90a"};
  Json gfx1030 = ukdtest::single("ukd-1030", "on1030", "HALF");  // same metadata, other arch
  gfx1030["arch"] = {"gfx1030"};
  t.write("a.kdp.json",
          ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1"), typed, same, gfx90a, gfx1030})));
  const DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(set.diagnostics, "METADATA",
                     "$.kernelDescriptors[1].metadata.block: expected int (KMD 'eng_md' field), found boolean true"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "METADATA_NOT_UNIQUE",
                     "$.kernelDescriptors[2].metadata: completed metadata {\"block\": 256, \"dtype\": \"FLOAT\"} "
                     "of kernel 'same' (id ukd-same) equals that of kernel 'a1' (id ukd-a1) (a.kdp.json: "
                     "$.kernelDescriptors[0]) under engine 'test:eng'; the engine cannot tell them apart"),
            nullptr)
      << dump(set.diagnostics);
  // Disjoint arches never share a shard.
  EXPECT_EQ(findDiag(set.diagnostics, "METADATA_NOT_UNIQUE", "on1030"), nullptr) << dump(set.diagnostics);
  EXPECT_EQ(findDiag(set.diagnostics, "METADATA_NOT_UNIQUE", "kernelDescriptors[4]"), nullptr) << dump(set.diagnostics);
}

// --------------------------------------------------------------------------- walk

TEST(LoaderWalk, SkipsAreSaidAndTheArchiveFolderIsNotWalked) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  t.write(".hidden/x.kdp.json", std::string("{broken"));
  t.write("sub/.x.kdp.json", std::string("{broken"));
  t.write("notes.json", std::string("{}"));
  t.write("README.md", std::string("not a descriptor"));
  t.write("kpack/kernels_gfx90a.kpack", std::string("KPAK"));
  t.write("old/broken.kdp.json", std::string("{broken"));
  std::filesystem::create_directories(t.path("elsewhere"));
  t.write("elsewhere/e.udd.json", std::string("{broken"));
  std::filesystem::create_directory_symlink(t.path("elsewhere"), t.path("linked"));

  LoaderOptions options;
  options.excludeFolders = {"old", "elsewhere"};
  const DescriptorSet set = ukdpack::loadShard(t.root(), options);
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const std::string all = dump(set.diagnostics);
  for (const char* want :
       {"skipping .hidden: dot-prefixed path", "skipping sub/.x.kdp.json: dot-prefixed path",
        "skipping notes.json: no descriptor type token", "skipping linked: symbolic link to a folder (not followed)",
        "skipping old: excluded folder (--exclude-folder)"}) {
    EXPECT_NE(all.find(want), std::string::npos) << "missing: " << want << "\n" << all;
  }
  EXPECT_EQ(all.find("README"), std::string::npos) << all;
  EXPECT_EQ(all.find("kpack"), std::string::npos) << all;
  for (const auto& d : set.diagnostics) EXPECT_EQ(d.severity, Severity::Note) << d.str();

  // A kpack folder holding descriptors is a mistake, said so.
  t.write("kpack/x.udd.json", ukdtest::udd("udd-x", "sym_x"));
  const DescriptorSet withDescriptors = ukdpack::loadShard(t.root(), options);
  EXPECT_NE(findDiag(withDescriptors.diagnostics, "KPACK_FOLDER", "a top-level folder named 'kpack' would collide"),
            nullptr)
      << dump(withDescriptors.diagnostics);
}

TEST(LoaderWalk, FilesAreVisitedInSortedOrder) {
  TempTree t;
  t.write("b/z.udd.json", ukdtest::udd("same", "s1"));
  t.write("a.udd.json", ukdtest::udd("same", "s2"));
  t.write("b.udd.json", ukdtest::udd("same", "s3"));
  std::vector<ukdpack::Diagnostic> diags;
  const auto files = ukdpack::walkRoot(t.root(), diags);
  std::vector<std::string> rels;
  for (const auto& f : files) rels.push_back(f.rel);
  EXPECT_EQ(rels, (std::vector<std::string>{"a.udd.json", "b.udd.json", "b/z.udd.json"}));
  // So the first in that order keeps its id.
  const DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_EQ(set.dispatches.size(), 1u);
  EXPECT_EQ(set.dispatches[0].dispatchSymbol, "s2");
  EXPECT_EQ(ukdpack::descriptorType("x.kdp.json"), std::optional<std::string>("kdp"));
  EXPECT_EQ(ukdpack::descriptorType("x.json"), std::nullopt);
  EXPECT_EQ(ukdpack::descriptorType("x.kdpp.json"), std::nullopt);
}

TEST(LoaderWalk, MissingRootIsAnErrorNotACrash) {
  const DescriptorSet set = ukdpack::loadShard("/nonexistent/ukdpack/root");
  ASSERT_FALSE(set.ok());
  EXPECT_NE(findDiag(set.diagnostics, "ROOT_INVALID", "expected a descriptor root folder, found nothing"), nullptr);
}

TEST(LoaderWalk, SeveralRootsShareIdsAndRecordTheirRoot) {
  TempTree a;
  TempTree b;
  ukdtest::writeGenerics(a);
  b.write("x.kdp.json", ukdtest::kdp("kdp-x", Json::array({ukdtest::single("ukd-x", "x")})));
  const DescriptorSet set = ukdpack::loadRoots({a.root(), b.root()});
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  ASSERT_EQ(set.packs.size(), 1u);
  EXPECT_EQ(set.rootOf(set.packs[0]), b.root());
  EXPECT_EQ(set.rootOf(set.packs[0].members[0]), b.root());
  EXPECT_EQ(set.rootOf(*set.findDispatch("udd-1")), a.root());
}

// Finds by id answer as a scan of the set does, however many are asked (after a few
// the set looks them up): each kernel, a UUID in either case, each kind's descriptors,
// and no stale answer once a kernel's id is edited, in the set or in a copy.
TEST(Loader, FindsByIdAnswerAsAScanDoesHoweverManyAreAsked) {
  TempTree t;
  ukdtest::writeGenerics(t);
  const std::string uuid = "0f0e0d0c-0b0a-4988-8776-655443322110";
  Json kernels = Json::array({ukdtest::single(uuid, "u")});
  for (int i = 0; i < 12; ++i) {
    kernels.push_back(ukdtest::single("ukd-" + std::to_string(i), "k" + std::to_string(i)));
    kernels.back()["metadata"]["block"] = i;  // each its own: the engine tells them apart
  }
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({kernels[0], kernels[1], kernels[2]})));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json(std::vector<Json>(kernels.begin() + 3, kernels.end()))));
  DescriptorSet set = ukdpack::loadShard(t.root());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t p = 0; p < set.packs.size(); ++p) {
      for (const ukdpack::PackMember& m : set.packs[p].members) {
        const ukdpack::Pack* pack = nullptr;
        EXPECT_EQ(set.findKernel(m.kernel().id, &pack), &m) << m.kernel().id;
        EXPECT_EQ(pack, &set.packs[p]);
      }
    }
    std::string upper = uuid;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(set.findKernel(upper), &set.packs[0].members[0]);
    EXPECT_EQ(set.findKernel("ukd-none"), nullptr);
  }
  EXPECT_EQ(set.findPack("kdp-b"), &set.packs[1]);
  EXPECT_EQ(set.findEngine("ued-1"), set.engineOf(set.packs[0]));
  EXPECT_EQ(set.findDispatch("udd-1"), set.dispatchOf(set.packs[1]));
  EXPECT_EQ(set.findEngine("ued-none"), nullptr);

  DescriptorSet copy = set;
  copy.packs[1].members[0].editKernel().id = "ukd-renamed";
  set.packs[1].members[1].editKernel().id = "ukd-renamed-too";
  for (int round = 0; round < 12; ++round) {
    EXPECT_EQ(copy.findKernel("ukd-renamed"), &copy.packs[1].members[0]);
    EXPECT_EQ(copy.findKernel("ukd-2"), nullptr);
    EXPECT_EQ(copy.findKernel("ukd-3"), &copy.packs[1].members[1]);
    EXPECT_EQ(set.findKernel("ukd-3"), nullptr);
    EXPECT_EQ(set.findKernel("ukd-renamed-too"), &set.packs[1].members[1]);
  }
  // A pack's id edited in place: its find scans to the new id, never to the old place.
  set.packs[1].id = "kdp-c";
  EXPECT_EQ(set.findPack("kdp-b"), nullptr);
  EXPECT_EQ(set.findPack("kdp-c"), &set.packs[1]);
}
