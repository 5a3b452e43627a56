// The one judge: the whole-set rules, authored mode and the reader's limits,
// as the packer, validate and the shard tools reach them through the extension.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/rules/set_rules.hpp"

using ukdpack::DescriptorSet;
using ukdpack::LoaderOptions;
using ukdtest::dump;
using ukdtest::findDiag;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

LoaderOptions authored() {
  LoaderOptions o;
  o.authored = true;
  return o;
}

}  // namespace

TEST(SetRules, OneLaunchSetPerDispatchSymbolAcrossPacks) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  t.write("b.kdp.json", ukdtest::kdp("kdp-b", Json::array({ukdtest::multi("ukd-b1", "b1", {"produce", "consume"})})));
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const auto found = ukdpack::checkSetRules(set);
  ASSERT_EQ(found.size(), 1u) << dump(found);
  EXPECT_EQ(found[0].code, "LAUNCH_SET_MISMATCH");
  EXPECT_EQ(found[0].str(),
            "a.kdp.json: $.kernelDescriptors: dispatch symbol 'sym_one' serves kernels with different launch "
            "sets, and its handler declares one set: a.kdp.json: 'a1' (id ukd-a1) {}; b.kdp.json: 'b1' (id ukd-b1) "
            "{consume, produce}; "
            "put kernels with another launch set in a KDP with its own UDD and dispatch symbol");
}

TEST(SetRules, NullDispatchPacksAreHeldAloneAndFindingsNameTheirArches) {
  TempTree t;
  ukdtest::writeGenerics(t);
  // Two null-dispatch packs with different sets: not grouped, so no finding.
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")}), nullptr));
  t.write("b.kdp.json",
          ukdtest::kdp("kdp-b", Json::array({ukdtest::multi("ukd-b1", "b1", {"produce", "consume"})}), nullptr));
  // One that disagrees with itself on gfx90a only.
  Json k2 = ukdtest::multi("ukd-c2", "c2", {"x", "y"}, "INT");
  k2["arch"] = {"gfx90a"};
  t.write("c.kdp.json", ukdtest::kdp("kdp-c", Json::array({ukdtest::single("ukd-c1", "c1", "BF16"), k2}), nullptr,
                                     "ued-1", {"gfx90a", "gfx942"}));
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const auto found = ukdpack::checkSetRules(set);
  ASSERT_EQ(found.size(), 1u) << dump(found);
  EXPECT_EQ(found[0].str(),
            "c.kdp.json: $.kernelDescriptors: KDP 'kdp-c' has no dispatch and holds kernels with different launch "
            "sets on gfx90a: c.kdp.json: 'c1' (id ukd-c1) {}, 'c2' (id ukd-c2) {x, y}; a pack's kernels share one "
            "launch set");
  // Asked for gfx942 only, nothing holds.
  EXPECT_TRUE(ukdpack::checkSetRules(set, {"gfx942"}).empty());
}

TEST(SetRules, DeclaredLaunchesBindEveryKernelTheUddServes) {
  TempTree t;
  ukdtest::writeGenerics(t, ukdtest::udd("udd-1", "sym_one", std::vector<std::string>{"produce", "consume"}));
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::multi("ukd-a1", "a1", {"produce", "reduce"})})));
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  const auto found = ukdpack::checkSetRules(set);
  ASSERT_EQ(found.size(), 1u) << dump(found);
  EXPECT_NE(found[0].message.find("dispatch symbol 'sym_one' runs launches {consume, produce} (declared by "
                                  "one.udd.json), but kernels it serves have other launch sets: a.kdp.json: 'a1' "
                                  "(id ukd-a1) {produce, reduce}"),
            std::string::npos)
      << found[0].message;
}

TEST(SetRules, ShardContentsFollowReachability) {
  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("spare.udd.json", ukdtest::udd("udd-spare", "sym_spare"));
  t.write("a.kdp.json",
          ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")}), "udd-1", "ued-1", {"gfx90a"}));
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  ASSERT_TRUE(set.ok()) << dump(set.diagnostics);
  const auto on = ukdpack::shardContents(set, "gfx90a");
  ASSERT_EQ(on.packs.size(), 1u);
  std::vector<std::string> files;
  for (const auto* d : on.generics) files.push_back(d->file);
  EXPECT_EQ(files, (std::vector<std::string>{"eng.kmd.json", "eng.ued.json", "eng.umd.json", "one.udd.json"}));
  EXPECT_TRUE(ukdpack::shardContents(set, "gfx1030").packs.empty());
  const auto note = ukdpack::unreachableNote(set);
  ASSERT_EQ(note.size(), 1u);
  EXPECT_EQ(note[0].message, "1 generic descriptor is reachable from no KDP and ships in no shard: spare.udd.json");
}

TEST(Authored, PackedSourcesAndNewerVersionsAreRefusedMissingFilesNamed) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json packedKernel = ukdtest::single("ukd-p", "p");
  packedKernel["kernel_source"] = {{"kind", "kpack"}, {"library", "kpack/x.kpack"},     {"toc_key", "k"},
                                   {"symbol", "s"},   {"sha256", std::string(64, 'a')}, {"signature", Json::array()}};
  Json missing = ukdtest::single("ukd-m", "m", "HALF");
  missing["kernel_source"]["source"] = "nowhere.hip";
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({packedKernel, missing})));
  Json newer = ukdtest::udd("udd-2", "sym_two");
  newer["version"] = "1.9";
  t.write("two.udd.json", newer);
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  EXPECT_NE(findDiag(set.diagnostics, "PACKED_IN_AUTHORED",
                     "a.kdp.json: $.kernelDescriptors[0].kernel_source.kind: kind 'kpack' is the packed form"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "SOURCE_MISSING",
                     "a.kdp.json: $.kernelDescriptors[1].kernel_source.source: source 'nowhere.hip' not found"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "SCHEMA",
                     "two.udd.json: $.version: expected a UDD version this ukdpack reads (1.0, 1.1), found '1.9'"),
            nullptr)
      << dump(set.diagnostics);
  // The same tree read as a shard: the newer file is skipped with a warning, not refused.
  const DescriptorSet shard = ukdpack::loadShard(t.root());
  EXPECT_EQ(findDiag(shard.diagnostics, "SCHEMA", "two.udd.json"), nullptr) << dump(shard.diagnostics);
  EXPECT_NE(findDiag(shard.diagnostics, "VERSION_SKIPPED", "two.udd.json"), nullptr) << dump(shard.diagnostics);
}

// Kernels of one pack naming files in one folder: the folder is resolved once, yet
// each file is judged on its own (a link among plain files still leaves the root).
TEST(Authored, FilesSharingAFolderAreEachJudged) {
  TempTree t;
  ukdtest::writeGenerics(t);
  TempTree outside;
  outside.write("far.hip", std::string("// outside"));
  t.write("src/a.hip", std::string("// a"));
  t.write("src/d.hip", std::string("// d"));
  std::filesystem::create_symlink(outside.root() / "far.hip", t.root() / "src" / "b.hip");
  std::filesystem::create_directory_symlink(outside.root(), t.root() / "away");
  std::filesystem::create_directory_symlink(t.root() / "src", t.root() / "alias");
  Json kernels = Json::array();
  const std::vector<std::string> files = {"src/a.hip", "src/b.hip", "away/far.hip",
                                          "src/d.hip", "src/e.hip", "alias/a.hip"};
  for (std::size_t i = 0; i < files.size(); ++i) {
    Json k = ukdtest::single("ukd-" + std::to_string(i), "k" + std::to_string(i), "V" + std::to_string(i));
    k["kernel_source"]["source"] = files[i];
    kernels.push_back(k);
  }
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", kernels));
  const DescriptorSet set = ukdpack::loadShard(t.root(), authored());
  const std::string all = dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "PATH_REFUSED",
                     "$.kernelDescriptors[1].kernel_source.source: path 'src/b.hip' leaves the descriptor "
                     "root through a symbolic link"),
            nullptr)
      << all;
  EXPECT_NE(findDiag(set.diagnostics, "PATH_REFUSED",
                     "$.kernelDescriptors[2].kernel_source.source: path 'away/far.hip' leaves the descriptor "
                     "root through a symbolic link"),
            nullptr)
      << all;
  EXPECT_NE(findDiag(set.diagnostics, "SOURCE_MISSING",
                     "$.kernelDescriptors[4].kernel_source.source: source 'src/e.hip' not found"),
            nullptr)
      << all;
  for (const char* fine : {"kernelDescriptors[0]", "kernelDescriptors[3]", "kernelDescriptors[5]"}) {
    EXPECT_EQ(all.find(fine), std::string::npos) << fine << "\n" << all;
  }
}

TEST(Reader, LimitsNameTheJsonPath) {
  auto error = [](const std::string& text) {
    const auto r = ukdpack::parseDescriptorText(text);
    return r ? std::string("(parsed)") : r.error().str();
  };
  EXPECT_EQ(error(R"({"a": [1, {"b": 18446744073709551615}]})"),
            "$.a[1].b: integer 18446744073709551615 does not fit a signed 64-bit value (at most "
            "9223372036854775807)");
  EXPECT_EQ(error(R"({"a": -99999999999999999999})"),
            "$.a: integer -99999999999999999999 does not fit a signed 64-bit value");
  EXPECT_NE(error(R"({"a": 1e999})").find("number overflow parsing '1e999'"), std::string::npos);
  EXPECT_EQ(error(R"({"a": {"b": 1, "b": 2}})"), "$.a: duplicate key 'b' in one object");
  EXPECT_NE(error(R"({"a": "\ud800"})").find("surrogate"), std::string::npos);
  const std::string deep = "{\"x-d\": " + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_NE(error(deep).find("nested deeper than 128 levels of objects and arrays"), std::string::npos);
  EXPECT_EQ(error(R"({"a": [9223372036854775807, -9223372036854775808, 1.5]})"), "(parsed)");
}

TEST(Reader, NonRegularFilesAndLinksOutOfTheRootAreRefusedUnread) {
  TempTree t;
  ukdtest::writeGenerics(t);
  ASSERT_EQ(::mkfifo((t.root() / "x.udd.json").c_str(), 0644), 0);
  TempTree outside;
  outside.write("o.udd.json", ukdtest::udd("udd-o", "sym_o"));
  std::filesystem::create_symlink(outside.root() / "o.udd.json", t.root() / "o.udd.json");
  const DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_NE(findDiag(set.diagnostics, "NOT_A_FILE", "x.udd.json: expected a regular file, found a FIFO"), nullptr)
      << dump(set.diagnostics);
  EXPECT_NE(findDiag(set.diagnostics, "LINK_ESCAPES", "o.udd.json: a symbolic link that leaves the descriptor root"),
            nullptr)
      << dump(set.diagnostics);
  EXPECT_EQ(set.findDispatch("udd-o"), nullptr);
  const auto fifo = ukdpack::readDescriptorFile(t.root() / "x.udd.json");
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().message, "expected a regular file, found a FIFO");
}
