#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdpack::DeclaredDispatchHandler;
using ukdpack::DescriptorSet;
using ukdpack::Registry;
using ukdpack::Signature;
using ukdpack::StateManager;
using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

const char* const kTocKey = "split_kv_0123456789ab";

Json signatureJson(bool named = true) {
  Json sig = Json::array();
  const char* names[] = {"q", "k", "workspace"};
  for (int i = 0; i < 3; ++i) {
    Json a = {{"kind", "global_buffer"}, {"size", 8}, {"offset", 8 * i}};
    if (named) a["name"] = names[i];
    sig.push_back(a);
  }
  sig.push_back({{"kind", "by_value"}, {"size", 12}, {"offset", 24}});
  return sig;
}

Signature signatureOf(const Json& j) {
  Signature sig;
  for (const Json& a : j) {
    ukdpack::SignatureArg arg;
    arg.kind = a["kind"];
    arg.size = a["size"];
    arg.offset = a["offset"];
    if (a.contains("name")) arg.name = a["name"].get<std::string>();
    sig.push_back(arg);
  }
  return sig;
}

Json packed(const std::string& symbol, const std::string& sha, const std::string& library,
            const std::string& tocKey = kTocKey) {
  return {{"kind", "kpack"},  {"library", library}, {"toc_key", tocKey},
          {"symbol", symbol}, {"sha256", sha},      {"signature", signatureJson()}};
}

// A packed shard for gfx90a: kpack/kernels_gfx90a.kpack holding the real
// split_kv object, and ops/split.kdp.json with a two-launch and a
// single-launch kernel whose library is ../kpack/kernels_gfx90a.kpack.
struct Shard {
  TempTree tree;
  std::vector<std::uint8_t> object;
  std::string sha;
  Json multiKernel;
  Json singleKernel;

  explicit Shard(bool zstd = true) {
    object = ukdtest::readBytes(ukdtest::testData("data/objects/split_kv.gfx90a.hsaco"));
    sha = ukdpack::sha256Hex(object);
    tree.writeBytes("kpack/kernels_gfx90a.kpack", ukdtest::makeKpack({{kTocKey, "gfx90a", object}}, zstd));
    ukdtest::writeGenerics(tree, ukdtest::udd("udd-1", "example_split_kv_dispatch"));
    const std::string lib = "../kpack/kernels_gfx90a.kpack";
    multiKernel = {
        {"id", "ukd-split"},
        {"version", "1.1"},
        {"name", "split.f32"},
        {"priority", 0},
        {"metadata", {{"dtype", "FLOAT"}}},
        {"arch", {"gfx90a"}},
        {"sources",
         {{"produce", packed("split_kv_produce", sha, lib)}, {"consume", packed("split_kv_consume", sha, lib)}}}};
    singleKernel = {{"id", "ukd-one"},
                    {"version", "1.0"},
                    {"name", "unused.f32"},
                    {"priority", 0},
                    {"metadata", {{"dtype", "HALF"}}},
                    {"arch", {"gfx90a"}},
                    {"kernel_source", packed("split_kv_unused", sha, lib)}};
    writeKernels();
  }
  void writeKernels() const {
    tree.write("ops/split.kdp.json",
               ukdtest::kdp("kdp-split", Json::array({multiKernel}), "udd-1", "ued-1", {"gfx90a"}));
    Json single = ukdtest::kdp("kdp-one", Json::array({singleKernel}), "udd-2", "ued-1", {"gfx90a"});
    tree.write("ops/one.kdp.json", single);
    tree.write("ops/one.udd.json", ukdtest::udd("udd-2", "example_single_dispatch"));
  }
  DescriptorSet load() const {
    DescriptorSet set = ukdpack::loadShard(tree.root());
    EXPECT_TRUE(set.ok()) << dump(set.diagnostics);
    return set;
  }
};

Registry handlers(std::map<std::string, Signature> splitSignatures = {}) {
  Registry r;
  r.addDispatch("example_split_kv_dispatch",
                std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{"produce", "consume"},
                                                          std::move(splitSignatures)));
  r.addDispatch("example_single_dispatch", std::make_shared<DeclaredDispatchHandler>(std::vector<std::string>{}));
  r.addMatcher("eng_match", std::make_shared<ukdpack::MatchHandler>());
  return r;
}

// Gives the consume launch of the multi-launch kernel a digest that is not its
// object's; returns that digest.
std::string breakConsumeDigest(Shard& s) {
  std::string wrong = s.sha;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  s.multiKernel["sources"]["consume"]["sha256"] = wrong;
  s.writeKernels();
  return wrong;
}

std::string failureOf(const ukdpack::Result<std::vector<std::uint8_t>>& r) {
  return r ? std::string("<loaded>") : r.error().code + ": " + r.error().str();
}

}  // namespace

TEST(Integrity, LoadsTheVerifiedCodeOfEveryLaunch) {
  Shard s;
  const StateManager sm(s.load(), handlers(), "gfx90a");
  ASSERT_EQ(sm.kept().size(), 2u) << dump(sm.diagnostics());
  for (const char* launch : {"produce", "consume"}) {
    auto code = sm.loadLaunchCode("ukd-split", std::string(launch));
    ASSERT_TRUE(code) << failureOf(code);
    EXPECT_EQ(code.value(), s.object);
  }
  auto single = sm.loadLaunchCode("ukd-one", std::nullopt, "gfx90a:xnack-");
  ASSERT_TRUE(single) << failureOf(single);
  EXPECT_EQ(single.value(), s.object);
}

TEST(Integrity, UncompressedArchivesAndTheOnlyArchLoadToo) {
  Shard s(/*zstd=*/false);
  const DescriptorSet set = s.load();
  // arch "" takes the one arch the archive holds for the toc key.
  auto code = ukdpack::loadLaunchCode(set, "ukd-split", std::string("produce"), "");
  ASSERT_TRUE(code) << failureOf(code);
  EXPECT_EQ(code.value(), s.object);
}

TEST(Integrity, ArchivesAreOpenedOncePerPath) {
  Shard s;
  const DescriptorSet set = s.load();
  ukdpack::ArchiveCache cache;
  ukdpack::LaunchCodeOptions options;
  options.cache = &cache;
  for (const char* launch : {"produce", "consume"}) {
    ASSERT_TRUE(ukdpack::loadLaunchCode(set, "ukd-split", std::string(launch), "gfx90a", options));
  }
  ASSERT_TRUE(ukdpack::loadLaunchCode(set, "ukd-one", std::nullopt, "gfx90a", options));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(Integrity, DigestMismatchNamesTheKernelAndTheLaunch) {
  Shard s;
  const std::string wrong = breakConsumeDigest(s);
  const StateManager sm(s.load(), handlers(), "gfx90a");
  auto bad = sm.loadLaunchCode("ukd-split", std::string("consume"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "DIGEST_MISMATCH");
  EXPECT_NE(bad.error().message.find("kernel 'split.f32' (id ukd-split) launch 'consume'"), std::string::npos)
      << bad.error().str();
  EXPECT_NE(bad.error().message.find(wrong), std::string::npos);
  EXPECT_NE(bad.error().message.find(s.sha), std::string::npos);
  EXPECT_EQ(bad.error().jsonPath, "$.kernelDescriptors[0].sources.consume.sha256");
  EXPECT_EQ(bad.error().file, "ops/split.kdp.json");
  // The sibling launch is untouched.
  EXPECT_TRUE(sm.loadLaunchCode("ukd-split", std::string("produce")));

  // ukdpack-validate loads every launch and fails on it.
  const ukdpack::ValidationReport r = ukdpack::validateRoots({s.tree.root()});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(ukdtest::findDiag(r.diagnostics, "DIGEST_MISMATCH", "launch 'consume'"), nullptr) << dump(r.diagnostics);
  EXPECT_EQ(r.launchesChecked, 2u);  // produce and the single-launch kernel
}

TEST(Integrity, AVerifiedEntryVouchesOnlyForItsOwnDigest) {
  Shard s;
  breakConsumeDigest(s);
  const StateManager sm(s.load(), handlers(), "gfx90a");
  // produce verifies the shared entry first; consume names another digest for it.
  ASSERT_TRUE(sm.loadLaunchCode("ukd-split", std::string("produce")));
  auto bad = sm.loadLaunchCode("ukd-split", std::string("consume"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "DIGEST_MISMATCH");
  EXPECT_TRUE(sm.loadLaunchCode("ukd-one", std::nullopt));  // same entry, right digest
}

TEST(Integrity, VerifiedBytesAreReusedWithinTheirCacheAndBudget) {
  Shard s(/*zstd=*/false);  // stored as is: a changed byte keeps every offset valid
  const DescriptorSet set = s.load();
  ukdpack::ArchiveCache memo;
  ukdpack::ArchiveCache none(/*maxVerifiedBytes=*/0);
  ukdpack::LaunchCodeOptions withMemo, withoutMemo;
  withMemo.cache = &memo;
  withoutMemo.cache = &none;
  ASSERT_TRUE(ukdpack::loadLaunchCode(set, "ukd-split", std::string("produce"), "gfx90a", withMemo));
  ASSERT_TRUE(ukdpack::loadLaunchCode(set, "ukd-split", std::string("produce"), "gfx90a", withoutMemo));
  // The archive's bytes change under both caches (their archives are already open):
  // the memo serves what it verified, the cache without one reads and refuses.
  std::vector<std::uint8_t> other = s.object;
  other[other.size() / 2] ^= 0xFF;
  s.tree.writeBytes("kpack/kernels_gfx90a.kpack", ukdtest::makeKpack({{kTocKey, "gfx90a", other}}, false));
  auto again = ukdpack::loadLaunchCode(set, "ukd-split", std::string("consume"), "gfx90a", withMemo);
  ASSERT_TRUE(again) << failureOf(again);
  EXPECT_EQ(again.value(), s.object);
  auto reread = ukdpack::loadLaunchCode(set, "ukd-split", std::string("consume"), "gfx90a", withoutMemo);
  ASSERT_FALSE(reread);
  EXPECT_EQ(reread.error().code, "DIGEST_MISMATCH") << reread.error().str();
}

TEST(Integrity, EntriesCheckedAheadGiveThePlainVerdictWithoutDecompressingAgain) {
  Shard s;
  s.multiKernel["sources"]["produce"]["symbol"] = "split_kv_reduce";  // not in the object
  breakConsumeDigest(s);                                              // writes the kernels
  const DescriptorSet set = s.load();
  ukdpack::ArchiveCache ahead;
  ukdpack::checkArchiveEntries(ahead, s.tree.root() / "kpack" / "kernels_gfx90a.kpack", 2);
  const std::uint64_t spent = ahead.decompressedBytes();
  EXPECT_EQ(spent, s.object.size());  // the archive's one entry, once
  const std::vector<std::pair<std::string, std::optional<std::string>>> launches = {
      {"ukd-split", "produce"}, {"ukd-split", "consume"}, {"ukd-one", std::nullopt}};
  std::vector<std::string> verdicts;
  for (const auto& [id, launch] : launches) {
    ukdpack::ArchiveCache fresh;
    ukdpack::LaunchCodeOptions plain, checked;
    plain.cache = &fresh;
    checked.cache = &ahead;
    plain.keepBytes = checked.keepBytes = false;
    const std::string was = failureOf(ukdpack::loadLaunchCode(set, id, launch, "gfx90a", plain));
    EXPECT_EQ(failureOf(ukdpack::loadLaunchCode(set, id, launch, "gfx90a", checked)), was);
    verdicts.push_back(was.substr(0, was.find(':')));
  }
  EXPECT_EQ(verdicts, (std::vector<std::string>{"SYMBOL_MISSING", "DIGEST_MISMATCH", "<loaded>"}));
  EXPECT_EQ(ahead.decompressedBytes(), spent);
  // A load that keeps the bytes reads them: findings hold none.
  ukdpack::LaunchCodeOptions keep;
  keep.cache = &ahead;
  auto bytes = ukdpack::loadLaunchCode(set, "ukd-one", std::nullopt, "gfx90a", keep);
  ASSERT_TRUE(bytes) << failureOf(bytes);
  EXPECT_EQ(bytes.value(), s.object);
}

TEST(Integrity, ValidateVerifiesEveryLaunchOfAGoodShard) {
  Shard s;
  const ukdpack::ValidationReport r = ukdpack::validateRoots({s.tree.root()});
  EXPECT_TRUE(r.ok) << dump(r.diagnostics);
  EXPECT_EQ(r.launchesChecked, 3u);
}

TEST(Integrity, LibraryThatLeavesTheShardIsRefused) {
  Shard s;
  s.multiKernel["sources"]["produce"]["library"] = "../../kpack/kernels_gfx90a.kpack";
  s.multiKernel["sources"]["consume"]["library"] = "/etc/passwd";
  s.writeKernels();
  const StateManager sm(s.load(), handlers(), "gfx90a");
  auto up = sm.loadLaunchCode("ukd-split", std::string("produce"));
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().code, "LIBRARY_ESCAPES") << failureOf(up);
  EXPECT_NE(up.error().message.find("leaves the shard root"), std::string::npos);
  EXPECT_EQ(up.error().jsonPath, "$.kernelDescriptors[0].sources.produce.library");
  auto abs = sm.loadLaunchCode("ukd-split", std::string("consume"));
  ASSERT_FALSE(abs);
  EXPECT_EQ(abs.error().code, "LIBRARY_ESCAPES") << failureOf(abs);
}

TEST(Integrity, LibraryThroughASymlinkIsRefusedEvenInsideTheShard) {
  Shard s;
  // A folder link and a file link, both pointing at the real archive inside the shard.
  std::filesystem::create_directory_symlink(s.tree.path("kpack"), s.tree.path("linked"));
  std::filesystem::create_symlink(s.tree.path("kpack/kernels_gfx90a.kpack"), s.tree.path("kpack/alias.kpack"));
  s.multiKernel["sources"]["produce"]["library"] = "../linked/kernels_gfx90a.kpack";
  s.multiKernel["sources"]["consume"]["library"] = "../kpack/alias.kpack";
  s.writeKernels();
  const StateManager sm(s.load(), handlers(), "gfx90a");
  auto folder = sm.loadLaunchCode("ukd-split", std::string("produce"));
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().code, "LIBRARY_SYMLINK") << failureOf(folder);
  EXPECT_NE(folder.error().message.find("'linked'"), std::string::npos) << folder.error().message;
  auto file = sm.loadLaunchCode("ukd-split", std::string("consume"));
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code, "LIBRARY_SYMLINK") << failureOf(file);
  EXPECT_NE(file.error().message.find("'kpack/alias.kpack'"), std::string::npos) << file.error().message;
  // The unlinked path still loads.
  EXPECT_TRUE(sm.loadLaunchCode("ukd-one", std::nullopt));
}

TEST(Integrity, MissingTocEntryIsNamed) {
  Shard s;
  s.multiKernel["sources"]["produce"]["toc_key"] = "split_kv_ffffffffffff";
  s.writeKernels();
  const StateManager sm(s.load(), handlers(), "");
  auto key = sm.loadLaunchCode("ukd-split", std::string("produce"), "gfx90a");
  ASSERT_FALSE(key);
  EXPECT_EQ(key.error().code, "TOC_MISSING") << failureOf(key);
  EXPECT_NE(key.error().message.find("'split_kv_ffffffffffff'"), std::string::npos);
  // The archive as the shard tools name it (the library is relative to the descriptor),
  // and that it holds the key for no arch at all.
  EXPECT_NE(key.error().message.find("archive '../kpack/kernels_gfx90a.kpack' (kpack/kernels_gfx90a.kpack in "
                                     "the shard)"),
            std::string::npos)
      << key.error().message;
  EXPECT_NE(key.error().message.find("(it holds arches gfx90a): it holds no entry of that key"), std::string::npos)
      << key.error().message;
  // The right key but an arch the archive does not hold: the arches it holds the key for.
  auto arch = sm.loadLaunchCode("ukd-split", std::string("consume"), "gfx1030");
  ASSERT_FALSE(arch);
  EXPECT_EQ(arch.error().code, "TOC_MISSING") << failureOf(arch);
  EXPECT_NE(arch.error().message.find("arch gfx1030"), std::string::npos) << arch.error().message;
  EXPECT_NE(arch.error().message.find("): for that key it holds arches gfx90a"), std::string::npos)
      << arch.error().message;
}

TEST(Integrity, MissingSymbolListsWhatTheObjectHolds) {
  Shard s;
  s.multiKernel["sources"]["consume"]["symbol"] = "split_kv_reduce";
  s.writeKernels();
  const StateManager sm(s.load(), handlers(), "gfx90a");
  auto bad = sm.loadLaunchCode("ukd-split", std::string("consume"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "SYMBOL_MISSING") << failureOf(bad);
  EXPECT_NE(bad.error().message.find("symbol 'split_kv_reduce'"), std::string::npos);
  EXPECT_NE(bad.error().message.find("split_kv_consume"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("launch 'consume'"), std::string::npos);
}

TEST(Integrity, SignatureMismatchIsCheckedBeforeTheArchiveIsOpened) {
  Shard s;
  Json expected = signatureJson();
  expected[3]["size"] = 16;  // the handler passes a bigger struct
  const DescriptorSet set = s.load();
  {
    const StateManager sm(set, handlers({{"produce", signatureOf(expected)}}), "gfx90a");
    auto bad = sm.loadLaunchCode("ukd-split", std::string("produce"));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, "SIGNATURE_MISMATCH") << failureOf(bad);
    EXPECT_NE(bad.error().message.find("argument 3 is by_value/12"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("dispatch symbol 'example_split_kv_dispatch'"), std::string::npos);
    EXPECT_TRUE(sm.loadLaunchCode("ukd-split", std::string("consume")));  // no expectation for consume
  }
  // Before the archive: with the archive gone the verdict is still the signature's.
  std::filesystem::remove(s.tree.path("kpack/kernels_gfx90a.kpack"));
  {
    const StateManager sm(set, handlers({{"produce", signatureOf(expected)}}), "gfx90a");
    auto bad = sm.loadLaunchCode("ukd-split", std::string("produce"));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, "SIGNATURE_MISMATCH") << failureOf(bad);
    auto gone = sm.loadLaunchCode("ukd-split", std::string("consume"));
    ASSERT_FALSE(gone);
    EXPECT_EQ(gone.error().code, "ARCHIVE_MISSING") << failureOf(gone);
  }
}

TEST(Integrity, SignatureNamesCountOnlyWhenBothSidesHaveOne) {
  const Signature named = signatureOf(signatureJson(true));
  const Signature unnamed = signatureOf(signatureJson(false));
  EXPECT_EQ(ukdpack::signatureMismatch(named, unnamed), std::nullopt);
  EXPECT_EQ(ukdpack::signatureMismatch(unnamed, named), std::nullopt);
  Signature renamed = named;
  renamed[1].name = "keys";
  ASSERT_TRUE(ukdpack::signatureMismatch(named, renamed));
  EXPECT_NE(ukdpack::signatureMismatch(named, renamed)->find("argument 1"), std::string::npos);
  Signature kind = named;
  kind[0].kind = "by_value";
  EXPECT_TRUE(ukdpack::signatureMismatch(named, kind));
  Signature shorter(named.begin(), named.end() - 1);
  ASSERT_TRUE(ukdpack::signatureMismatch(named, shorter));
  EXPECT_EQ(*ukdpack::signatureMismatch(named, shorter), "the handler passes 3 arguments, the kernel takes 4");
  // Offsets are the compiler's layout, not part of the check.
  Signature moved = named;
  moved[2].offset = 40;
  EXPECT_EQ(ukdpack::signatureMismatch(named, moved), std::nullopt);
}

TEST(Integrity, LaunchNamesAndKindsAreChecked) {
  Shard s;
  const StateManager sm(s.load(), handlers(), "gfx90a");
  auto none = sm.loadLaunchCode("ukd-split", std::nullopt);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, "NO_SUCH_LAUNCH");
  EXPECT_NE(none.error().message.find("{consume, produce}"), std::string::npos);
  auto unknown = sm.loadLaunchCode("ukd-split", std::string("reduce"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, "NO_SUCH_LAUNCH");
  auto named = sm.loadLaunchCode("ukd-one", std::string("produce"));
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().code, "NO_SUCH_LAUNCH");
  auto absent = sm.loadLaunchCode("ukd-404", std::nullopt);
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().code, "KERNEL_UNKNOWN");

  TempTree t;
  ukdtest::writeGenerics(t);
  t.write("a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a1", "a1")})));
  const DescriptorSet authored = ukdpack::loadShard(t.root());
  auto hip = ukdpack::loadLaunchCode(authored, "ukd-a1", std::nullopt, "gfx90a");
  ASSERT_FALSE(hip);
  EXPECT_EQ(hip.error().code, "NOT_PACKED");
}
