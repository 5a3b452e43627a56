// containedRegularFile, the loader's fast answer for a file a source names, against the
// std::filesystem path it stands in for (checkContained, then describeFileProblem): over
// every corner of a tree (links in and out of the root, linked folders, '..', absolute
// and Windows-style names, missing files, a folder or a FIFO where a file is named), it
// claims a file only where checkContained finds that file inside the root with no
// message, and the loader's verdicts and messages (fast answer, else checkContained)
// are checkContained's alone.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/paths.hpp"
#include "runtime_support.hpp"

namespace fs = std::filesystem;
using ukdpack::detail::checkContained;
using ukdpack::detail::containedRegularFile;
using ukdpack::detail::describeFileProblem;
using ukdpack::detail::PathProblem;
using ukdpack::detail::RealFolders;
using ukdtest::TempTree;

namespace {

struct Judged {
  PathProblem problem;
  std::string message;
  bool operator==(const Judged& o) const { return problem == o.problem && message == o.message; }
};

std::string show(const Judged& j) {
  return "problem " + std::to_string(static_cast<int>(j.problem)) + ", message '" + j.message + "'";
}

const char* const kWhat = "prebuilt object";
const char* const kDescriptor = "sub/k.kdp.json";

// The std::filesystem path, with or without the caller's caches.
Judged slow(const fs::path& root, const fs::path* realRoot, const fs::path& baseDir, const std::string& name,
            RealFolders* folders) {
  const auto v = checkContained(root, baseDir, name, false, realRoot, folders);
  return {v.problem, describeFileProblem(v, name, kWhat, kDescriptor)};
}

// What the loader does: the fast answer, else the std::filesystem path on the same folders.
Judged loader(const fs::path& root, const fs::path& realRoot, const fs::path& baseDir, const std::string& name,
              RealFolders& folders, bool& fast) {
  fast = containedRegularFile(root, realRoot, baseDir, name, folders);
  if (fast) return {PathProblem::None, ""};
  return slow(root, &realRoot, baseDir, name, &folders);
}

// A tree with every corner, under `t`: the root is t/root (also reached as t/via, a link
// to it), with t/outside beside it.
void makeCorners(const TempTree& t) {
  for (const char* f :
       {"root/a.o", "root/.hidden", "root/..dots", "root/with space.o", "root/\xc3\xa9.o", "root/sub/b.o",
        "root/sub/b2.o", "root/sub/deep/c.o", "root/dir/inner.o", "outside/x.o", "outside/root/a.o"}) {
    t.write(f, std::string("x"));
  }
  for (int i = 0; i < 40; ++i) {  // more folders than a RealFolders keeps open
    t.write("root/many/f" + std::to_string(i) + "/one.o", std::string("x"));
    t.write("root/many/f" + std::to_string(i) + "/two.o", std::string("x"));
  }
  const fs::path r = t.path("root");
  ASSERT_EQ(::mkfifo((r / "fifo").c_str(), 0600), 0);
  fs::create_symlink("a.o", r / "link-in");
  fs::create_symlink("../outside/x.o", r / "link-out");
  fs::create_symlink("nowhere.o", r / "dangling");
  fs::create_symlink("loop", r / "loop");
  fs::create_symlink("dir", r / "link-to-dir");
  fs::create_directory_symlink("sub", r / "linkdir-in");
  fs::create_directory_symlink("../outside", r / "linkdir-out");
  fs::create_directory_symlink("..", r / "linkdir-parent");  // out of the root, and back in through root/
  fs::create_directory_symlink("../..", r / "sub/up");
  fs::create_directory_symlink(r, t.path("via"));
}

std::vector<std::string> cornerNames() {
  std::vector<std::string> names = {
      // plain names of files that are there
      "a.o", "sub/b.o", "sub/b2.o", "sub/deep/c.o", ".hidden", "..dots", "with space.o", "\xc3\xa9.o", "b.o",
      "deep/c.o", "c.o",
      // missing, or something else than a regular file
      "missing.o", "sub/missing.o", "nofolder/x.o", "dir", "sub", "fifo", "a.o/x", "sub/b.o/x",
      // links
      "link-in", "link-out", "dangling", "loop", "loop/x.o", "link-to-dir", "linkdir-in/b.o", "linkdir-in/missing.o",
      "linkdir-out/x.o", "linkdir-out/missing.o", "linkdir-parent/root/a.o", "linkdir-parent/outside/x.o",
      "linkdir-parent/root", "sub/up/outside/x.o", "sub/up/root/sub/b.o", "up/outside/x.o", "up/root/a.o",
      // '.', '..', empty components, absolute, drive and Windows spellings
      ".", "..", "./a.o", "sub/./b.o", "sub/../a.o", "../a.o", "../outside/x.o", "../root/a.o", "sub/../../outside/x.o",
      "../../etc/passwd", "sub//b.o", "a.o/", "sub/", "", "/", "/etc/passwd", "//a.o", "sub\\b.o", "..\\outside\\x.o",
      "c:/x.o", "c:x.o", "a:b", "\\a.o", std::string("a.o\0x", 5)};
  for (int i = 0; i < 40; ++i) {
    const std::string f = "many/f" + std::to_string(i) + "/";
    names.push_back(f + "one.o");
    names.push_back(f + "two.o");
    names.push_back(f + "three.o");
  }
  return names;
}

}  // namespace

TEST(PathsFast, SameVerdictsAndMessagesAsTheFilesystemPath) {
  TempTree t;
  makeCorners(t);
  if (HasFatalFailure()) return;
  const std::vector<std::string> names = cornerNames();
  const fs::path real = fs::weakly_canonical(t.path("root"));
  // Every plain name of a regular file inside the root is answered fast, from each base.
  const std::set<std::string> fastAtRoot = {"a.o",
                                            "sub/b.o",
                                            "sub/b2.o",
                                            "sub/deep/c.o",
                                            ".hidden",
                                            "..dots",
                                            "with space.o",
                                            "\xc3\xa9.o",
                                            "linkdir-in/b.o",
                                            "linkdir-parent/root/a.o",
                                            "sub/up/root/sub/b.o"};
  std::size_t fastCount = 0, cases = 0;
  for (const fs::path& root : {t.path("root"), t.path("via")}) {
    const std::vector<fs::path> bases = {root,
                                         root / "sub",
                                         root / "sub/deep",
                                         root / "linkdir-in",
                                         root / "sub/up",
                                         root / "sub/.",
                                         root.parent_path() / "outside"};
    // One RealFolders for the whole run (a pack's many kernels), and a fresh one per name.
    RealFolders shared, sharedSlow;
    for (const fs::path& base : bases) {
      for (const std::string& name : names) {
        ++cases;
        const Judged reference = slow(root, nullptr, base, name, nullptr);
        const Judged cachedReference = slow(root, &real, base, name, &sharedSlow);
        EXPECT_EQ(cachedReference, reference) << name << " from " << base << ": " << show(cachedReference);
        bool fast = false;
        const Judged got = loader(root, real, base, name, shared, fast);
        EXPECT_EQ(got, reference) << name << " from " << base << ": " << show(got) << " vs " << show(reference);
        RealFolders fresh;
        bool freshFast = false;
        EXPECT_EQ(loader(root, real, base, name, fresh, freshFast), reference) << name << " from " << base;
        EXPECT_EQ(freshFast, fast) << name << " from " << base;
        if (fast) {
          ++fastCount;
          // Claimed only where the std::filesystem path finds a regular file inside the root.
          RealFolders own;  // regularFile is seen only where folders are cached
          const auto v = checkContained(root, base, name, false, &real, &own);
          EXPECT_TRUE(v.problem == PathProblem::None && v.regularFile) << name << " from " << base;
        }
        if (base == root) {
          const bool many = name.rfind("many/", 0) == 0 && name.find("three") == std::string::npos;
          EXPECT_EQ(fast, fastAtRoot.count(name) != 0 || many) << name << " from " << base;
        }
      }
    }
  }
  EXPECT_GT(fastCount, 2 * (fastAtRoot.size() + 80));
  EXPECT_GT(cases, 1000u);
}

// A name that went from a file to something else between two checks is seen anew: the
// folder's cache holds where the folder is, not what its files are.
TEST(PathsFast, SeesAFileChangeInACachedFolder) {
  TempTree t;
  t.write("root/sub/a.o", std::string("x"));
  t.write("root/sub/b.o", std::string("x"));
  t.write("outside.o", std::string("x"));
  const fs::path root = t.path("root");
  const fs::path real = fs::weakly_canonical(root);
  RealFolders folders;
  EXPECT_TRUE(containedRegularFile(root, real, root, "sub/a.o", folders));
  EXPECT_TRUE(containedRegularFile(root, real, root, "sub/b.o", folders));  // the folder is opened here
  fs::remove(root / "sub/a.o");
  fs::create_symlink("../../outside.o", root / "sub/a.o");
  EXPECT_FALSE(containedRegularFile(root, real, root, "sub/a.o", folders));
  const auto v = checkContained(root, root, "sub/a.o", false, &real, &folders);
  EXPECT_EQ(v.problem, PathProblem::LinkEscapes);
  fs::remove(root / "sub/b.o");
  EXPECT_FALSE(containedRegularFile(root, real, root, "sub/b.o", folders));
  EXPECT_EQ(
      describeFileProblem(checkContained(root, root, "sub/b.o", false, &real, &folders), "sub/b.o", kWhat, kDescriptor),
      "prebuilt object 'sub/b.o' not found: expected sub/b.o (paths are relative to the descriptor's folder, "
      "'sub'), found nothing there");
}
