// The shard index (index.ukdx): a load through it gives the JSON load's set,
// field by field; one that does not bind (missing, stale, truncated, altered,
// hostile) is never used and never changes the result.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "base/binding_digest.hpp"
#include "base/files.hpp"
#include "load/shard_index_impl.hpp"
#include "runtime_support.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/shard_index.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/select/integrity.hpp"
#include "ukdpack/select/state_manager.hpp"

using ukdpack::DescriptorSet;
using ukdpack::LoaderOptions;
using ukdtest::Json;
using ukdtest::TempTree;

namespace {

LoaderOptions jsonOnly() {
  LoaderOptions o;
  o.useIndex = false;
  return o;
}

std::vector<std::string> describe(const DescriptorSet& set) { return ukdpack::detail::describeSet(set); }

// A shard of two packs: inline kernels (one multi-launch, one with its own arch),
// a standalone UKD, and text with escapes and odd spacing the spans must keep.
void writeShard(const TempTree& t) {
  ukdtest::writeGenerics(t);
  Json a = ukdtest::single("ukd-a", "a\u00e9", "A");
  a["priority"] = 7;
  a["arch"] = Json::array({"gfx90a"});
  t.write("one/a.kdp.json", ukdtest::kdp("kdp-a", Json::array({a, ukdtest::single("ukd-b", "b", "B"), "ukd-s"}),
                                         "udd-1", "ued-1", {"gfx90a", "gfx942"}));
  t.write("one/s.ukd.json", ukdtest::single("ukd-s", "s", "S"));
  t.write("two/b.kdp.json",
          "{ \"id\": \"kdp-b\", \"version\": \"1.0\", \"name\": \"b\", \"arch\": [],\n"
          "  \"matchers\": [\"umd-1\"], \"engine\": \"ued-1\", \"dispatch\": \"udd-1\",\n"
          "  \"kernelDescriptors\": [\n    " +
              ukdtest::single("ukd-c", "c\\n", "C").dump() + " ,\n\t" + ukdtest::single("ukd-d", "d", "HALF").dump(2) +
              "]}\n");
}

std::string writeIndex(const TempTree& t) {
  auto built = ukdpack::buildShardIndex(t.root());
  EXPECT_TRUE(built) << (built ? "" : built.error().str());
  if (!built) return "";
  std::ofstream(t.root() / ukdpack::kShardIndexFile, std::ios::binary) << built.value();
  return built.value();
}

// The shard's JSON load (which must say nothing), then its load through the index
// written for it.
std::pair<DescriptorSet, DescriptorSet> jsonAndIndexed(const TempTree& t) {
  DescriptorSet json = ukdpack::loadShard(t.root(), jsonOnly());
  EXPECT_TRUE(json.diagnostics.empty()) << ukdtest::dump(json.diagnostics);
  writeIndex(t);
  return {std::move(json), ukdpack::loadShard(t.root())};
}

void writeBytes(const TempTree& t, const std::string& bytes) {
  std::ofstream(t.root() / ukdpack::kShardIndexFile, std::ios::binary | std::ios::trunc) << bytes;
}

// writeShard's one/a.kdp.json rewritten with ukd-a's priority 7 made 8: the same
// length, so only the digest tells. False when the priority is not found.
bool editPriorityInPlace(const TempTree& t) {
  std::string text;
  {
    std::ifstream in(t.root() / "one/a.kdp.json", std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::size_t at = text.find("\"priority\": 7");
  if (at == std::string::npos) return false;
  text[at + 12] = '8';
  t.write("one/a.kdp.json", text);
  return true;
}

// Sets `rel`'s modification time to the index's, moved by `seconds`.
void dateFromIndex(const TempTree& t, const std::string& rel, int seconds) {
  namespace fs = std::filesystem;
  const fs::file_time_type written = fs::last_write_time(t.root() / ukdpack::kShardIndexFile);
  fs::last_write_time(t.root() / rel, written + std::chrono::seconds(seconds));
}

// A load that read editPriorityInPlace's edit: from the JSON, the index said stale.
void expectTheEditRead(const DescriptorSet& s) {
  EXPECT_FALSE(s.fromIndex);
  EXPECT_NE(s.indexReason.find("one/a.kdp.json is not the file it was written for"), std::string::npos)
      << s.indexReason;
  EXPECT_EQ(s.findKernel("ukd-a")->kernel().priority, 8);
}

// Every file of the shard but its index dated `seconds` from the index.
void dateAllFromIndex(const TempTree& t, int seconds) {
  namespace fs = std::filesystem;
  for (const auto& e : fs::recursive_directory_iterator(t.root())) {
    if (e.is_regular_file() && e.path().filename() != ukdpack::kShardIndexFile)
      dateFromIndex(t, fs::relative(e.path(), t.root()).generic_string(), seconds);
  }
}

// Every folder of the shard below its root dated `seconds` from the index.
void dateFoldersFromIndex(const TempTree& t, int seconds) {
  namespace fs = std::filesystem;
  for (const auto& e : fs::recursive_directory_iterator(t.root())) {
    if (e.is_directory()) dateFromIndex(t, fs::relative(e.path(), t.root()).generic_string(), seconds);
  }
}

// A shard as installed: every file and folder older than its index.
void writeInstalledShard(const TempTree& t) {
  writeShard(t);
  writeIndex(t);
  dateAllFromIndex(t, -10);
  dateFoldersFromIndex(t, -10);
}

// `bytes` (an index) with its header's digest made that of its body again: what
// whoever edits an index can do.
std::string resealed(std::string bytes) {
  const std::string hex = ukdpack::detail::bindingDigestHex(bytes.data() + 32, bytes.size() - 32);
  for (std::size_t i = 0; i < 16; ++i) bytes[16 + i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

}  // namespace

// The binding digest is XXH3-128 in xxHash's canonical (big-endian) form: the
// published value for no bytes, and every digest a different 32 hex digits.
TEST(ShardIndex, TheBindingDigestIsXxh3OneTwentyEight) {
  using ukdpack::detail::bindingDigestHex;
  EXPECT_EQ(bindingDigestHex("", 0), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(bindingDigestHex("ukdpack", 7), "24c332bc0430436b1309c40af7fcfdb9");
  EXPECT_NE(bindingDigestHex("ukdpacl", 7), bindingDigestHex("ukdpack", 7));
}

// An index of format 1 (files bound by sha256), 2 (no skeletons), 3 (no folders) or 4
// (each kernel's lists written out) is another
// format: not read, the JSON load instead, and the reason names both formats.
TEST(ShardIndex, AnIndexOfAnEarlierFormatIsNotRead) {
  TempTree t;
  writeShard(t);
  const std::string written = writeIndex(t);
  ASSERT_GT(written.size(), 8u);
  for (const char format : {1, 2, 3, 4, 5}) {
    std::string bytes = written;
    bytes[4] = format;  // the u32 format, little-endian
    writeBytes(t, bytes);
    const DescriptorSet s = ukdpack::loadShard(t.root());
    EXPECT_FALSE(s.fromIndex);
    EXPECT_EQ(s.indexReason, "index.ukdx has format " + std::to_string(format) + "; this reader reads format 6");
    EXPECT_EQ(describe(s), describe(ukdpack::loadShard(t.root(), jsonOnly())));
  }
}

TEST(ShardIndex, LoadsWhatTheJsonLoadsAndIsByteReproducible) {
  TempTree t;
  writeShard(t);
  const DescriptorSet json = ukdpack::loadShard(t.root(), jsonOnly());
  ASSERT_TRUE(json.diagnostics.empty()) << ukdtest::dump(json.diagnostics);
  EXPECT_FALSE(json.fromIndex);
  EXPECT_EQ(json.indexReason, "");
  const DescriptorSet none = ukdpack::loadShard(t.root());
  EXPECT_FALSE(none.fromIndex);
  EXPECT_EQ(none.indexReason, "the shard has no index.ukdx");
  const std::string bytes = writeIndex(t);
  EXPECT_EQ(bytes.substr(0, 4), "UKDX");
  EXPECT_EQ(writeIndex(t), bytes);  // the index file itself is no descriptor: the same bytes again
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  EXPECT_TRUE(indexed.fromIndex) << indexed.indexReason;
  EXPECT_EQ(describe(indexed), describe(json));
  const auto check = ukdpack::checkShardIndex(t.root());
  EXPECT_TRUE(check.present && check.binds && check.difference.empty()) << check.why << check.difference;
  // Options other than the defaults never read it.
  LoaderOptions authoredLike;
  authoredLike.sourceFiles = true;
  EXPECT_FALSE(ukdpack::loadShard(t.root(), authoredLike).fromIndex);
}

// A folder of no descriptor files loads empty, and its index (of no files) binds to it
// as any index binds to the files it lists: before, a load through it was told as not
// through its index, with no reason given (found by fuzz_loader).
TEST(ShardIndex, AnIndexOfNoDescriptorFilesBindsToAFolderOfNone) {
  TempTree t;
  t.write("notes.kdp.txt", std::string("{ \"id\": \"kdp-a\" }\n"));  // not named as a descriptor: not walked
  const DescriptorSet json = ukdpack::loadShard(t.root(), jsonOnly());
  ASSERT_TRUE(json.diagnostics.empty()) << ukdtest::dump(json.diagnostics);
  ASSERT_TRUE(json.packs.empty());
  writeIndex(t);
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  EXPECT_TRUE(indexed.fromIndex) << "'" << indexed.indexReason << "'";
  EXPECT_EQ(indexed.indexReason, "");
  EXPECT_EQ(describe(indexed), describe(json));
  const auto check = ukdpack::checkShardIndex(t.root());
  EXPECT_TRUE(check.present && check.binds && check.difference.empty()) << check.why << check.difference;
  // A descriptor added since is a stale listing, told as one.
  writeShard(t);
  const DescriptorSet stale = ukdpack::loadShard(t.root());
  EXPECT_FALSE(stale.fromIndex);
  EXPECT_NE(stale.indexReason.find("is stale"), std::string::npos) << stale.indexReason;
}

// An index of a megabyte or more is read into pages of its own (base/files.hpp,
// readRegularFileHeld), not a string: every byte as written, whatever the size
// against the 2 MiB pages, and a shard with such an index loads what its JSON loads.
TEST(ShardIndex, ABigIndexIsReadIntoPagesOfItsOwnByteForByte) {
  TempTree t;
  for (const std::size_t size : {std::size_t{0}, std::size_t{4095}, std::size_t{1} << 20, (std::size_t{2} << 20) + 3,
                                 (std::size_t{5} << 20) - 1}) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 4099) & 0xff);
    t.write("bytes.bin", bytes);
    auto held = ukdpack::detail::readRegularFileHeld(t.path("bytes.bin"), std::uint64_t{1} << 30);
    ASSERT_TRUE(held) << held.error().str();
    EXPECT_TRUE(held.value().bytes == bytes) << size;
    EXPECT_NE(held.value().owner, nullptr) << size;
    auto over = ukdpack::detail::readRegularFileHeld(t.path("bytes.bin"), size == 0 ? 0 : size - 1);
    EXPECT_EQ(static_cast<bool>(over), size == 0) << size;
  }
  ukdtest::writeGenerics(t);
  constexpr int kPacks = 12, kKernels = 1300;
  for (int p = 0; p < kPacks; ++p) {
    Json kernels = Json::array();
    for (int k = 0; k < kKernels; ++k) {
      const std::string id = "ukd-" + std::to_string(p) + "-" + std::to_string(k);
      kernels.push_back(ukdtest::single(id, "k" + std::to_string(k), "K" + id));
    }
    t.write("big/p" + std::to_string(p) + ".kdp.json",
            ukdtest::kdp("kdp-" + std::to_string(p), kernels, "udd-1", "ued-1", {"gfx90a"}));
  }
  const DescriptorSet json = ukdpack::loadShard(t.root(), jsonOnly());
  ASSERT_TRUE(json.diagnostics.empty()) << ukdtest::dump(json.diagnostics);
  const std::string index = writeIndex(t);
  ASSERT_GE(index.size(), std::size_t{1} << 20) << "the shard's index no longer takes the held pages";
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  EXPECT_TRUE(indexed.fromIndex) << indexed.indexReason;
  EXPECT_EQ(describe(indexed), describe(json));
}

// What the state manager ranks and filters on comes from the index's records, the
// kernel unbuilt: each member's id, priority, arches and launch names equal the
// JSON load's, whichever lists its neighbours name (the records share lists).
TEST(ShardIndex, UnbuiltKernelsReadTheirRecordsAsTheJsonLoadsThem) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json kernels = Json::array();
  const std::vector<Json> arches = {Json::array({"gfx90a"}),           Json(),
                                    Json::array({"gfx90a"}),           Json::array({"gfx942", "gfx90a"}),
                                    Json::array({"gfx942", "gfx90a"}), Json()};
  for (std::size_t i = 0; i < arches.size(); ++i) {
    const std::string id = "ukd-" + std::to_string(i);
    Json k = i % 3 == 1 ? ukdtest::multi(id, id, {"produce", "consume"}) : ukdtest::single(id, id);
    k["priority"] = static_cast<int>(i) - 2;
    k["metadata"]["block"] = static_cast<int>(i);
    if (!arches[i].is_null()) k["arch"] = arches[i];
    kernels.push_back(k);
  }
  t.write("p.kdp.json", ukdtest::kdp("kdp-p", kernels, "udd-1", "ued-1", {"gfx90a", "gfx942"}));
  const auto [json, indexed] = jsonAndIndexed(t);
  ASSERT_TRUE(indexed.fromIndex) << indexed.indexReason;
  ASSERT_EQ(indexed.packs.size(), 1u);
  const auto& got = indexed.packs[0].members;
  const auto& want = json.packs[0].members;
  ASSERT_EQ(got.size(), arches.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].deferred());
    EXPECT_EQ(got[i].id(), want[i].kernel().id) << i;
    EXPECT_EQ(got[i].priority(), want[i].kernel().priority) << i;
    EXPECT_EQ(got[i].arch(), want[i].kernel().arch) << i;
    EXPECT_EQ(got[i].launchNames(), want[i].launchNames()) << i;
    EXPECT_EQ(got[i].root, want[i].root) << i;
  }
  EXPECT_EQ(describe(indexed), describe(json));
}

// A pack's list may name standalone UKDs between its inline kernels: each inline
// kernel's record is its own place's (a record taken from the member at the same
// position of the members, or from the wrong place, reads another kernel's span).
TEST(ShardIndex, InlineKernelsBetweenReferencesKeepTheirOwnPlaces) {
  TempTree t;
  ukdtest::writeGenerics(t);
  Json list = Json::array({"ukd-s", ukdtest::single("ukd-x", "x", "X"), "ukd-u", ukdtest::single("ukd-y", "y", "Y"),
                           ukdtest::single("ukd-z", "z", "Z")});
  list[1]["priority"] = 3;
  list[3]["priority"] = -1;
  t.write("p.kdp.json", ukdtest::kdp("kdp-p", list, "udd-1", "ued-1", {"gfx90a"}));
  t.write("s.ukd.json", ukdtest::single("ukd-s", "s", "S"));
  t.write("u.ukd.json", ukdtest::single("ukd-u", "u", "U"));
  const auto [json, indexed] = jsonAndIndexed(t);
  ASSERT_TRUE(indexed.fromIndex) << indexed.indexReason;
  ASSERT_EQ(indexed.packs.size(), 1u);
  std::vector<std::pair<std::size_t, std::string>> places;
  for (const ukdpack::PackMember& m : indexed.packs[0].members) {
    if (m.ref().empty()) places.emplace_back(m.index, std::string(m.id()) + "@" + std::to_string(m.priority()));
  }
  const std::vector<std::pair<std::size_t, std::string>> want = {{1, "ukd-x@3"}, {3, "ukd-y@-1"}, {4, "ukd-z@0"}};
  EXPECT_EQ(places, want);
  EXPECT_EQ(describe(indexed), describe(json));
}

TEST(ShardIndex, AnEditedJsonIsNeverServedFromAStaleIndex) {
  TempTree t;
  writeShard(t);
  writeIndex(t);
  // The same length, one priority changed: only the digest tells.
  ASSERT_TRUE(editPriorityInPlace(t));
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  EXPECT_FALSE(indexed.fromIndex);
  EXPECT_NE(indexed.indexReason.find("one/a.kdp.json is not the file it was written for"), std::string::npos)
      << indexed.indexReason;
  EXPECT_EQ(describe(indexed), describe(ukdpack::loadShard(t.root(), jsonOnly())));
  EXPECT_EQ(indexed.packs.at(0).members.at(0).kernel().priority, 8);
  // A file added, or one removed: the walk no longer matches.
  TempTree u;
  writeShard(u);
  writeIndex(u);
  u.write("two/extra.umd.json", Json{{"id", "umd-2"}, {"version", "1.0"}, {"name", "m2"}, {"match_symbol", "m2"}});
  const DescriptorSet added = ukdpack::loadShard(u.root());
  EXPECT_FALSE(added.fromIndex);
  EXPECT_NE(added.indexReason.find("is stale"), std::string::npos) << added.indexReason;
  EXPECT_EQ(describe(added), describe(ukdpack::loadShard(u.root(), jsonOnly())));
  // validate names it.
  const auto check = ukdpack::checkShardIndex(u.root());
  EXPECT_TRUE(check.present);
  EXPECT_FALSE(check.binds);
}

// A load through the index keeps no descriptor text: each KDP is read again when a
// kernel (or a raw object) of it is first asked for, and used only while it is still the
// file the index binds. A kernel built before the file changed keeps what it read; one
// asked for after gets what the index says (its id and priority), never the new bytes.
TEST(ShardIndex, AFileChangedAfterTheLoadIsNotReadIntoItsKernels) {
  TempTree t;
  writeShard(t);
  writeIndex(t);
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  ASSERT_TRUE(indexed.fromIndex) << indexed.indexReason;
  const ukdpack::PackMember* before = indexed.findKernel("ukd-c");
  const ukdpack::PackMember* after = indexed.findKernel("ukd-a");
  ASSERT_TRUE(before != nullptr && after != nullptr);
  ASSERT_TRUE(before->deferred() && after->deferred());
  // Built from the file read again, as the JSON load reads it.
  EXPECT_EQ(before->kernel().name, "c\\n");
  EXPECT_NE(before->raw().text().find("\"ukd-c\""), std::string_view::npos);
  // one/a.kdp.json changed in place, the same length: only its digest tells.
  ASSERT_TRUE(editPriorityInPlace(t));
  EXPECT_EQ(after->kernel().id, "ukd-a");
  EXPECT_EQ(after->kernel().priority, 7);     // the index's, not the edited file's 8
  EXPECT_TRUE(after->kernel().name.empty());  // nothing of the file: no name, no source
  EXPECT_TRUE(after->kernel().source.kind.empty() && after->kernel().sources.empty());
  EXPECT_TRUE(after->raw().isNull());
  // Its launch code and plan are refused with the cause, not looked for in the edited file.
  EXPECT_NE(after->kernel().unreadable.find("its file is not the one the shard's index.ukdx records"),
            std::string::npos)
      << after->kernel().unreadable;
  const auto code = ukdpack::loadLaunchCode(indexed, "ukd-a", std::nullopt, "gfx90a");
  ASSERT_FALSE(code);
  EXPECT_EQ(code.error().code, ukdpack::codes::SHARD_INDEX) << code.error().str();
  EXPECT_EQ(code.error().file, "one/a.kdp.json");
  EXPECT_NE(code.error().message.find("it changed after the shard was packed or loaded"), std::string::npos)
      << code.error().str();
  const auto plan = ukdpack::capturePlan(after->kernel());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ukdpack::codes::SHARD_INDEX) << plan.error().str();
  // A kernel read normally says nothing there.
  EXPECT_TRUE(before->kernel().unreadable.empty());
  // The other file's kernels are unaffected, and so is what was built before.
  EXPECT_EQ(indexed.findKernel("ukd-d")->kernel().name, "d");
  EXPECT_EQ(before->kernel().name, "c\\n");
}

// A file of the size the index records, modified before the index was written, is
// not read at load: the index's skeleton of it stands for its text, and the load
// through it is the JSON load. Such a file changed with an older time (copied over
// with its times kept) is seen when a kernel of it is first built, which is then
// refused, and by ukdpack-validate, which reads every file.
TEST(ShardIndex, AFileOlderThanTheIndexIsNotReadAtLoad) {
  TempTree t;
  writeShard(t);
  writeIndex(t);
  dateAllFromIndex(t, -10);
  const DescriptorSet json = ukdpack::loadShard(t.root(), jsonOnly());
  const DescriptorSet unread = ukdpack::loadShard(t.root());
  ASSERT_TRUE(unread.fromIndex) << unread.indexReason;
  EXPECT_EQ(describe(unread), describe(json));
  // The same length, one priority changed, dated before the index: not seen at load.
  ASSERT_TRUE(editPriorityInPlace(t));
  dateFromIndex(t, "one/a.kdp.json", -10);
  const DescriptorSet indexed = ukdpack::loadShard(t.root());
  ASSERT_TRUE(indexed.fromIndex) << indexed.indexReason;
  const ukdpack::PackMember* a = indexed.findKernel("ukd-a");
  ASSERT_TRUE(a != nullptr && a->deferred());
  EXPECT_EQ(a->priority(), 7);  // the index's
  EXPECT_NE(a->kernel().unreadable.find("its file is not the one the shard's index.ukdx records"), std::string::npos)
      << a->kernel().unreadable;
  const auto code = ukdpack::loadLaunchCode(indexed, "ukd-a", std::nullopt, "gfx90a");
  ASSERT_FALSE(code);
  EXPECT_EQ(code.error().code, ukdpack::codes::SHARD_INDEX) << code.error().str();
  EXPECT_EQ(indexed.findKernel("ukd-c")->kernel().name, "c\\n");  // the other file's kernels build
  const auto check = ukdpack::checkShardIndex(t.root());
  EXPECT_TRUE(check.present);
  EXPECT_FALSE(check.binds);
  EXPECT_NE(check.why.find("one/a.kdp.json is not the file it was written for"), std::string::npos) << check.why;
  // Dated at or after the index, the same edit is read and seen at load.
  dateFromIndex(t, "one/a.kdp.json", 0);
  expectTheEditRead(ukdpack::loadShard(t.root()));
}

// While no folder of the shard changed since its index was written, the files are the
// ones the index lists, not walked: the same set. Each file is still looked at (one
// edited in place is read at load), and a file added or removed anywhere the walk
// looks, or a folder added, has the walk run again.
TEST(ShardIndex, ALoadTakesItsFilesFromTheIndexWhileNoFolderChanged) {
  namespace fs = std::filesystem;
  TempTree t;
  writeInstalledShard(t);
  const std::vector<std::string> json = describe(ukdpack::loadShard(t.root(), jsonOnly()));
  const DescriptorSet listed = ukdpack::loadShard(t.root());
  ASSERT_TRUE(listed.fromIndex) << listed.indexReason;
  EXPECT_TRUE(listed.listedByIndex);
  EXPECT_EQ(describe(listed), json);
  EXPECT_EQ(listed.files.size(), 7u);
  // The archive folder is not walked, nor is a file the walk would not read.
  fs::create_directory(t.root() / "kpack");
  std::ofstream(t.root() / "NOTES.txt") << "x";
  EXPECT_TRUE(ukdpack::loadShard(t.root()).listedByIndex);
  // validate reads and walks everything, whatever the times.
  EXPECT_FALSE(ukdpack::detail::loadShardReadingEveryFile(t.root()).listedByIndex);
  // One edited in place, its folder unchanged: still read at load, by its time.
  ASSERT_TRUE(editPriorityInPlace(t));
  expectTheEditRead(ukdpack::loadShard(t.root()));

  // A file added to a folder: the folder changed, the walk runs and finds it.
  TempTree added;
  writeInstalledShard(added);
  added.write("two/extra.umd.json", Json{{"id", "umd-2"}, {"version", "1.0"}, {"name", "m2"}, {"match_symbol", "m2"}});
  const DescriptorSet a = ukdpack::loadShard(added.root());
  EXPECT_FALSE(a.fromIndex || a.listedByIndex);
  EXPECT_NE(a.indexReason.find("is stale"), std::string::npos) << a.indexReason;
  EXPECT_EQ(describe(a), describe(ukdpack::loadShard(added.root(), jsonOnly())));
  // One removed: the same.
  TempTree removed;
  writeInstalledShard(removed);
  fs::remove(removed.root() / "one/s.ukd.json");
  const DescriptorSet r = ukdpack::loadShard(removed.root());
  EXPECT_FALSE(r.fromIndex || r.listedByIndex);
  EXPECT_EQ(describe(r), describe(ukdpack::loadShard(removed.root(), jsonOnly())));
  // One added at the top, whose folder is the index's own: its listing tells.
  TempTree top;
  writeInstalledShard(top);
  top.write("extra.umd.json", Json{{"id", "umd-2"}, {"version", "1.0"}, {"name", "m2"}, {"match_symbol", "m2"}});
  const DescriptorSet o = ukdpack::loadShard(top.root());
  EXPECT_FALSE(o.fromIndex || o.listedByIndex);
  EXPECT_EQ(describe(o), describe(ukdpack::loadShard(top.root(), jsonOnly())));
  // A folder added (empty): walked, and the index still binds.
  TempTree folder;
  writeInstalledShard(folder);
  fs::create_directory(folder.root() / "three");
  const DescriptorSet f = ukdpack::loadShard(folder.root());
  EXPECT_TRUE(f.fromIndex) << f.indexReason;
  EXPECT_FALSE(f.listedByIndex);
  // A folder replaced by a link to a copy of it: a link is no folder of the walk's.
  TempTree linked;
  writeInstalledShard(linked);
  fs::rename(linked.root() / "two", linked.root() / "two-real");
  fs::create_directory_symlink("two-real", linked.root() / "two");
  const DescriptorSet l = ukdpack::loadShard(linked.root());
  EXPECT_FALSE(l.listedByIndex);
  EXPECT_EQ(describe(l), describe(ukdpack::loadShard(linked.root(), jsonOnly())));
}

// An index whose folders or files are no walk's (outside the shard, dot-prefixed, of
// another type, out of order, in a folder it does not list) is not read, even with a
// valid digest: the load could otherwise be sent outside the shard without walking.
TEST(ShardIndex, AnIndexListingAPathNoWalkGivesIsNotRead) {
  TempTree t;
  writeInstalledShard(t);
  const std::string bytes = writeIndex(t);
  dateFoldersFromIndex(t, -10);
  const std::vector<std::string> json = describe(ukdpack::loadShard(t.root(), jsonOnly()));
  // Each name as the body holds it (its u32 length, then its bytes), and a replacement of its length.
  const auto named = [](const std::string& s) {
    return std::string(1, static_cast<char>(s.size())) + '\0' + '\0' + '\0' + s;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"one", "../"},                        // a folder outside the shard
      {"one", ".on"},                        // a dot-prefixed folder
      {"two", "aaa"},                        // folders out of order
      {"one/a.kdp.json", "/ne/a.kdp.json"},  // an absolute path
      {"one/a.kdp.json", "..//a.kdp.json"},  // a path that climbs out of the shard
      {"two/b.kdp.json", "two/b.ukd.json"},  // a name of another type than its record's
      {"two/b.kdp.json", "six/b.kdp.json"},  // a file in a folder the index does not list
  };
  for (const auto& [from, to] : cases) {
    ASSERT_EQ(from.size(), to.size()) << to;
    std::string hostile = bytes;
    const std::size_t at = hostile.find(named(from));
    ASSERT_NE(at, std::string::npos) << from;
    hostile.replace(at + 4, from.size(), to);
    writeBytes(t, resealed(hostile));
    std::string why;
    EXPECT_FALSE(ukdpack::detail::parseShardIndex(std::make_shared<const std::string>(resealed(hostile)), why)) << to;
    EXPECT_NE(why.find("that no walk of a shard gives"), std::string::npos) << why;
    const DescriptorSet s = ukdpack::loadShard(t.root());
    EXPECT_FALSE(s.fromIndex || s.listedByIndex) << to;
    EXPECT_EQ(describe(s), json) << to;
  }
  // The same bytes resealed unchanged are read.
  writeBytes(t, resealed(bytes));
  EXPECT_TRUE(ukdpack::loadShard(t.root()).fromIndex);
}

// Each kernel names its arch and launch lists by their place in its file's lists: a
// place past them (with a valid digest) has the index refused, never read past.
TEST(ShardIndex, AKernelNamingAListItsFileDoesNotHaveIsNotRead) {
  TempTree t;
  writeShard(t);
  const std::string bytes = writeIndex(t);
  const std::vector<std::string> json = describe(ukdpack::loadShard(t.root(), jsonOnly()));
  // ukd-c's record: its id (u32 length, bytes), its i64 priority, then its u32 arch and launch places.
  const std::string id = std::string("\x05\0\0\0ukd-c", 9);
  const std::size_t at = bytes.find(id);
  ASSERT_NE(at, std::string::npos);
  for (const std::size_t field : {at + id.size() + 8, at + id.size() + 12}) {
    std::string hostile = bytes;
    hostile.replace(field, 4, std::string("\x40\0\0\0", 4));  // place 64 of a file with one list
    std::string why;
    EXPECT_FALSE(ukdpack::detail::parseShardIndex(std::make_shared<const std::string>(resealed(hostile)), why));
    EXPECT_NE(why.find("names a list a kernel of two/b.kdp.json does not have"), std::string::npos) << why;
    writeBytes(t, resealed(hostile));
    const DescriptorSet s = ukdpack::loadShard(t.root());
    EXPECT_FALSE(s.fromIndex);
    EXPECT_EQ(describe(s), json);
  }
}

// An index dated after the present (a clock ahead, a copy dated ahead) says nothing
// of the files' times: every file is read and checked against it.
// A load through the index hands its set the selection tables the writer made from the
// JSON load; a state manager over either set ranks and finds alike (device_select_test
// runs the ranking's edges both ways).
TEST(ShardIndex, ALoadThroughTheIndexCarriesTheJsonLoadsSelectionTables) {
  TempTree t;
  writeShard(t);
  const auto [json, indexed] = jsonAndIndexed(t);
  ASSERT_TRUE(indexed.fromIndex) << indexed.indexReason;
  EXPECT_EQ(json.selection, nullptr);
  ASSERT_NE(indexed.selection, nullptr);
  const ukdpack::SelectionTables want = ukdpack::selectionTablesOf(json);
  EXPECT_EQ(want.members, 5u);
  EXPECT_EQ(indexed.selection->ranking, want.ranking);
  EXPECT_EQ(indexed.selection->idSlots, want.idSlots);
  // ukd-a (priority 7) first, then the others by id: ukd-b, ukd-c, ukd-d (the second
  // pack's), ukd-s (the first pack's reference).
  EXPECT_EQ(want.ranking, (std::vector<std::uint32_t>{0, 1, 3, 4, 2}));
  const ukdpack::StateManager sm(indexed, ukdpack::stubRegistry(indexed), "gfx90a");
  for (const char* id : {"ukd-a", "ukd-b", "ukd-s", "ukd-c", "ukd-d"}) {
    ASSERT_NE(sm.find(id), nullptr) << id;
    EXPECT_EQ(sm.find(id)->kernel()->id, id);
  }
  EXPECT_EQ(sm.find("ukd-"), nullptr);
  // A set edited after its load (a member gone) is ranked anew, not by tables made for another.
  DescriptorSet edited = indexed;
  edited.packs.front().members.erase(edited.packs.front().members.begin());
  const ukdpack::StateManager again(edited, ukdpack::stubRegistry(edited), "gfx90a");
  EXPECT_EQ(again.find("ukd-a"), nullptr);
  ASSERT_NE(again.find("ukd-d"), nullptr);
  EXPECT_EQ(again.kept().size(), 4u);
}

// The tables end the index: the ranking's u32s, then the id table's (16 slots for 5 members).
std::size_t rankingAt(const std::string& bytes) { return bytes.size() - 16 * 4 - 4 - 5 * 4; }
std::size_t slotsAt(const std::string& bytes) { return bytes.size() - 16 * 4; }

// Tables that are not an order of the members and a table of their places are never
// read, digest or not: a start-up indexes with them unchecked.
TEST(ShardIndex, SelectionTablesOutOfRangeAreNotRead) {
  TempTree t;
  writeShard(t);
  const std::string written = writeIndex(t);
  ASSERT_EQ(written[rankingAt(written) - 4], 5);
  const auto u32At = [](std::string& b, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  std::string twice = written;  // one member ranked twice
  u32At(twice, rankingAt(twice) + 4, 0);
  std::string past = written;  // a member past the last
  u32At(past, rankingAt(past), 5);
  std::string slotPast = written;  // an id slot naming a sixth member
  std::size_t used = slotsAt(written);
  while (written[used] == 0) used += 4;
  u32At(slotPast, used, 6);
  std::string full = written;  // every slot taken: a probe would never end
  for (std::size_t i = 0; i < 16; ++i) u32At(full, slotsAt(full) + 4 * i, static_cast<std::uint32_t>(i % 5 + 1));
  for (const std::string& bytes : {twice, past, slotPast, full}) {
    writeBytes(t, resealed(bytes));
    const DescriptorSet s = ukdpack::loadShard(t.root());
    EXPECT_FALSE(s.fromIndex);
    EXPECT_EQ(s.selection, nullptr);
    EXPECT_NE(s.indexReason.find("selection tables are not an order and a table of its kernels"), std::string::npos)
        << s.indexReason;
  }
}

// Tables in range but not the kernels' own (another order, written by whoever can edit
// an index): a load takes them, as it takes the index's priorities; ukdpack-validate
// compares them with the JSON load's and says so.
TEST(ShardIndex, ValidateTellsTablesThatAreNotTheKernelsOwn) {
  TempTree t;
  writeShard(t);
  std::string bytes = writeIndex(t);
  std::swap(bytes[rankingAt(bytes)], bytes[rankingAt(bytes) + 4]);
  writeBytes(t, resealed(bytes));
  const ukdpack::ShardIndexCheck check = ukdpack::checkShardIndex(t.root());
  EXPECT_TRUE(check.binds) << check.why;
  EXPECT_EQ(check.difference, "the index ranks the kernels in another order");
  writeIndex(t);
  EXPECT_EQ(ukdpack::checkShardIndex(t.root()).difference, "");
}

TEST(ShardIndex, AnIndexDatedAheadIsCheckedFileByFile) {
  TempTree t;
  writeShard(t);
  writeIndex(t);
  namespace fs = std::filesystem;
  const fs::path index = t.root() / ukdpack::kShardIndexFile;
  fs::last_write_time(index, fs::file_time_type::clock::now() + std::chrono::hours(24));
  ASSERT_TRUE(editPriorityInPlace(t));
  dateFromIndex(t, "one/a.kdp.json", -3600);  // still before the index
  expectTheEditRead(ukdpack::loadShard(t.root()));
}

TEST(ShardIndex, TruncatedOrAlteredBytesNeverChangeTheResult) {
  TempTree t;
  writeShard(t);
  const std::string bytes = writeIndex(t);
  const std::vector<std::string> json = describe(ukdpack::loadShard(t.root(), jsonOnly()));
  ASSERT_GT(bytes.size(), 100u);
  std::size_t used = 0;
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 8) {
    writeBytes(t, bytes.substr(0, n));
    const DescriptorSet s = ukdpack::loadShard(t.root());
    EXPECT_FALSE(s.fromIndex) << n;
    EXPECT_FALSE(s.indexReason.empty()) << n;
    EXPECT_EQ(describe(s), json) << n;
  }
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::string altered = bytes;
    altered[i] = static_cast<char>(altered[i] ^ 0x5a);
    writeBytes(t, altered);
    const DescriptorSet s = ukdpack::loadShard(t.root());
    used += s.fromIndex ? 1 : 0;
    EXPECT_EQ(describe(s), json) << i;
  }
  EXPECT_EQ(used, 0u);  // the body's digest catches every altered byte
}

TEST(ShardIndex, AHostileIndexWithAValidDigestIsCaughtByItsSpans) {
  TempTree t;
  writeShard(t);
  const std::string bytes = writeIndex(t);
  std::string why;
  auto index = ukdpack::detail::parseShardIndex(std::make_shared<const std::string>(bytes), why);
  ASSERT_TRUE(index) << why;
  const std::vector<std::string> json = describe(ukdpack::loadShard(t.root(), jsonOnly()));
  // Each span moved by one byte, or two kernels' spans swapped: the spans no longer
  // are the kernelDescriptors objects, so the file is read as written.
  for (auto& f : index->files) {
    if (f.kernels.size() < 2) continue;
    ukdpack::detail::ShardIndex moved = *index;
    for (auto& g : moved.files)
      if (g.rel == f.rel) ++g.kernels[0].begin;
    const DescriptorSet a = ukdpack::detail::loadShardWithIndex(t.root(), moved);
    EXPECT_FALSE(a.fromIndex) << f.rel;
    EXPECT_EQ(describe(a), json);
    ukdpack::detail::ShardIndex swapped = *index;
    for (auto& g : swapped.files)
      if (g.rel == f.rel) std::swap(g.kernels[0], g.kernels[1]);
    const DescriptorSet b = ukdpack::detail::loadShardWithIndex(t.root(), swapped);
    EXPECT_FALSE(b.fromIndex) << f.rel;
    EXPECT_EQ(describe(b), json);
    ukdpack::detail::ShardIndex dropped = *index;
    for (auto& g : dropped.files)
      if (g.rel == f.rel) g.kernels.pop_back();
    const DescriptorSet c = ukdpack::detail::loadShardWithIndex(t.root(), dropped);
    EXPECT_FALSE(c.fromIndex) << f.rel;
    EXPECT_EQ(describe(c), json);
    // A skeleton that fits its spans but is not the file's (another pack name): a
    // file read is cut and compared with it.
    ukdpack::detail::ShardIndex renamed = *index;
    std::string other;
    for (auto& g : renamed.files) {
      if (g.rel != f.rel) continue;
      other = std::string(g.skeleton);
      const std::size_t at = other.find("\"name\"");
      ASSERT_NE(at, std::string::npos) << other;
      const std::size_t value = other.find('"', other.find(':', at)) + 1;
      other[value] = other[value] == 'z' ? 'y' : 'z';
      g.skeleton = other;
    }
    std::vector<std::size_t> places;
    for (const auto& g : renamed.files)
      if (g.rel == f.rel) ASSERT_TRUE(ukdpack::detail::skeletonPlaces(g, places));
    const DescriptorSet d = ukdpack::detail::loadShardWithIndex(t.root(), renamed);
    EXPECT_FALSE(d.fromIndex) << f.rel;
    EXPECT_EQ(describe(d), json);
  }
}

// A skeleton's places are checked without a sum that can wrap: spans at the far end
// of the u64 range, overlapping or out of order are refused, never thrown on.
TEST(ShardIndex, SkeletonPlacesRefuseSpansThatDoNotFit) {
  using ukdpack::detail::IndexedFile;
  using ukdpack::detail::IndexedKernel;
  std::vector<std::size_t> at;
  const auto file = [](std::uint64_t size, std::string_view skeleton,
                       std::vector<std::pair<std::uint64_t, std::uint64_t>> spans) {
    IndexedFile f;
    f.size = size;
    f.skeleton = skeleton;
    for (const auto& [begin, end] : spans) {
      IndexedKernel& k = f.kernels.emplace_back();
      k.begin = begin;
      k.end = end;
    }
    return f;
  };
  constexpr std::uint64_t kMax = UINT64_MAX;
  EXPECT_TRUE(ukdpack::detail::skeletonPlaces(file(12, "[{},{}]", {{1, 4}, {5, 11}}), at));
  EXPECT_EQ(at, (std::vector<std::size_t>{1, 4}));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(kMax, "{}", {{kMax - 1, kMax}}), at));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(kMax, "{}", {{1, kMax}}), at));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(12, "[{},{}]", {{5, 11}, {1, 4}}), at));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(12, "[{},{}]", {{1, 6}, {5, 11}}), at));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(12, "[{},{}] ", {{1, 4}, {5, 11}}), at));
  EXPECT_FALSE(ukdpack::detail::skeletonPlaces(file(4, "{", {{0, 1}}), at));
}

TEST(ShardIndex, AShardWhoseLoadSaysAnythingGetsNone) {
  TempTree t;
  writeShard(t);
  t.write("one/orphan.ukd.json", ukdtest::single("ukd-o", "o", "O"));  // an orphan: a note
  const auto built = ukdpack::buildShardIndex(t.root());
  ASSERT_FALSE(built);
  EXPECT_EQ(built.error().code, ukdpack::codes::SHARD_INDEX);
  EXPECT_NE(built.error().message.find("gives diagnostics"), std::string::npos) << built.error().message;
}

// A repack's draft need not read back a file's inline kernels when the index of the
// shard it replaces (confirmed by this same code, the packer says) records that file
// as the draft does: the same bytes, spans, ids, priorities, arches and launches.
// Only the files the packer names are trusted, only those whose records are equal,
// and none when the previous index does not read.
TEST(ShardIndex, ARepackReadsBackOnlyWhatChangedSinceTheConfirmedIndex) {
  TempTree before;
  writeShard(before);
  writeIndex(before);
  TempTree now;
  writeShard(now);
  Json a = ukdtest::single("ukd-a", "a\u00e9", "A");
  a["priority"] = 8;  // one kernel of one/a.kdp.json edited
  a["arch"] = Json::array({"gfx90a"});
  now.write("one/a.kdp.json", ukdtest::kdp("kdp-a", Json::array({a, ukdtest::single("ukd-b", "b", "B"), "ukd-s"}),
                                           "udd-1", "ued-1", {"gfx90a", "gfx942"}));
  const DescriptorSet json = ukdpack::loadShard(now.root(), jsonOnly());
  ASSERT_TRUE(json.diagnostics.empty()) << ukdtest::dump(json.diagnostics);
  const auto full = ukdpack::draftShardIndex(json);
  ASSERT_TRUE(full);
  const std::vector<std::string> both = {"one/a.kdp.json", "two/b.kdp.json"};
  const auto draft = ukdpack::draftShardIndex(json, {before.root(), both});
  ASSERT_TRUE(draft);
  // The bytes are the index's whatever was read back; only the edited file is.
  EXPECT_EQ(draft.value().bytes, full.value().bytes);
  EXPECT_EQ(draft.value().unchanged, std::vector<std::string>{"two/b.kdp.json"});
  ASSERT_EQ(draft.value().expected.size(), full.value().expected.size());
  for (std::size_t p = 0; p < json.packs.size(); ++p) {
    const bool kept = json.packs[p].file == "two/b.kdp.json";
    const auto& expected = draft.value().expected[p].second;
    ASSERT_EQ(expected.size(), json.packs[p].members.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      // An inline member of the unchanged file is not read back; a standalone UKD always is.
      const bool skipped = kept && json.packs[p].members[i].ref().empty();
      EXPECT_EQ(expected[i].empty(), skipped) << json.packs[p].file << " member " << i;
      if (!skipped) {
        EXPECT_EQ(expected[i], full.value().expected[p].second[i]);
      }
    }
  }
  std::ofstream(now.root() / ukdpack::kShardIndexFile, std::ios::binary) << draft.value().bytes;
  EXPECT_TRUE(ukdpack::confirmShardIndex(now.root(), draft.value()));
  // A file the packer did not name is read back, records equal or not.
  EXPECT_TRUE(ukdpack::draftShardIndex(json, {before.root(), {"one/a.kdp.json"}}).value().unchanged.empty());
  // A previous index that does not read (one body byte flipped) vouches for nothing.
  std::string damaged;
  {
    std::ifstream in(before.root() / ukdpack::kShardIndexFile, std::ios::binary);
    damaged.assign(std::istreambuf_iterator<char>(in), {});
  }
  damaged[damaged.size() - 3] ^= 0x20;
  writeBytes(before, damaged);
  EXPECT_TRUE(ukdpack::draftShardIndex(json, {before.root(), both}).value().unchanged.empty());
  // Nor does a previous shard without one.
  std::filesystem::remove(before.root() / ukdpack::kShardIndexFile);
  EXPECT_TRUE(ukdpack::draftShardIndex(json, {before.root(), both}).value().unchanged.empty());
}
