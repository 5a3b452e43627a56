// The descriptor loader: walks one shard (or several roots),
// reads every descriptor strictly, gates versions per type, checks ids and
// references, and returns what loads with a diagnostic for everything else.
// It never throws through its API.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/json/json_text.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack {

// The default budget of bytes one load may decompress from archives (64 GiB).
// A full load of a large real shard, 100,000 kernels of ~200 KiB, decompresses
// ~19.5 GiB; this leaves 3x that, while a hostile archive (many toc keys on one
// payload, each up to KpackLimits::maxOriginalSize) is stopped here instead of
// at entries x 1 GiB.
constexpr std::uint64_t kDefaultMaxDecompressedBytes = std::uint64_t(64) << 30;

struct LoaderOptions {
  // The newest version of each type this reader reads; a test can emulate an
  // older reader (e.g. maxVersions.ukd = {1, 0}).
  VersionLimits maxVersions;
  // Folder names left out of the walk (a build that turns a family off).
  std::vector<std::string> excludeFolders;
  // An authored tree (what the packer reads) instead of a shard: a packed
  // `kpack` source is refused (the packer writes it), a version newer than
  // this build reads is an error rather than skipped (the packer cannot write
  // what it does not read), and every file a source names must exist inside
  // the root.
  bool authored = false;
  // Whether every file an authored source names (a hip `source`, an hsaco
  // `file`) must exist inside the root; on in authored mode and in
  // ukdpack-validate. A consuming library's runtime load leaves it off: a
  // shard holds no authored source, and its loader reads no source file.
  bool sourceFiles = false;
  // The arches whose shards the per-arch rules report on (metadata
  // uniqueness); empty: every arch. A pack reports only on what it packs.
  std::vector<std::string> arches;
  // Bytes the launch code loaded from this set may decompress in all (each
  // payload counted every time it is decompressed; a cache hit of verified
  // bytes is free). Over it, a launch fails DECOMPRESS_BUDGET. The set keeps it
  // (DescriptorSet::maxDecompressedBytes); a state manager and
  // ukdpack-validate spend one budget across their loads.
  std::uint64_t maxDecompressedBytes = kDefaultMaxDecompressedBytes;
  // Threads reading a root's files (0: one per core, at most 16). What each
  // file produces joins the set in walk order, so the result does not depend on it.
  unsigned threads = 0;
  // Whether loadShard may read the shard's index (index.ukdx) instead of
  // scanning every kernel: only with the other options at their defaults, and
  // only when the index binds (ukdpack/load/shard_index.hpp). Off, or when the
  // index does not bind, the JSON load runs; the result is the same either way.
  bool useIndex = true;
};

// Everything one load produced. Pointers returned by the finders point into
// the set: valid while it lives and is not modified.
namespace detail {

// Each kernel's place (pack, member) by id key, made once a set has been scanned for
// a few kernels: a program that asks for one kernel scans (no table to make at load), a
// tool that asks for every kernel looks each up (a scan each was quadratic). A copy
// starts without one (it may be edited apart); a move takes it along.
class KernelPlaces {
 public:
  using Place = std::pair<std::size_t, std::size_t>;
  KernelPlaces() = default;
  KernelPlaces(const KernelPlaces&) {}
  KernelPlaces& operator=(const KernelPlaces& other) {
    if (this != &other) state_ = std::make_shared<State>();
    return *this;
  }
  KernelPlaces(KernelPlaces&& other) noexcept : state_(std::exchange(other.state_, std::make_shared<State>())) {}
  KernelPlaces& operator=(KernelPlaces&& other) noexcept {
    state_ = std::exchange(other.state_, std::make_shared<State>());
    return *this;
  }
  ~KernelPlaces() = default;

  // The places the table holds for `key`'s hash (an id key), first place first, made
  // from `packs` if due; empty: scan (not yet made, or no such hash). The caller
  // takes the first place that holds the id (hashes may collide).
  std::vector<Place> find(const std::vector<Pack>& packs, const std::string& key) const;

 private:
  struct Entry {
    std::size_t hash;  // of the kernel's id key
    Place place;
  };
  struct State {
    std::mutex mutex;
    std::size_t scans = 0;  // finds answered by a scan so far
    std::size_t packs = 0;  // packs.size() the table was made for
    bool made = false;
    std::vector<Entry> entries;  // by hash, then place: no string kept, none copied
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace detail

struct DescriptorSet;

// The order a state manager tries a set's kernels in and its table to find one by id,
// over every member of the set: packs in order, each pack's members in order, the g-th
// of them numbered g. A state manager makes them for a set that carries none; a shard's
// index carries them, written at pack time, so that a start-up through it makes neither.
struct SelectionTables {
  std::size_t members = 0;  // the members they were made for
  // Every g in selection order: priority (higher first), then id key (idKey), then g.
  std::vector<std::uint32_t> ranking;
  // Open addressing, linear probing from home(key): a slot holds g + 1, 0 is empty; the
  // size is a power of two at least twice `members` (at least 16). Of equal keys, the
  // lower g is met first.
  std::vector<std::uint32_t> idSlots;
  // The first slot a key is looked for in.
  std::size_t home(std::string_view key) const;
  // The size of the id table of `members` members.
  static std::size_t idSlotsFor(std::size_t members);
};

// The tables of `set` as it stands.
SelectionTables selectionTablesOf(const DescriptorSet& set);

struct DescriptorSet {
  std::vector<std::filesystem::path> roots;  // absolute, in the order given
  std::vector<Pack> packs;                   // each with its resolved kernels
  std::vector<Dispatch> dispatches;
  std::vector<Engine> engines;
  std::vector<MetadataSchema> metadataSchemas;
  std::vector<MatcherDescriptor> matchers;
  std::vector<HeuristicDescriptor> heuristics;
  std::vector<Diagnostic> diagnostics;
  // Packs refused at load for a reference that failed (an error is reported):
  // never shipped or selected, but their kernels that resolve are kept here so the
  // whole-set rules (launch sets) still judge them, and one run reports every problem.
  std::vector<Pack> refusedPacks;
  // What the walk found: every descriptor file (sorted, per root) and every
  // path it skipped with why (each also a SKIPPED note in `diagnostics`).
  struct Walked {
    std::string rel;
    std::string type;
    std::size_t root = 0;
  };
  struct Skipped {
    std::string rel;
    std::string why;
  };
  std::vector<Walked> files;
  std::vector<Skipped> skipped;
  // Whether the load read the shard's index (index.ukdx); when it did not, why
  // (no index, or one that does not bind). Kept apart from `diagnostics`: the
  // set is the JSON load's either way. Empty when the load did not look for one.
  bool fromIndex = false;
  std::string indexReason;
  // Whether the files were those the index lists, not walked: no folder of the shard
  // had changed since the index was written (each file is still looked at). Only
  // with fromIndex.
  bool listedByIndex = false;
  // The selection tables of a load through a shard's index, read from it (written from
  // the pack-time JSON load, which ukdpack-validate compares them with): a state manager
  // takes them rather than rank and hash every kernel at start-up. They are the set's as
  // loaded; nullptr for any other load. Whoever edits a set's members resets it.
  std::shared_ptr<const SelectionTables> selection;
  // LoaderOptions::maxDecompressedBytes of the load: what loading its launch code may decompress.
  std::uint64_t maxDecompressedBytes = kDefaultMaxDecompressedBytes;

  bool ok() const { return !hasErrors(diagnostics); }

  // One kind's places by id key, as the load left its vector: a find looks the id up
  // rather than scan every descriptor (a state manager finds each pack's engine and
  // dispatch: a scan was packs x engines). A table that disagrees with its vector (a
  // set edited after its load, or built by hand) is not trusted: the find scans.
  struct IdTable {
    std::unordered_map<std::string, std::size_t> at;  // the first place of each key
    std::size_t size = 0;                             // the vector's size when made
  };
  struct IdTables {
    IdTable packs, dispatches, engines, metadataSchemas, matchers, heuristics;
  };
  IdTables ids;
  // Makes `ids` from the vectors (the load does, last).
  void indexIds();

  // Lookup by id (UUIDs case-insensitively).
  const Pack* findPack(std::string_view id) const;
  const Dispatch* findDispatch(std::string_view id) const;
  const Engine* findEngine(std::string_view id) const;
  const MetadataSchema* findMetadataSchema(std::string_view id) const;
  const MatcherDescriptor* findMatcher(std::string_view id) const;
  const HeuristicDescriptor* findHeuristic(std::string_view id) const;
  // A kernel of some pack; `pack` (when given) receives its pack.
  const PackMember* findKernel(std::string_view id, const Pack** pack = nullptr) const;
  detail::KernelPlaces kernelPlaces;  // findKernel's table

  // The references of a pack (nullptr when null or not loaded).
  const Dispatch* dispatchOf(const Pack& pack) const;
  const Engine* engineOf(const Pack& pack) const;
  const MetadataSchema* metadataOf(const Engine& engine) const;

  // The shard root a descriptor or kernel came from, for `library` containment.
  const std::filesystem::path& rootOf(const DescriptorInfo& d) const;
  const std::filesystem::path& rootOf(const PackMember& m) const;
};

// A shard's top-level folder of archives: the loader does not walk it, and a packed
// source's `library` names an archive in it.
inline constexpr const char* kArchiveFolder = "kpack";

// Loads one shard: the folder OUT_ROOT/<arch>/ (its top-level archive folder,
// kArchiveFolder, is not walked).
DescriptorSet loadShard(const std::filesystem::path& root, const LoaderOptions& options = {});

// Loads several roots into one set: ids are unique across all of them and
// references may cross them.
DescriptorSet loadRoots(const std::vector<std::filesystem::path>& roots, const LoaderOptions& options = {});

// ---------------------------------------------------------------------------
// Pieces of the load, for tools and tests.

// "foo.kdp.json" -> "kdp"; nullopt without a known type token.
std::optional<std::string> descriptorType(std::string_view fileName);

struct WalkedFile {
  std::string rel;  // root-relative, '/'-separated
  std::filesystem::path path;
  std::string type;
};

// The descriptor files under `root`, sorted by rel; skipped paths add a note
// to `diags` ("skipping <rel>: <why>"), unreadable folders an error. A
// top-level kpack/ folder is not walked (an error when it holds descriptors).
// `folders`, when given: every folder walked below the root, root-relative, sorted.
std::vector<WalkedFile> walkRoot(const std::filesystem::path& root, std::vector<Diagnostic>& diags,
                                 const std::vector<std::string>& excludeFolders = {},
                                 std::vector<std::string>* folders = nullptr);

// A regular file read without blocking (a FIFO is refused, not waited on) and
// parsed as parseDescriptorText (ukdpack/json/json_text.hpp) does: the one reader of JSON files the packer
// is given (descriptors, handler manifests). The diagnostic's file is empty.
Result<Json> readDescriptorFile(const std::filesystem::path& path);

}  // namespace ukdpack
