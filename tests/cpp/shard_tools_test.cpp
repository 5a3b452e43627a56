// What the shard tools (inspect, verify, desk-check, diff) take from the
// runtime rather than copy: where a packed `library` leads (locateLibrary, the
// rule loadLaunchCode applies) and whether a folder holds a shard at all
// (noShardReason, which ukdpack-validate applies to every ROOT).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/integrity.hpp"

using ukdtest::dump;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

namespace fs = std::filesystem;

// A descriptor root (or, with kpack/, a shard as pack writes one) under `prefix`:
// the engine, its KMD and matcher, a UDD and one pack of one hip kernel.
void writeTree(const TempTree& t, const std::string& prefix, bool withArchiveFolder) {
  t.write(prefix + "eng.kmd.json", ukdtest::kmd());
  t.write(prefix + "eng.ued.json", ukdtest::ued());
  t.write(prefix + "eng.umd.json", ukdtest::umd());
  t.write(prefix + "one.udd.json", ukdtest::udd("udd-1", "sym_one"));
  t.write(prefix + "k.hip", std::string("extern \"C\" __global__ void k() {}\n"));
  t.write(prefix + "ops/a.kdp.json", ukdtest::kdp("kdp-a", Json::array({ukdtest::single("ukd-a", "a.f32")})));
  if (withArchiveFolder) fs::create_directories(t.path(prefix + "kpack"));
}

const ukdpack::Diagnostic& onlyDiagnostic(const ukdpack::ValidationReport& r) {
  EXPECT_EQ(r.diagnostics.size(), 1u) << dump(r.diagnostics);
  return r.diagnostics.front();
}

}  // namespace

TEST(ValidateFolder, AnEmptyFolderFailsWithOneLine) {
  TempTree t;
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exitCode(), 1);
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r.diagnostics);
  const ukdpack::Diagnostic& d = r.diagnostics.front();
  EXPECT_EQ(d.code, "NO_SHARD");
  EXPECT_EQ(d.severity, ukdpack::Severity::Error);
  EXPECT_EQ(d.file, t.root().string());
  EXPECT_EQ(d.message, "holds no shard: no descriptor file (<name>.<type>.json) lies under it");
  EXPECT_EQ(r.summary().rfind("failed: 1 error", 0), 0u) << r.summary();
}

TEST(ValidateFolder, FilesThatAreNoDescriptorsOrLieInExcludedFoldersCountForNothing) {
  TempTree t;
  t.write("README.md", std::string("notes\n"));
  t.write("family/one.udd.json", ukdtest::udd("udd-1", "sym_one"));
  ukdpack::ValidateOptions options;
  options.loader.excludeFolders = {"family"};
  EXPECT_EQ(onlyDiagnostic(ukdpack::validateRoots({t.root()}, options)).code, "NO_SHARD");
  // Without the exclusion the UDD is there: a root, judged as usual.
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()});
  EXPECT_EQ(ukdtest::findDiag(r.diagnostics, "NO_SHARD"), nullptr) << dump(r.diagnostics);
}

TEST(ValidateFolder, AnOutRootNamesTheShardsAndOneToUse) {
  TempTree t;
  writeTree(t, "gfx940/", true);
  writeTree(t, "gfx90a/", true);
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()});
  EXPECT_FALSE(r.ok);
  const ukdpack::Diagnostic& d = onlyDiagnostic(r);  // not a heap of duplicate ids
  EXPECT_EQ(d.code, "NO_SHARD");
  EXPECT_EQ(d.message,
            "holds no shard: its descriptors lie in the shard folders gfx90a, gfx940 below it (it is an "
            "out root; a shard is OUT_ROOT/<arch>/); did you mean " +
                (t.root() / "gfx90a").string() + "?");
  EXPECT_EQ(r.packs, 0u);  // nothing was loaded
  // The shard it points at is no wrong folder.
  const ukdpack::ValidationReport shard = ukdpack::validateRoots({t.path("gfx90a")});
  EXPECT_EQ(ukdtest::findDiag(shard.diagnostics, "NO_SHARD"), nullptr) << dump(shard.diagnostics);
  EXPECT_EQ(shard.packs, 1u);
}

TEST(ValidateFolder, OneWrongRootAmongSeveralFailsTheRun) {
  TempTree good, empty;
  writeTree(good, "", false);
  const ukdpack::ValidationReport r = ukdpack::validateRoots({good.root(), empty.root()});
  EXPECT_FALSE(r.ok);
  const ukdpack::Diagnostic& d = onlyDiagnostic(r);
  EXPECT_EQ(d.code, "NO_SHARD");
  EXPECT_EQ(d.file, empty.root().string());
}

TEST(ValidateFolder, AnEmptyFolderWithArchFoldersSuggestsOne) {
  TempTree t;
  fs::create_directories(t.path("gfx1030"));
  fs::create_directories(t.path("notes"));
  EXPECT_EQ(onlyDiagnostic(ukdpack::validateRoots({t.root()})).message,
            "holds no shard: no descriptor file (<name>.<type>.json) lies under it; did you mean " +
                (t.root() / "gfx1030").string() + "?");
}

TEST(ValidateFolder, ArchNamedFoldersWithoutArchivesAreAnAuthoredLayout) {
  // Descriptors only under gfx90a/, but no kpack/ there: an authored root, not an out root.
  TempTree t;
  writeTree(t, "gfx90a/", false);
  const ukdpack::ValidationReport r = ukdpack::validateRoots({t.root()});
  EXPECT_EQ(ukdtest::findDiag(r.diagnostics, "NO_SHARD"), nullptr) << dump(r.diagnostics);
  EXPECT_EQ(r.packs, 1u);
  // A descriptor beside the shard folders makes it no out root either.
  TempTree mixed;
  writeTree(mixed, "gfx90a/", true);
  mixed.write("top.udd.json", ukdtest::udd("udd-top", "sym_top"));
  EXPECT_FALSE(ukdpack::noShardReason(mixed.root()).has_value());
}

TEST(LoadShard, AnOutRootIsOneNoShardErrorNotADuplicateIdPerDescriptor) {
  // A consuming library's common slip: loadShard("out") for loadShard("out/gfx90a").
  TempTree t;
  writeTree(t, "gfx940/", true);
  writeTree(t, "gfx90a/", true);
  const ukdpack::DescriptorSet set = ukdpack::loadShard(t.root());
  EXPECT_FALSE(set.ok());
  ASSERT_EQ(set.diagnostics.size(), 1u) << dump(set.diagnostics);
  const ukdpack::Diagnostic& d = set.diagnostics.front();
  EXPECT_EQ(d.code, "NO_SHARD");
  EXPECT_EQ(d.file, t.root().string());
  EXPECT_EQ(d.message,
            "holds no shard: its descriptors lie in the shard folders gfx90a, gfx940 below it (it is an "
            "out root; a shard is OUT_ROOT/<arch>/); did you mean " +
                (t.root() / "gfx90a").string() + "?");
  EXPECT_TRUE(set.packs.empty());
  // The shard it names loads, and so do an authored root of arch-named folders
  // (no kpack/ there) and an empty folder (nothing to load, nothing wrong).
  EXPECT_TRUE(ukdpack::loadShard(t.path("gfx90a")).ok()) << dump(ukdpack::loadShard(t.path("gfx90a")).diagnostics);
  TempTree authored, empty;
  writeTree(authored, "gfx90a/", false);
  EXPECT_EQ(ukdtest::findDiag(ukdpack::loadShard(authored.root()).diagnostics, "NO_SHARD"), nullptr);
  EXPECT_TRUE(ukdpack::loadShard(empty.root()).diagnostics.empty());
}

TEST(LocateLibrary, ALinkedArchiveFolderIsRefusedEvenInsideTheShard) {
  TempTree t;
  t.writeBytes("archives/kernels_gfx90a.kpack", {1, 2, 3});
  fs::create_directory_symlink(t.path("archives"), t.path("kpack"));
  auto linked = ukdpack::locateLibrary(t.root(), t.path("ops"), "../kpack/kernels_gfx90a.kpack");
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.error().code, "LIBRARY_SYMLINK");
  EXPECT_EQ(linked.error().message,
            "library '../kpack/kernels_gfx90a.kpack' goes through the symbolic link 'kpack'; the runtime "
            "follows no link inside a shard");
  EXPECT_EQ(linked.error().file, "");  // the caller names the descriptor
  EXPECT_EQ(linked.error().jsonPath, "");

  auto direct = ukdpack::locateLibrary(t.root(), t.path("ops"), "../archives/kernels_gfx90a.kpack");
  ASSERT_TRUE(direct) << direct.error().str();
  EXPECT_EQ(direct.value().rootRel, "archives/kernels_gfx90a.kpack");
  EXPECT_EQ(direct.value().path, t.path("archives/kernels_gfx90a.kpack"));
  EXPECT_FALSE(ukdpack::libraryFileMissing(direct.value(), "../archives/kernels_gfx90a.kpack"));
}

TEST(LocateLibrary, EscapesAndMissingFilesAreNamed) {
  TempTree t;
  fs::create_directories(t.path("ops"));
  auto up = ukdpack::locateLibrary(t.root(), t.path("ops"), "../../x.kpack");
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().code, "LIBRARY_ESCAPES");
  EXPECT_EQ(up.error().message, "library '../../x.kpack' leaves the shard root " + t.root().string());
  auto abs = ukdpack::locateLibrary(t.root(), t.path("ops"), "/etc/passwd");
  ASSERT_FALSE(abs);
  EXPECT_EQ(abs.error().code, "LIBRARY_ESCAPES");

  auto gone = ukdpack::locateLibrary(t.root(), t.path("ops"), "../kpack/none.kpack");
  ASSERT_TRUE(gone);  // inside, so far: whether a file is there is the next question
  const auto missing = ukdpack::libraryFileMissing(gone.value(), "../kpack/none.kpack");
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->code, "ARCHIVE_MISSING");
  EXPECT_EQ(missing->message, "archive '../kpack/none.kpack' not found: expected kpack/none.kpack in the shard");
  fs::create_directories(t.path("kpack/dir.kpack"));  // a folder is no archive
  auto folder = ukdpack::locateLibrary(t.root(), t.path("ops"), "../kpack/dir.kpack");
  ASSERT_TRUE(folder);
  EXPECT_TRUE(ukdpack::libraryFileMissing(folder.value(), "../kpack/dir.kpack").has_value());
}
