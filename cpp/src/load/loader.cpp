// The loader's run: each root walked and its files read in parallel, joined in
// walk order, then the set assembled (resolve.cpp); and the set's lookups.
#include "ukdpack/load/loader.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <functional>
#include <system_error>
#include <thread>
#include <tuple>

#include "base/worker_threads.hpp"
#include "load/loader_impl.hpp"
#include "load/shard_folder.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

namespace detail {

std::string upperType(const std::string& t) {
  std::string out = t;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

namespace {
// LoaderOptions::threads = 0 takes one thread per core up to this: a shard of
// 10,000 kernels is a few hundred files, which more threads only start and join.
constexpr unsigned kMaxDefaultThreads = 16;
}  // namespace

DescriptorInfo* Loader::info(const Slot& s) {
  if (s.type == "kdp") return &set_.packs[s.index];
  if (s.type == "udd") return &set_.dispatches[s.index];
  if (s.type == "ued") return &set_.engines[s.index];
  if (s.type == "kmd") return &set_.metadataSchemas[s.index];
  if (s.type == "umd") return &set_.matchers[s.index];
  if (s.type == "uhd") return &set_.heuristics[s.index];
  return nullptr;
}

void Loader::loadRoot(const fs::path& given, std::size_t index) {
  std::error_code ec;
  fs::path root = fs::absolute(given, ec).lexically_normal();
  if (ec) root = given;
  // "/a/b/" normalizes to "/a/b/": drop the empty last component.
  if (!root.has_filename() && root.has_parent_path() && root != root.root_path()) root = root.parent_path();
  set_.roots.push_back(root);
  if (!fs::is_directory(root, ec)) {
    set_.diagnostics.push_back(makeError(codes::ROOT_INVALID, given.string(), "",
                                         std::string("expected a descriptor root folder, found ") +
                                             (fs::exists(root, ec) ? "a file" : "nothing at that path")));
    return;
  }
  realRoot_ = fs::weakly_canonical(root, ec);
  if (ec) realRoot_.clear();
  const std::size_t before = set_.diagnostics.size();
  // A shard's own index is read before the walk: when none of the shard's folders
  // changed since it was written, the files are those it lists, not walked (about a
  // tenth of a start-up); each is then looked at as a walked one is.
  IndexRead indexRead;
  if (lookForIndex_ && givenIndex_ == nullptr) {
    indexRead.index = readShardIndex(root, indexRead.why);
    if (indexRead.index && indexRead.index->writtenNs && !readEveryFile_) {
      boundFolder_ = std::make_unique<const OpenFolder>(root);
      listedByIndex_ = listingUnchanged(root, *boundFolder_, *indexRead.index);
    }
  }
  std::vector<WalkedFile> walked;
  if (listedByIndex_) {
    walked.reserve(indexRead.index->files.size());
    for (const IndexedFile& f : indexRead.index->files) {
      std::string rel(f.rel);
      fs::path path = root / rel;
      walked.push_back(WalkedFile{std::move(rel), std::move(path), std::string(f.type)});
    }
  } else {
    walked = walkRoot(root, set_.diagnostics, options_.excludeFolders);
  }
  // An out root (OUT_ROOT for OUT_ROOT/<arch>/) holds every shard's copy of each id: one
  // line saying so, not a duplicate id per descriptor. An empty root loads empty.
  if (!walked.empty()) {
    if (std::optional<std::string> why = detail::noShardIn(root, walked)) {
      set_.diagnostics.push_back(makeError(codes::NO_SHARD, given.string(), "", *why));
      return;
    }
  }
  for (std::size_t i = before; i < set_.diagnostics.size(); ++i) {
    const Diagnostic& d = set_.diagnostics[i];
    if (d.code != codes::SKIPPED) continue;
    // "skipping <rel>: <why>", as the note words it.
    const std::size_t colon = d.message.find(": ", 9);
    set_.skipped.push_back(DescriptorSet::Skipped{d.message.substr(9, colon - 9), d.message.substr(colon + 2)});
  }
  // The files are read in parallel, each on its own; what they produced joins
  // the set in walk order, so diagnostics and ids come out as one thread's would.
  // Bound (an entry per walked file, none for a shard of no descriptor files) or not.
  std::optional<std::vector<const IndexedFile*>> entries;
  if (lookForIndex_) entries = bindIndex(root, walked, std::move(indexRead));
  std::vector<FileRead> reads(walked.size());
  const auto work = [&](std::size_t i, bool indexed, std::string& scratch) {
    try {
      reads[i] = readFile(walked[i], root, index, indexed && entries ? (*entries)[i] : nullptr, scratch);
    } catch (...) {
      reads[i].failure = std::current_exception();
    }
  };
  std::size_t threads = options_.threads;
  if (threads == 0) threads = std::min(std::thread::hardware_concurrency(), kMaxDefaultThreads);
  threads = std::min<std::size_t>(std::max<std::size_t>(threads, 1), walked.size());
  std::atomic<std::size_t> next{0};
  detail::runOnThreads(threads, walked.size(), [&] {
    std::string scratch;
    for (std::size_t i = next++; i < walked.size(); i = next++) work(i, true, scratch);
  });
  if (entries) {
    const auto stale =
        std::find_if(reads.begin(), reads.end(), [](const FileRead& r) { return !r.indexMismatch.empty(); });
    set_.fromIndex = stale == reads.end();
    set_.listedByIndex = set_.fromIndex && listedByIndex_;
    if (!set_.fromIndex) {
      // A file the index does not bind to: every kernel is read as written, as if there were no index.
      set_.indexReason = stale->indexMismatch;
      std::string scratch;
      for (std::size_t i = 0; i < walked.size(); ++i)
        if (reads[i].fromSpans) work(i, false, scratch);
    }
  }
  for (std::size_t i = 0; i < walked.size(); ++i) {
    set_.files.push_back(DescriptorSet::Walked{walked[i].rel, walked[i].type, index});
    commitFile(walked[i], std::move(reads[i]), index);
  }
}

}  // namespace detail

namespace {

const std::string& idOf(const DescriptorInfo& d) { return d.id; }

template <class T>
const T* findById(const std::vector<T>& items, const DescriptorSet::IdTable& table, std::string_view id) {
  // The key in the thread's own buffer: a UUID is longer than a string's inline
  // capacity, and a load and a state manager look up each pack's references.
  thread_local std::string key;
  assignIdKey(key, id);
  // The table's place is taken only when the table was made for this vector and
  // the place still holds the id; anything else (a miss included) is scanned.
  if (table.size == items.size()) {
    const auto it = table.at.find(key);
    if (it != table.at.end() && it->second < items.size() && sameIdKey(idOf(items[it->second]), key))
      return &items[it->second];
  }
  for (const T& item : items)
    if (sameIdKey(idOf(item), key)) return &item;
  return nullptr;
}

template <class T>
void indexById(const std::vector<T>& items, DescriptorSet::IdTable& table) {
  table.at.clear();
  table.at.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) table.at.emplace(idKey(idOf(items[i])), i);
  table.size = items.size();
}

}  // namespace

// --------------------------------------------------------------------------- set

void DescriptorSet::indexIds() {
  indexById(packs, ids.packs);
  indexById(dispatches, ids.dispatches);
  indexById(engines, ids.engines);
  indexById(metadataSchemas, ids.metadataSchemas);
  indexById(matchers, ids.matchers);
  indexById(heuristics, ids.heuristics);
}

const Pack* DescriptorSet::findPack(std::string_view id) const { return findById(packs, ids.packs, id); }
const Dispatch* DescriptorSet::findDispatch(std::string_view id) const {
  return findById(dispatches, ids.dispatches, id);
}
const Engine* DescriptorSet::findEngine(std::string_view id) const { return findById(engines, ids.engines, id); }
const MetadataSchema* DescriptorSet::findMetadataSchema(std::string_view id) const {
  return findById(metadataSchemas, ids.metadataSchemas, id);
}
const MatcherDescriptor* DescriptorSet::findMatcher(std::string_view id) const {
  return findById(matchers, ids.matchers, id);
}
const HeuristicDescriptor* DescriptorSet::findHeuristic(std::string_view id) const {
  return findById(heuristics, ids.heuristics, id);
}

namespace detail {

std::vector<KernelPlaces::Place> KernelPlaces::find(const std::vector<Pack>& packs, const std::string& key) const {
  // A scan costs a set's kernels each; the table about two scans (100,000 kernels: a
  // scan about 5 ms, the table about 12).
  constexpr std::size_t kScansBeforeTable = 2;
  // An id is its own key unless it is a UUID with upper-case digits (rare: only then
  // is a key made to hash).
  const auto keyHash = [](std::string_view id) {
    const bool upper = std::any_of(id.begin(), id.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    return upper ? std::hash<std::string>{}(idKey(id)) : std::hash<std::string_view>{}(id);
  };
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  if (!s.made || s.packs != packs.size()) {
    if (!s.made && ++s.scans <= kScansBeforeTable) return {};
    s.entries.clear();
    for (std::size_t p = 0; p < packs.size(); ++p) {
      for (std::size_t m = 0; m < packs[p].members.size(); ++m)
        s.entries.push_back(Entry{keyHash(packs[p].members[m].id()), Place{p, m}});
    }
    std::sort(s.entries.begin(), s.entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.hash, a.place) < std::tie(b.hash, b.place); });
    s.made = true;
    s.packs = packs.size();
  }
  const std::size_t hash = std::hash<std::string_view>{}(key);
  auto it = std::lower_bound(s.entries.begin(), s.entries.end(), hash,
                             [](const Entry& e, std::size_t h) { return e.hash < h; });
  std::vector<Place> out;
  for (; it != s.entries.end() && it->hash == hash; ++it) out.push_back(it->place);
  return out;
}

}  // namespace detail

const PackMember* DescriptorSet::findKernel(std::string_view id, const Pack** pack) const {
  const std::string key = idKey(id);
  // The table's first place that still holds the id is taken; anything else is scanned.
  for (const auto& [p, m] : kernelPlaces.find(packs, key)) {
    if (p < packs.size() && m < packs[p].members.size() && sameIdKey(packs[p].members[m].id(), key)) {
      if (pack != nullptr) *pack = &packs[p];
      return &packs[p].members[m];
    }
  }
  for (const Pack& p : packs) {
    for (const PackMember& m : p.members) {
      if (!sameIdKey(m.id(), key)) continue;
      if (pack != nullptr) *pack = &p;
      return &m;
    }
  }
  return nullptr;
}

const Dispatch* DescriptorSet::dispatchOf(const Pack& pack) const {
  return pack.dispatch ? findDispatch(*pack.dispatch) : nullptr;
}
const Engine* DescriptorSet::engineOf(const Pack& pack) const {
  return pack.engine ? findEngine(*pack.engine) : nullptr;
}
const MetadataSchema* DescriptorSet::metadataOf(const Engine& engine) const {
  return findMetadataSchema(engine.metadata);
}

const fs::path& DescriptorSet::rootOf(const DescriptorInfo& d) const {
  static const fs::path none;
  return d.root < roots.size() ? roots[d.root] : none;
}
const fs::path& DescriptorSet::rootOf(const PackMember& m) const {
  static const fs::path none;
  return m.root < roots.size() ? roots[m.root] : none;
}

// --------------------------------------------------------------------------- load

namespace {

DescriptorSet run(detail::Loader& loader, const std::vector<fs::path>& roots, const LoaderOptions& options) {
  try {
    for (std::size_t i = 0; i < roots.size(); ++i) loader.loadRoot(roots[i], i);
    loader.resolve();
  } catch (const std::exception& e) {
    // Nothing in the load should throw; if something does, say so instead of crashing.
    loader.diags().push_back(makeError(codes::INTERNAL, "", "", std::string("loader failure: ") + e.what()));
  }
  DescriptorSet set = loader.take();
  set.indexIds();
  if (set.fromIndex) set.selection = loader.selectionFor(set);
  set.maxDecompressedBytes = options.maxDecompressedBytes;  // spent where launch code is loaded
  return set;
}

}  // namespace

DescriptorSet loadRoots(const std::vector<fs::path>& roots, const LoaderOptions& options) {
  detail::Loader loader(options);
  return run(loader, roots, options);
}

DescriptorSet loadShard(const fs::path& root, const LoaderOptions& options) {
  detail::Loader loader(options);
  if (options.useIndex && detail::indexApplies(options)) loader.lookForIndex();
  return run(loader, {root}, options);
}

namespace detail {

DescriptorSet loadShardWithIndex(const fs::path& root, const ShardIndex& index) {
  Loader loader(LoaderOptions{});
  loader.lookForIndex(&index, true);
  return run(loader, {root}, LoaderOptions{});
}

DescriptorSet loadShardReadingEveryFile(const fs::path& root) {
  Loader loader(LoaderOptions{});
  loader.lookForIndex(nullptr, true);
  return run(loader, {root}, LoaderOptions{});
}

std::shared_ptr<const SelectionTables> Loader::selectionFor(const DescriptorSet& set) const {
  if (!boundIndex_ || !boundIndex_->selection) return nullptr;
  std::size_t members = 0;
  for (const Pack& p : set.packs) members += p.members.size();
  return members == boundIndex_->selection->members ? boundIndex_->selection : nullptr;
}

std::optional<std::vector<const IndexedFile*>> Loader::bindIndex(const fs::path& root,
                                                                 const std::vector<WalkedFile>& walked,
                                                                 IndexRead read) {
  std::shared_ptr<const ShardIndex> index;
  if (givenIndex_ != nullptr) {
    ShardIndex copy = *givenIndex_;
    if (readEveryFile_) copy.writtenNs.reset();
    index = std::make_shared<const ShardIndex>(std::move(copy));
  } else {
    if (!read.index) {
      set_.indexReason = std::move(read.why);
      return {};
    }
    if (readEveryFile_) read.index->writtenNs.reset();
    index = std::make_shared<const ShardIndex>(std::move(*read.index));
  }
  const std::string name = kShardIndexFile;
  if (index->files.size() != walked.size()) {
    set_.indexReason = name + " is stale: it lists " + std::to_string(index->files.size()) +
                       " descriptor files, the shard holds " + std::to_string(walked.size());
    return {};
  }
  std::vector<const IndexedFile*> entries;
  entries.reserve(walked.size());
  for (std::size_t i = 0; i < walked.size(); ++i) {
    const IndexedFile& f = index->files[i];
    if (f.rel != walked[i].rel || f.type != walked[i].type) {
      set_.indexReason =
          name + " is stale: it lists '" + std::string(f.rel) + "' where the shard holds '" + walked[i].rel + "'";
      return {};
    }
    entries.push_back(&f);
  }
  boundIndex_ = index;
  if (index->writtenNs && !boundFolder_) boundFolder_ = std::make_unique<const OpenFolder>(root);
  return entries;
}

}  // namespace detail

}  // namespace ukdpack
