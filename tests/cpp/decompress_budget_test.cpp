// Bounded work per load: a tiny archive whose TOC points many toc keys at one
// small, highly compressible payload (and kernels naming all of them) makes
// the loader decompress keys x payload bytes. The budget of decompressed bytes
// (LoaderOptions::maxDecompressedBytes) stops it there, with a diagnostic
// naming the archive, the budget and how to raise it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "runtime_support.hpp"
#include "ukdpack/base/sha256.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/registry.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace {

namespace fs = std::filesystem;
using ukdtest::Json;
using ukdtest::TempTree;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kKeys = 1000;
constexpr std::uint64_t kPayload = std::uint64_t(1) << 20;  // 1 MiB decompressed
constexpr std::uint64_t kBudget = 64 * kPayload;            // 64 of the 1,000 launches

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The real split_kv object of `arch`, zero-padded to 1 MiB: it still holds its
// kernels, and compresses to a few hundred bytes.
std::vector<std::uint8_t> paddedObject(const std::string& arch) {
  auto bytes = ukdtest::readBytes(ukdtest::testData("data/objects/split_kv." + arch + ".hsaco"));
  EXPECT_LT(bytes.size(), kPayload);
  bytes.resize(kPayload, 0);
  return bytes;
}

std::string keyOf(const std::string& arch, std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "split_kv_%s_%04zu", arch.c_str(), i);
  return buf;
}

std::string idOf(const std::string& arch, std::size_t i) { return "ukd-" + keyOf(arch, i); }

// The hostile shard: per arch, kpack/kernels_<arch>.kpack stores ONE payload
// (the padded object) under `keys` toc keys, and ops/<arch>.kdp.json holds
// `keys` single-launch kernels, one per toc key, each naming that payload's
// digest. Metadata differs per kernel (block = i) so the set rules pass.
struct HostileShard {
  TempTree tree;

  explicit HostileShard(const std::vector<std::string>& arches, std::size_t keys = kKeys) {
    ukdtest::writeGenerics(tree);
    for (const std::string& arch : arches) {
      const std::vector<std::uint8_t> object = paddedObject(arch);
      std::vector<ukdtest::KpackAlias> aliases;
      for (std::size_t i = 1; i < keys; ++i) aliases.push_back({keyOf(arch, i), 0});
      const std::string archive = "kpack/kernels_" + arch + ".kpack";
      tree.writeBytes(archive, ukdtest::makeKpack({{keyOf(arch, 0), arch, object}}, true, "kernels", aliases));
      const std::string sha = ukdpack::sha256Hex(object);
      Json kernels = Json::array();
      for (std::size_t i = 0; i < keys; ++i) {
        const Json source = {{"kind", "kpack"},
                             {"library", "../" + archive},
                             {"toc_key", keyOf(arch, i)},
                             {"symbol", "split_kv_produce"},
                             {"sha256", sha},
                             {"signature", Json::array({{{"kind", "global_buffer"}, {"size", 8}, {"offset", 0}}})}};
        kernels.push_back({{"id", idOf(arch, i)},
                           {"version", "1.0"},
                           {"name", keyOf(arch, i) + ".f32"},
                           {"priority", 0},
                           {"metadata", {{"dtype", "FLOAT"}, {"block", i}}},
                           {"kernel_source", source}});
      }
      tree.write("ops/" + arch + ".kdp.json", ukdtest::kdp("kdp-" + arch, kernels, "udd-1", "ued-1", {arch}));
    }
  }
};

ukdpack::Registry registry() {
  ukdpack::Registry r;
  r.addDispatch("sym_one", std::make_shared<ukdpack::DeclaredDispatchHandler>(std::vector<std::string>{}));
  r.addMatcher("eng_match", std::make_shared<ukdpack::MatchHandler>());
  return r;
}

ukdpack::DescriptorSet loadWith(const fs::path& root, std::uint64_t budget) {
  ukdpack::LoaderOptions options;
  options.maxDecompressedBytes = budget;
  ukdpack::DescriptorSet set = ukdpack::loadShard(root, options);
  EXPECT_TRUE(set.ok()) << ukdtest::dump(set.diagnostics);
  return set;
}

std::size_t count(const std::vector<ukdpack::Diagnostic>& diags, const std::string& code) {
  return static_cast<std::size_t>(
      std::count_if(diags.begin(), diags.end(), [&](const ukdpack::Diagnostic& d) { return d.code == code; }));
}

}  // namespace

TEST(DecompressBudget, DefaultLeavesRoomForALargeRealShard) {
  // 100,000 kernels of ~200 KiB decompress ~19.5 GiB in a full load.
  const std::uint64_t largeShard = std::uint64_t(100000) * (200 << 10);
  EXPECT_GE(ukdpack::kDefaultMaxDecompressedBytes, 3 * largeShard);
  EXPECT_EQ(ukdpack::LoaderOptions{}.maxDecompressedBytes, ukdpack::kDefaultMaxDecompressedBytes);
  EXPECT_EQ(ukdpack::DescriptorSet{}.maxDecompressedBytes, ukdpack::kDefaultMaxDecompressedBytes);
  EXPECT_EQ(ukdpack::ArchiveCache{}.maxDecompressedBytes(), ukdpack::kDefaultMaxDecompressedBytes);
}

TEST(DecompressBudget, ChargesAreExact) {
  ukdpack::ArchiveCache cache(0, 100);
  EXPECT_TRUE(cache.charge(60));
  EXPECT_FALSE(cache.charge(41));  // refused whole: nothing taken
  EXPECT_EQ(cache.decompressedBytes(), 60u);
  EXPECT_TRUE(cache.charge(40));
  EXPECT_TRUE(cache.charge(0));
  EXPECT_FALSE(cache.charge(1));
  EXPECT_EQ(cache.decompressedBytes(), 100u);
  ukdpack::ArchiveCache huge(0, ~std::uint64_t(0));
  EXPECT_TRUE(huge.charge(~std::uint64_t(0)));
  EXPECT_FALSE(huge.charge(1));  // no wrap-around
}

TEST(DecompressBudget, ManyKeysOnOnePayloadStopAtTheBudget) {
  const HostileShard s({"gfx90a"});
  const std::uintmax_t archiveSize = fs::file_size(s.tree.path("kpack/kernels_gfx90a.kpack"));
  EXPECT_LT(archiveSize, std::uintmax_t(128) << 10) << "a small archive (its TOC, mostly) standing for 1,000 MiB";

  const ukdpack::StateManager sm(loadWith(s.tree.root(), kBudget), registry(), "gfx90a");
  ASSERT_EQ(sm.kept().size(), kKeys);
  const auto start = Clock::now();
  std::size_t loaded = 0;
  std::vector<ukdpack::Diagnostic> refused;
  for (std::size_t i = 0; i < kKeys; ++i) {
    auto code = sm.loadLaunchCode(idOf("gfx90a", i), std::nullopt);
    if (code) {
      ASSERT_EQ(refused.size(), 0u) << "launch " << i << " loaded after the budget was spent";
      ASSERT_EQ(code.value().size(), kPayload);
      ++loaded;
    } else {
      refused.push_back(code.error());
    }
  }
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_EQ(loaded, 64u);  // exactly the budget's worth, not a byte more
  ASSERT_EQ(refused.size(), kKeys - 64);
  for (const ukdpack::Diagnostic& d : refused) ASSERT_EQ(d.code, "DECOMPRESS_BUDGET") << d.str();

  const ukdpack::Diagnostic& first = refused.front();
  EXPECT_EQ(first.file, "ops/gfx90a.kdp.json");
  EXPECT_EQ(first.jsonPath, "$.kernelDescriptors[64].kernel_source.library");
  for (const char* part :
       {"archive '../kpack/kernels_gfx90a.kpack' (kpack/kernels_gfx90a.kpack)",
        "toc entry 'split_kv_gfx90a_0064' for gfx90a", "would decompress 1048576 bytes (1.0 MiB) more",
        "budget of 67108864 bytes (64.0 MiB), of which 67108864 are spent", "LoaderOptions::maxDecompressedBytes",
        "ukdpack-validate --max-decompressed-bytes N", "load_shard(max_decompressed_bytes=N)"}) {
    EXPECT_NE(first.message.find(part), std::string::npos) << "missing '" << part << "' in: " << first.message;
  }
}

TEST(DecompressBudget, VerifiedBytesCostNothing) {
  // A cache hit does no work, so it is not charged: the launches of one entry
  // load again after the budget is spent.
  const HostileShard s({"gfx90a"}, 4);
  const ukdpack::StateManager sm(loadWith(s.tree.root(), 2 * kPayload), registry(), "gfx90a");
  ASSERT_TRUE(sm.loadLaunchCode(idOf("gfx90a", 0), std::nullopt));
  ASSERT_TRUE(sm.loadLaunchCode(idOf("gfx90a", 1), std::nullopt));
  for (int again = 0; again < 10; ++again) {
    auto hit = sm.loadLaunchCode(idOf("gfx90a", 0), std::nullopt);
    ASSERT_TRUE(hit) << hit.error().str();
  }
  auto spent = sm.loadLaunchCode(idOf("gfx90a", 2), std::nullopt);
  ASSERT_FALSE(spent);
  EXPECT_EQ(spent.error().code, "DECOMPRESS_BUDGET");

  // Without a verified-bytes cache every load decompresses, and every one counts.
  const ukdpack::DescriptorSet set = loadWith(s.tree.root(), 2 * kPayload);
  ukdpack::ArchiveCache uncached(0, 2 * kPayload);
  ukdpack::LaunchCodeOptions options;
  options.cache = &uncached;
  ASSERT_TRUE(ukdpack::loadLaunchCode(set, idOf("gfx90a", 0), std::nullopt, "gfx90a", options));
  ASSERT_TRUE(ukdpack::loadLaunchCode(set, idOf("gfx90a", 0), std::nullopt, "gfx90a", options));
  auto third = ukdpack::loadLaunchCode(set, idOf("gfx90a", 0), std::nullopt, "gfx90a", options);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, "DECOMPRESS_BUDGET");
  EXPECT_EQ(uncached.decompressedBytes(), 2 * kPayload);
}

TEST(DecompressBudget, OneCallOverASetSpendsTheSetsBudget) {
  const HostileShard s({"gfx90a"}, 1);
  auto under = ukdpack::loadLaunchCode(loadWith(s.tree.root(), kPayload - 1), idOf("gfx90a", 0), std::nullopt, "");
  ASSERT_FALSE(under);
  EXPECT_EQ(under.error().code, "DECOMPRESS_BUDGET");
  EXPECT_TRUE(ukdpack::loadLaunchCode(loadWith(s.tree.root(), kPayload), idOf("gfx90a", 0), std::nullopt, ""));
}

TEST(DecompressBudget, ValidateStopsAtTheBudgetAndSaysHowToRaiseIt) {
  const HostileShard s({"gfx90a"});
  ukdpack::ValidateOptions options;
  options.loader.maxDecompressedBytes = kBudget;
  const auto start = Clock::now();
  const ukdpack::ValidationReport report = ukdpack::validateRoots({s.tree.root()}, options);
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(report.exitCode(), 1);
  EXPECT_EQ(report.launchesChecked, 64u);
  EXPECT_EQ(count(report.diagnostics, "DECOMPRESS_BUDGET"), kKeys - 64);
  EXPECT_NE(ukdtest::findDiag(report.diagnostics, "DECOMPRESS_BUDGET", "--max-decompressed-bytes"), nullptr);
}

TEST(DecompressBudget, RaisedBudgetLoadsEverything) {
  // The same kind of shard, smaller, is whole under a budget that covers it.
  const HostileShard s({"gfx90a"}, 100);
  ukdpack::ValidateOptions options;
  options.loader.maxDecompressedBytes = 100 * kPayload;
  const ukdpack::ValidationReport report = ukdpack::validateRoots({s.tree.root()}, options);
  EXPECT_TRUE(report.ok) << ukdtest::dump(report.diagnostics);
  EXPECT_EQ(report.launchesChecked, 100u);
  options.loader.maxDecompressedBytes = 100 * kPayload - 1;
  EXPECT_EQ(ukdpack::validateRoots({s.tree.root()}, options).launchesChecked, 99u);
}

TEST(DecompressBudget, ValidateSpendsOneBudgetAcrossItsArchPasses) {
  // Two arches, 40 launches each: 80 MiB in all, over a 64 MiB budget, though
  // each pass alone would stay under it.
  const HostileShard s({"gfx90a", "gfx1030"}, 40);
  ukdpack::ValidateOptions options;
  options.loader.maxDecompressedBytes = kBudget;
  const ukdpack::ValidationReport report = ukdpack::validateRoots({s.tree.root()}, options);
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(report.launchesChecked, 64u);
  EXPECT_EQ(count(report.diagnostics, "DECOMPRESS_BUDGET"), 16u);
}

TEST(DecompressBudget, NormalShardLoadsUnderTheDefault) {
  const HostileShard s({"gfx90a", "gfx1030"}, 3);
  const ukdpack::ValidationReport report = ukdpack::validateRoots({s.tree.root()});
  EXPECT_TRUE(report.ok) << ukdtest::dump(report.diagnostics);
  EXPECT_EQ(report.launchesChecked, 6u);
}
