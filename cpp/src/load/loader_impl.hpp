// The loader's parts, shared by the files of load/: the class that holds one
// load while it walks, reads and assembles (see README.md for which file does what).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/paths.hpp"
#include "load/shard_index_impl.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack::detail {

namespace fs = std::filesystem;

// The descriptor type tokens, as file names carry them (<name>.<type>.json).
inline constexpr const char* kDescriptorTypes[] = {"ukd", "kdp", "udd", "ued", "kmd", "umd", "uhd"};
// The largest descriptor file read.
inline constexpr std::uint64_t kMaxDescriptorBytes = 256ull << 20;

// "kdp" -> "KDP", as messages name a type.
std::string upperType(const std::string& t);

// Keeps the members `keep` says yes to, in order (each asked once, in order);
// moves nothing when it keeps them all, the common case.
template <class Keep>
void keepMembers(std::vector<PackMember>& members, Keep&& keep) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!keep(members[i])) continue;
    if (out != i) members[out] = std::move(members[i]);
    ++out;
  }
  members.erase(members.begin() + static_cast<std::ptrdiff_t>(out), members.end());
}

// A standalone UKD file, before packs claim it.
struct Standalone {
  Kernel kernel;
  JsonText raw;
  std::size_t root = 0;
  bool removed = false;
  std::string claimedBy;  // file of the first KDP naming it
};

// What a reference found.
enum class RefFound { Ok, Unloaded, Refused };

// The loader of one load: loadRoot() for each root (walk.cpp finds the files,
// read_file.cpp reads each on its own), then resolve() (resolve.cpp) assembles the set.
class Loader {
 public:
  explicit Loader(const LoaderOptions& options) : options_(options) {}

  void loadRoot(const fs::path& given, std::size_t index);
  // Before loadRoot of a shard: read its index (index.ukdx), or `given`, where it
  // binds. `readEveryFile`: no file is taken by its size and time (ShardIndex::writtenNs).
  void lookForIndex(const ShardIndex* given = nullptr, bool readEveryFile = false) {
    lookForIndex_ = true;
    givenIndex_ = given;
    readEveryFile_ = readEveryFile;
  }
  void resolve();
  DescriptorSet take() { return std::move(set_); }
  // The bound index's selection tables when they were made for `set`'s members (a set
  // the load left as the index's writer loaded it); else nullptr.
  std::shared_ptr<const SelectionTables> selectionFor(const DescriptorSet& set) const;
  std::vector<Diagnostic>& diags() { return set_.diagnostics; }

 private:
  struct Slot {
    std::string type;
    std::size_t index;
  };
  // Where an id was first seen, worded only for a duplicate or a reference to an
  // inline kernel: the strings it points at stay put until compact() (a kernel's
  // path is its pack's list index).
  struct Holder {
    const std::string* file;
    const std::string* path;  // nullptr: a pack's kernel, at `member`
    std::size_t member;
    std::size_t root;
  };
  struct Unloaded {
    std::string file;
    std::string why;     // "did not load" / "was skipped (UDD version 1.2)"
    bool failed = true;  // refused with an error (not skipped by a version gate)
  };
  // What reading one file produced (at most one descriptor), before it joins the set.
  struct FileRead {
    std::vector<Diagnostic> diags;
    std::optional<Pack> pack;
    std::optional<Dispatch> dispatch;
    std::optional<Engine> engine;
    std::optional<MetadataSchema> metadataSchema;
    std::optional<MatcherDescriptor> matcher;
    std::optional<HeuristicDescriptor> heuristic;
    std::optional<Standalone> kernel;
    std::optional<std::string> unloadedId;  // the id of a file that did not load, and why
    std::string unloadedWhy;
    bool unloadedFailed = true;               // with an error, not skipped by a version gate
    std::exception_ptr failure;               // what reading it threw (rethrown in walk order)
    std::string indexMismatch;                // why the shard index does not bind to this file
    bool fromSpans = false;                   // its kernels were read from the index's spans
    std::shared_ptr<SpanKernels> spanReader;  // what builds them
    bool loaded() const { return pack || dispatch || engine || metadataSchema || matcher || heuristic || kernel; }
  };

  // `entry`: the shard index's record of the file, checked against it and, for a
  // KDP, its kernels read from their spans (on any mismatch, the JSON as written).
  // `rootIndex`: the root's place in the set, which each member read records while it is at hand.
  // `scratch`: a buffer the calling thread reuses for the texts it does not keep (a KDP read
  // through the index: its kernels' spans are read from the file again when first built).
  FileRead readFile(const WalkedFile& f, const fs::path& root, std::size_t rootIndex, const IndexedFile* entry,
                    std::string& scratch) const;
  // A shard's own index as read from its folder: nullopt with `why` when it is missing
  // or does not read.
  struct IndexRead {
    std::optional<ShardIndex> index;
    std::string why;
  };
  // The index's record per walked file, when the index (the given one, else `read`)
  // binds to the walk (none for a walk of no files); else nullopt, the reason kept.
  std::optional<std::vector<const IndexedFile*>> bindIndex(const fs::path& root, const std::vector<WalkedFile>& walked,
                                                           IndexRead read);
  void commitFile(const WalkedFile& f, FileRead&& read, std::size_t rootIndex);
  bool kernelSourcesOk(const Kernel& kernel, const fs::path& root, std::vector<Diagnostic>& diags,
                       detail::RealFolders& folders) const;
  void uniqueIds();
  void checkArtifacts();
  void resolveEngines();
  void resolvePacks();
  void checkMetadataUnique();
  void compact();

  // `failed` (when given) is set when the reference names a descriptor refused with an error.
  RefFound lookup(const std::string& ref, const std::string& want, const std::string& ownerFile,
                  const std::string& path, std::string* why = nullptr, bool* failed = nullptr);
  void checkRoleMetrics(const Engine& e, const EngineSlot* slot, bool& refused);
  void checkKnobs(const Engine& e, const MetadataSchema& kmd, const std::vector<std::string>& knobs,
                  const std::string& listPath, const EngineSlot* slot, bool& refused);
  void resolveRoleMaps(const Engine& e, const EngineSlot* slot, std::vector<std::string>& unloaded, bool& refused);
  void checkTrainedAgainst();
  // The slot rules (slots.cpp).
  void checkPackSlot(const Pack& p, bool& refused);
  void checkHeuristicSlot(const Engine& e, const EngineSlot* slot, const std::string& role,
                          const HeuristicDescriptor& h, const std::string& path, bool& refused);
  void checkTrainedSlots();
  void checkSlotsFilled();
  DescriptorInfo* info(const Slot& s);
  void markUnloaded(const DescriptorInfo& d, std::string why) {
    unloaded_[idKey(d.id)] = Unloaded{d.file, std::move(why), true};
  }
  // A kept descriptor of `type` with this id, or nullptr.
  template <class T>
  const T* kept(const std::vector<T>& items, const char* type, const std::string& id) const {
    const auto it = index_.find(idKey(id));
    if (it == index_.end() || it->second.type != type || removed_.count({type, it->second.index}) != 0) return nullptr;
    return &items[it->second.index];
  }

  LoaderOptions options_;
  bool lookForIndex_ = false;
  const ShardIndex* givenIndex_ = nullptr;
  bool readEveryFile_ = false;
  // The index the load reads (its own, or a copy of the given one): the deferred kernels keep it.
  std::shared_ptr<const ShardIndex> boundIndex_;
  // The shard's folder, open while the load lasts when a file may be taken by its size
  // and time (the index's writtenNs): each file's stat starts there.
  std::unique_ptr<const OpenFolder> boundFolder_;
  // The files were taken from the index's list (listingUnchanged), not walked.
  bool listedByIndex_ = false;
  // Pack index -> the reader of its kernels, read through the index.
  std::map<std::size_t, std::shared_ptr<SpanKernels>> spanReaders_;
  DescriptorSet set_;
  std::vector<Standalone> standalone_;
  std::vector<Slot> order_;            // every file-backed descriptor in load order
  std::map<std::string, Slot> index_;  // id key -> kept descriptor (sorted: suggestions iterate it)
  // id key -> where it was first claimed (uniqueIds); its pointers are good until compact().
  std::unordered_map<std::string, Holder> holders_;
  std::unordered_map<std::string, Unloaded> unloaded_;     // id key -> why it is not there
  std::set<std::pair<std::string, std::size_t>> removed_;  // (type, index)
  // Packs refused for a failed reference: left out of the set, yet their kernels that
  // resolve are judged (metadata, launch sets) so one run reports every problem.
  std::set<std::size_t> judgedOnly_;
  // Engines with a pack refused for its slot: which of their slots are empty waits for that fix.
  std::set<std::string> slotRefused_;  // engine id keys
  // The root being read, its links resolved once for every path its kernels name
  // (empty: it did not resolve, and each check resolves it again).
  fs::path realRoot_;
};

}  // namespace ukdpack::detail
