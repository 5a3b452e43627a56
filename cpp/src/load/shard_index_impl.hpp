// The shard index as the loader reads it (ukdpack/load/shard_index.hpp): the
// records, views of the index's bytes, and the one way a kernel is read from its span.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/load/loader.hpp"
#include "ukdpack/load/shard_index.hpp"

namespace ukdpack::detail {

// One inline kernel of a KDP: where its object lies in the file, and what the
// state manager ranks and filters on without reading it.
struct IndexedKernel {
  std::uint32_t listIndex = 0;  // its place in kernelDescriptors
  std::uint64_t begin = 0;      // its object's bytes in the file, [begin, end)
  std::uint64_t end = 0;
  std::string_view id;
  std::int64_t priority = 0;
  // Its arches and its sorted launch names (empty: a single launch), as places
  // in its file's `lists`: a list many kernels share is held once.
  std::uint32_t arch = kPackArches;
  std::uint32_t launches = 0;
  static constexpr std::uint32_t kPackArches = UINT32_MAX;  // no arch of its own: the pack's
};

// One descriptor file the index binds: the walk must find exactly these, each
// with this size and binding digest (base/binding_digest.hpp). A KDP's inline
// kernels when `spans`.
struct IndexedFile {
  std::string_view rel;
  std::string_view type;
  std::uint64_t size = 0;
  std::string_view digest;  // lowercase hex
  bool spans = false;
  std::vector<IndexedKernel> kernels;  // in kernelDescriptors order
  // With spans: the file's text with each indexed kernel's object cut to "{}"
  // (packSkeleton), what the pack's own reader reads; checked at parse to have
  // "{}" at each kernel's place (skeletonPlaces).
  std::string_view skeleton;
  // The distinct arch and launch lists its kernels name, each once (a kernel's
  // `arch` and `launches` are places in it).
  std::vector<std::vector<std::string_view>> lists;
};

// Whether `bytes` are the file `file` records (its size and binding digest): at the
// load, and again when a KDP the load did not keep is read at its first kernel.
bool bindsTo(std::string_view bytes, const IndexedFile& file);

// A folder held open (O_PATH) while a load looks files up relative to it (a stat of
// each file from it, not by its whole path from "/": half a stat's cost in a deep tree).
class OpenFolder {
 public:
  explicit OpenFolder(const std::filesystem::path& path);  // fd() -1 when it does not open
  ~OpenFolder();
  OpenFolder(const OpenFolder&) = delete;
  OpenFolder& operator=(const OpenFolder&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

struct ShardIndex {
  std::shared_ptr<const void> bytes;  // holds what every view points into
  std::string_view writer;
  // Every folder the walk entered below the shard's root when the index was written
  // (sorted), and the files it found (in walk order): each a path the walk could
  // give, checked when the index is parsed.
  std::vector<std::string_view> folders;
  std::vector<IndexedFile> files;
  // The set's selection tables as the writer made them from its JSON load (a
  // permutation and a table of places in range, checked when parsed); the load hands
  // them to its set when it binds and holds the members they were made for.
  std::shared_ptr<const SelectionTables> selection;
  // The index file's modification time (ns since the epoch) when it was read from a
  // shard and is not in the future (a clock ahead, a copy dated ahead): a KDP of the
  // size the index records and an older modification time is taken as the one the
  // index was written for, and not read at load. Unset: every file is read and
  // checked against the index (an index given as bytes, ukdpack-validate).
  std::optional<std::int64_t> writtenNs;
};

// Where each indexed kernel's "{}" lies in `file`'s skeleton (its begin less what
// the kernels before it were cut by), into `at`; false when the skeleton does not
// have "{}" at each of them or is not the size the cuts leave.
bool skeletonPlaces(const IndexedFile& file, std::vector<std::size_t>& at);

// Whether the KDP at `path` is, by its size and modification time, the file
// `file` of `index` records (so the load need not read it): it is a regular file
// of the recorded size, modified before the index was written.
// `rel` is its path under `shard` (the shard's folder, which `path` lies under, held
// open), as the walk gives it; a `shard` that did not open leaves the stat to `path`.
bool unchangedSinceIndex(const std::filesystem::path& path, const std::string& rel, const OpenFolder& shard,
                         const IndexedFile& file, const ShardIndex& index);

// Whether the walk of the shard at `root` (its folder held open as `shard`) would find
// the files `index` lists without walking: nothing the walk looks at in the root differs
// from the index's top-level folders and files, and each folder the index lists is a
// folder (not a link) the walk could list, last changed before the index was written
// (a file added, removed or renamed in it would have changed it). Each file is still
// looked at as the walk's would be (unchangedSinceIndex, or read and compared).
bool listingUnchanged(const std::filesystem::path& root, const OpenFolder& shard, const ShardIndex& index);

// The inline kernels of one KDP read through the index, each built when first
// asked for (PackMember::kernel()) from its span, by memberFromSpan. It holds
// every kernel's deferred record, in one array, and the file's lists once. The
// file's text is not kept by the load: it is read again (and checked against the
// index's size and digest) when a kernel or a `raw` of the file is first asked for.
class SpanKernels : public KernelReader {
 public:
  SpanKernels(std::filesystem::path path, std::shared_ptr<const ShardIndex> index, const IndexedFile* entry,
              std::string file, std::filesystem::path baseDir, Version maxUkd);
  // The record of the file's `index`-th indexed kernel, its fields filled in;
  // a member points at it through deferred().
  const DeferredKernel& record(std::size_t index) const { return records_[index]; }
  // The KMD the kernels' metadata completes against (nullptr: kept as written); set
  // once, by the load's resolution, before any kernel is read. A copy the set's copies
  // cannot take away, made once per KMD and shared by every file completing against it.
  void completeWith(std::shared_ptr<const MetadataSchema> kmd) { kmd_ = std::move(kmd); }
  void read(std::size_t index, Kernel& kernel, Json& completedMetadata) const override;
  JsonText raw(std::size_t index) const override;

 private:
  // The file's text, read on first use; nullptr (and `unread_` says why) when it
  // no longer is the indexed file.
  const std::shared_ptr<const std::string>& text() const;

  std::filesystem::path path_;
  mutable std::once_flag textOnce_;
  mutable std::shared_ptr<const std::string> text_;
  mutable std::string unread_;               // why text_ is nullptr: the read's error, or the change
  std::shared_ptr<const ShardIndex> index_;  // what `entry_` and its views point into
  const IndexedFile* entry_;
  std::string file_;
  std::filesystem::path baseDir_;
  Version maxUkd_;
  std::shared_ptr<const MetadataSchema> kmd_;
  std::vector<std::optional<std::vector<std::string>>> lists_;  // entry_->lists, owned
  std::vector<DeferredKernel> records_;                         // per entry_->kernels
};

// Whether a load with `options` may use an index: a runtime load with default
// options (no authored tree, source-file checks, excluded folders, reported
// arches or older reader emulated).
bool indexApplies(const LoaderOptions& options);

// The index at `root`, read and checked (magic, format, body digest, every
// record inside the bytes, the writer's identity); nullopt with `why` when
// it is missing or does not read.
std::optional<ShardIndex> readShardIndex(const std::filesystem::path& root, std::string& why);

// The bytes of an index (the reader's parse of them, for tests and tools): `all`,
// which `owner` keeps alive for the index's views.
std::optional<ShardIndex> parseShardIndex(std::string_view all, std::shared_ptr<const void> owner, std::string& why);
std::optional<ShardIndex> parseShardIndex(std::shared_ptr<const std::string> bytes, std::string& why);

// Reads one inline kernel from its span of `text` as the JSON load reads it
// (same reader, same context); the member has no root or completed metadata
// yet. nullopt when the span does not read alone without a word.
std::optional<PackMember> memberFromSpan(const std::shared_ptr<const std::string>& text, const IndexedKernel& k,
                                         const KernelContext& ctx, const Version& maxUkd);

// A KDP's text with each indexed inline kernel's object cut to "{}": what the
// pack's own reader reads when its kernels come from their spans; `at`
// receives where each "{}" lies in it. nullopt when a span does not lie in
// order inside the text on an object.
std::optional<std::string> packSkeleton(std::string_view text, const IndexedFile& file, std::vector<std::size_t>& at);

// The load of one shard through `index` (the writer checks what it writes), every
// file read and checked against it.
DescriptorSet loadShardWithIndex(const std::filesystem::path& root, const ShardIndex& index);

// The load of one shard through its own index with every file read and checked
// against it, whatever their modification times (ukdpack-validate).
DescriptorSet loadShardReadingEveryFile(const std::filesystem::path& root);

// Every field of a set's packs and kernels, one line each: what validate
// and the index writer compare between the JSON load and the indexed one.
std::vector<std::string> describeSet(const DescriptorSet& set);
// The line describeSet gives a pack's own fields.
std::string describePack(const Pack& pack);

}  // namespace ukdpack::detail
