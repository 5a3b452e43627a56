#include "ukdpack/load/loader.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <exception>
#include <limits>
#include <iterator>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/files.hpp"
#include "base/paths.hpp"
#include "base/utf8.hpp"
#include "base/worker_threads.hpp"
#include "json/json_tape.hpp"
#include "load/shard_folder.hpp"
#include "model/object_reader.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

namespace {

const char* const kTypes[] = {"ukd", "kdp", "udd", "ued", "kmd", "umd", "uhd"};
constexpr std::uint64_t kMaxDescriptorBytes = 256ull << 20;
// LoaderOptions::threads = 0 takes one thread per core up to this: a shard of
// 10,000 kernels is a few hundred files, which more threads only start and join.
constexpr unsigned kMaxDefaultThreads = 16;

std::string typeListText() {
  std::string out;
  for (const char* t : kTypes) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

std::string upperType(const std::string& t) {
  std::string out = t;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const std::string& idOf(const DescriptorInfo& d) { return d.id; }

template <class T>
const T* findById(const std::vector<T>& items, std::string_view id) {
  const std::string key = idKey(id);
  for (const T& item : items)
    if (sameIdKey(idOf(item), key)) return &item;
  return nullptr;
}

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

class Loader {
 public:
  explicit Loader(const LoaderOptions& options) : options_(options) {}

  void loadRoot(const fs::path& given, std::size_t index);
  void resolve();
  DescriptorSet take() { return std::move(set_); }
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
    std::string why;  // "did not load" / "was skipped (UDD version 1.2)"
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
    bool unloadedFailed = true;  // with an error, not skipped by a version gate
    std::exception_ptr failure;  // what reading it threw (rethrown in walk order)
    bool loaded() const {
      return pack || dispatch || engine || metadataSchema || matcher || heuristic || kernel;
    }
  };

  FileRead readFile(const WalkedFile& f, const fs::path& root) const;
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
  void checkRoleMetrics(const Engine& e, bool& refused);
  void checkTrainedAgainst();
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
  DescriptorSet set_;
  std::vector<Standalone> standalone_;
  std::vector<Slot> order_;  // every file-backed descriptor in load order
  std::map<std::string, Slot> index_;  // id key -> kept descriptor (sorted: suggestions iterate it)
  // id key -> where it was first claimed (uniqueIds); its pointers are good until compact().
  std::unordered_map<std::string, Holder> holders_;
  std::unordered_map<std::string, Unloaded> unloaded_;      // id key -> why it is not there
  std::set<std::pair<std::string, std::size_t>> removed_;  // (type, index)
  // Packs refused for a failed reference: left out of the set, yet their kernels that
  // resolve are judged (metadata, launch sets) so one run reports every problem.
  std::set<std::size_t> judgedOnly_;
  // The root being read, its links resolved once for every path its kernels name
  // (empty: it did not resolve, and each check resolves it again).
  fs::path realRoot_;
};

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
    set_.diagnostics.push_back(makeError(
        "ROOT_INVALID", given.string(), "",
        std::string("expected a descriptor root folder, found ") +
            (fs::exists(root, ec) ? "a file" : "nothing at that path")));
    return;
  }
  realRoot_ = fs::weakly_canonical(root, ec);
  if (ec) realRoot_.clear();
  const std::size_t before = set_.diagnostics.size();
  const std::vector<WalkedFile> walked = walkRoot(root, set_.diagnostics, options_.excludeFolders);
  // An out root (OUT_ROOT for OUT_ROOT/<arch>/) holds every shard's copy of each id: one
  // line saying so, not a duplicate id per descriptor. An empty root loads empty.
  if (!walked.empty()) {
    if (std::optional<std::string> why = detail::noShardIn(root, walked)) {
      set_.diagnostics.push_back(makeError("NO_SHARD", given.string(), "", *why));
      return;
    }
  }
  for (std::size_t i = before; i < set_.diagnostics.size(); ++i) {
    const Diagnostic& d = set_.diagnostics[i];
    if (d.code != "SKIPPED") continue;
    // "skipping <rel>: <why>", as the note words it.
    const std::size_t colon = d.message.find(": ", 9);
    set_.skipped.push_back(DescriptorSet::Skipped{d.message.substr(9, colon - 9), d.message.substr(colon + 2)});
  }
  // The files are read in parallel, each on its own; what they produced joins
  // the set in walk order, so diagnostics and ids come out as one thread's would.
  std::vector<FileRead> reads(walked.size());
  const auto work = [&](std::size_t i) {
    try {
      reads[i] = readFile(walked[i], root);
    } catch (...) {
      reads[i].failure = std::current_exception();
    }
  };
  std::size_t threads = options_.threads;
  if (threads == 0) threads = std::min(std::thread::hardware_concurrency(), kMaxDefaultThreads);
  threads = std::min<std::size_t>(std::max<std::size_t>(threads, 1), walked.size());
  std::atomic<std::size_t> next{0};
  detail::runOnThreads(threads, walked.size(), [&] {
    for (std::size_t i = next++; i < walked.size(); i = next++) work(i);
  });
  for (std::size_t i = 0; i < walked.size(); ++i) {
    set_.files.push_back(DescriptorSet::Walked{walked[i].rel, walked[i].type, index});
    commitFile(walked[i], std::move(reads[i]), index);
  }
}

namespace {

JsonText writtenAs(Json& doc) { return JsonText(std::move(doc)); }
JsonText writtenAs(const detail::JsonNode& doc) { return detail::textOf(doc); }

}  // namespace

// One file on its own (any thread): read, parsed by its type's reader, its
// kernels' sources checked. Touches nothing of the set.
Loader::FileRead Loader::readFile(const WalkedFile& f, const fs::path& root) const {
  FileRead out;
  auto& diags = out.diags;
  auto read = detail::readRegularFile(f.path, kMaxDescriptorBytes);
  if (!read) {
    Diagnostic d = read.error();
    d.file = f.rel;
    diags.push_back(std::move(d));
    return out;
  }
  const auto text = std::make_shared<const std::string>(std::move(read.value()));
  // The document, as a Json DOM or (the common case of kernels) a tape of the text.
  const auto withDoc = [&](auto& doc, Json* consume) {
    using Doc = std::decay_t<decltype(doc)>;
    const Version& max = options_.maxVersions.of(f.type);
    const VersionCheck vc = detail::checkVersionOf(doc, f.type, max);
    auto remember = [&](const std::string& why, bool failed = true) {
      const auto id = doc.is_object() ? doc.find("id") : doc.end();
      if (doc.is_object() && id != doc.end() && id->is_string() && !id->template get<std::string>().empty()) {
        out.unloadedId = id->template get<std::string>();
        out.unloadedWhy = why;
        out.unloadedFailed = failed;
      }
    };
    if (vc.gate == VersionGate::Skip && options_.authored) {
      diags.push_back(makeError("SCHEMA", f.rel, "$.version", vc.refusal));
      remember("did not load");
      return;
    }
    if (vc.gate == VersionGate::Skip) {
      diags.push_back(makeWarning("VERSION_SKIPPED", f.rel, "", "skipping " + f.rel + ": " + vc.message));
      remember("was skipped (" + upperType(f.type) + " version " + vc.version.str() + ")", false);
      return;
    }
    if (vc.gate == VersionGate::Malformed) {
      diags.push_back(makeError("SCHEMA", f.rel, "$.version", vc.message));
      remember("did not load");
      return;
    }
    const std::string folder = fs::path(f.rel).parent_path().generic_string();
    const DescriptorContext ctx{f.rel, "$", folder.empty() ? root : (root / folder).lexically_normal()};
    if (f.type == "kdp") {
      if (auto v = detail::parsePackFrom(doc, consume, ctx, diags, options_.maxVersions.ukd, options_.authored)) {
        // The pack's kernels name their files in a few folders: each resolved once.
        detail::RealFolders folders;
        keepMembers(v->members, [&](const PackMember& m) { return kernelSourcesOk(m.kernel, root, diags, folders); });
        out.pack = std::move(*v);
      }
    } else if (f.type == "ukd") {
      detail::RealFolders folders;
      if (auto k = detail::parseKernelFrom(doc, ctx, diags); k && kernelSourcesOk(*k, root, diags, folders)) {
        out.kernel = Standalone{std::move(*k), writtenAs(doc), 0, false, ""};
      }
    } else if constexpr (std::is_same_v<Doc, Json>) {
      if (f.type == "udd") {
        out.dispatch = parseDispatch(doc, ctx, diags);
      } else if (f.type == "ued") {
        out.engine = parseEngine(doc, ctx, diags);
      } else if (f.type == "kmd") {
        out.metadataSchema = parseMetadataSchema(doc, ctx, diags);
      } else if (f.type == "umd") {
        out.matcher = parseMatcher(doc, ctx, diags);
      } else if (f.type == "uhd") {
        out.heuristic = parseHeuristic(doc, ctx, diags);
      }
    }
    if (!out.loaded()) remember("did not load");
  };
  // Kernels (KDP, UKD: nearly all of a shard's bytes) are read from a tape of
  // the text when the scan takes it; any other text, and the other types, from
  // the one reader's DOM, which also words every refusal of the text itself.
  if ((f.type == "kdp" || f.type == "ukd") && detail::firstInvalidUtf8(*text) == std::string_view::npos) {
    if (const auto tape = detail::JsonTape::scan(text)) {
      withDoc(tape->root(), nullptr);
      return out;
    }
  }
  auto parsed = parseDescriptorText(*text);
  if (!parsed) {
    Diagnostic d = parsed.error();
    d.file = f.rel;
    diags.push_back(std::move(d));
    return out;
  }
  // Mutable: the typed readers may move subtrees out once they have read them.
  Json& doc = parsed.value();
  withDoc(doc, &doc);
  return out;
}

// What one file produced joins the set (walk order).
void Loader::commitFile(const WalkedFile& f, FileRead&& read, std::size_t rootIndex) {
  if (read.failure) std::rethrow_exception(read.failure);
  auto& diags = set_.diagnostics;
  diags.insert(diags.end(), std::make_move_iterator(read.diags.begin()), std::make_move_iterator(read.diags.end()));
  if (read.unloadedId) {
    unloaded_.emplace(idKey(*read.unloadedId), Unloaded{f.rel, read.unloadedWhy, read.unloadedFailed});
  }
  if (read.pack) {
    for (PackMember& m : read.pack->members) m.root = rootIndex;
  }
  auto place = [&](auto& vec, auto& value) {
    if (!value) return;
    value->root = rootIndex;
    order_.push_back(Slot{f.type, vec.size()});
    vec.push_back(std::move(*value));
  };
  place(set_.packs, read.pack);
  place(set_.dispatches, read.dispatch);
  place(set_.engines, read.engine);
  place(set_.metadataSchemas, read.metadataSchema);
  place(set_.matchers, read.matcher);
  place(set_.heuristics, read.heuristic);
  if (read.kernel) {
    read.kernel->root = rootIndex;
    order_.push_back(Slot{"ukd", standalone_.size()});
    standalone_.push_back(std::move(*read.kernel));
  }
}

// The source rules of one kernel: each file a source names exists inside the
// root (any root: only authored kinds name files), and in an authored tree
// (LoaderOptions::authored) a packed source is the packer's to write. Whether
// the kernel loads: a missing file is reported but keeps it (a prebuilt object
// DVC has not fetched fails only the arches that need it).
bool Loader::kernelSourcesOk(const Kernel& kernel, const fs::path& root, std::vector<Diagnostic>& diags,
                             detail::RealFolders& folders) const {
  // A shard's runtime load checks neither: nothing to look at (nor paths to word) per kernel.
  if (!options_.authored && !options_.sourceFiles) return true;
  bool ok = true;
  auto check = [&](const std::string& srcPath, const KernelSource& src) {
    const SourceKindInfo* info = sourceKind(src.kind);
    if (info == nullptr) return;
    if (!info->authored && options_.authored) {
      diags.push_back(makeError(
          "PACKED_IN_AUTHORED", kernel.file, jsonPathKey(srcPath, "kind"),
          "kind '" + src.kind + "' is the packed form written by the packer; an authored tree names what to "
          "build (hip, hsaco, embedded_source, cuda or builder)"));
      ok = false;
      return;
    }
    if (*info->fileField == '\0' || !(options_.authored || options_.sourceFiles)) return;
    if (!src.file) return;
    const std::string& given = *src.file;
    const auto verdict = detail::checkContained(root, kernel.baseDir, given, false,
                                                realRoot_.empty() ? nullptr : &realRoot_, &folders);
    const std::string msg = detail::describeFileProblem(verdict, given, info->fileWhat, kernel.file);
    if (msg.empty()) return;
    const bool missing = verdict.problem == detail::PathProblem::None;
    diags.push_back(makeError(missing ? (src.kind == "hsaco" ? "PREBUILT_MISSING" : "SOURCE_MISSING")
                                      : "PATH_REFUSED",
                              kernel.file, jsonPathKey(srcPath, info->fileField), msg));
  };
  if (const KernelSource* single = singleLaunchSource(kernel)) {
    check(jsonPathKey(kernel.jsonPath, "kernel_source"), *single);
  } else {
    for (const auto& [name, src] : kernel.sources) check(jsonPathKey(jsonPathKey(kernel.jsonPath, "sources"), name), src);
  }
  return ok;
}

// Ids are unique across every type; the first one in load order
// stays, each later one is refused and not loaded.
void Loader::uniqueIds() {
  std::unordered_map<std::string, Holder>& seen = holders_;
  std::size_t ids = order_.size();
  for (const Pack& p : set_.packs) ids += p.members.size();
  seen.reserve(ids);
  auto where = [&](const Holder& h) {
    const std::string path = h.path != nullptr ? *h.path : jsonPathIndex("$.kernelDescriptors", h.member);
    std::string at = path == "$" ? *h.file : *h.file + " (" + path + ")";
    // With several roots, the first holder is named with its root.
    if (set_.roots.size() > 1 && h.root < set_.roots.size()) at += " in " + set_.roots[h.root].string();
    return at;
  };
  auto claim = [&](const std::string& id, const std::string& file, const std::string& path, const Holder& holder) {
    const auto [it, fresh] = seen.emplace(idKey(id), holder);
    if (fresh) return true;
    set_.diagnostics.push_back(makeError(
        "DUPLICATE_ID", file, jsonPathKey(path, "id"),
        "id '" + id + "' is already used by " + where(it->second) +
            "; ids are unique across every descriptor type of a root"));
    return false;
  };
  static const std::string top = "$";
  for (const Slot& s : order_) {
    if (s.type == "ukd") {
      Standalone& u = standalone_[s.index];
      if (!claim(u.kernel.id, u.kernel.file, "$", Holder{&u.kernel.file, &top, 0, u.root})) u.removed = true;
      continue;
    }
    DescriptorInfo* d = info(s);
    if (!claim(d->id, d->file, d->jsonPath, Holder{&d->file, &d->jsonPath, 0, d->root})) {
      removed_.insert({s.type, s.index});
      continue;
    }
    if (s.type == "kdp") {
      Pack& p = set_.packs[s.index];
      keepMembers(p.members, [&](const PackMember& m) {
        return claim(m.kernel.id, m.kernel.file, m.kernel.jsonPath, Holder{&p.file, nullptr, m.index, p.root});
      });
    }
  }
  for (const Slot& s : order_) {
    if (s.type == "ukd" ? standalone_[s.index].removed : removed_.count({s.type, s.index}) != 0) continue;
    const std::string& id = s.type == "ukd" ? standalone_[s.index].kernel.id : info(s)->id;
    index_.emplace(idKey(id), s);
  }
}

RefFound Loader::lookup(const std::string& ref, const std::string& want,
                        const std::string& ownerFile, const std::string& path, std::string* why, bool* failed) {
  const std::string key = idKey(ref);
  const std::string wantName = upperType(want);
  const auto it = index_.find(key);
  if (it != index_.end() && removed_.count({it->second.type, it->second.index}) == 0) {
    if (it->second.type == want) return RefFound::Ok;
    const std::string file = it->second.type == "ukd" ? standalone_[it->second.index].kernel.file
                                                      : info(it->second)->file;
    set_.diagnostics.push_back(makeError("UNRESOLVED_REF", ownerFile, path,
                                         "'" + ref + "' is a " + upperType(it->second.type) + " (" +
                                             file + "), expected the id of a " + wantName));
    return RefFound::Refused;
  }
  if (const auto u = unloaded_.find(key); u != unloaded_.end()) {
    if (why != nullptr) *why = "'" + ref + "' (" + u->second.file + ") " + u->second.why;
    if (failed != nullptr) *failed = *failed || u->second.failed;
    return RefFound::Unloaded;
  }
  // A kernel inline in a pack holds its id with no JSON path of its own.
  if (const auto in = holders_.find(key); in != holders_.end() && in->second.path == nullptr && want == "ukd") {
    set_.diagnostics.push_back(makeError("UNRESOLVED_REF", ownerFile, path,
                                         "'" + ref + "' is an inline UKD of " + *in->second.file +
                                             "; only standalone UKDs (*.ukd.json) are referenced by id"));
    return RefFound::Refused;
  }
  std::vector<std::string> ids;  // the kept descriptors of the type wanted, for a suggestion
  for (const auto& [k, slot] : index_) {
    if (slot.type != want || removed_.count({slot.type, slot.index}) != 0) continue;
    ids.push_back(slot.type == "ukd" ? standalone_[slot.index].kernel.id : info(slot)->id);
  }
  set_.diagnostics.push_back(makeError("UNRESOLVED_REF", ownerFile, path,
                                       "'" + ref + "' names no descriptor of this root; expected the id of a " +
                                           wantName + didYouMean(ref, ids)));
  return RefFound::Refused;
}

// A UHD's artifact (tree_data, table) or library (custom_library) ships beside
// it: it must exist inside the root.
void Loader::checkArtifacts() {
  for (std::size_t i = 0; i < set_.heuristics.size(); ++i) {
    HeuristicDescriptor& h = set_.heuristics[i];
    if (removed_.count({"uhd", i}) != 0) continue;
    const bool isLibrary = !h.artifact && h.library;
    const std::optional<std::string>& shipped = isLibrary ? h.library : h.artifact;
    if (!shipped) continue;
    const std::string& name = *shipped;
    const char* field = isLibrary ? "library" : "artifact";
    const auto v = detail::checkContained(set_.roots[h.root], h.baseDir, name, false);
    std::string msg = detail::describeFileProblem(v, name, field, h.file);
    if (msg.empty()) {
      // A shard's archives live in its top-level kpack/ folder; a file shipped there would
      // mix with them (any letter case: one folder on a case-insensitive filesystem).
      std::string top = v.rootRel.substr(0, v.rootRel.find('/'));
      for (char& c : top) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (top == "kpack" && v.rootRel.find('/') != std::string::npos) {
        msg = std::string(field) + " '" + name + "' lands in the reserved top-level folder '" +
              v.rootRel.substr(0, 5) + "/', where a shard's archives are written; move it to another folder";
      }
    }
    const std::string hashPath = "$." + h.adapter + ".hash";
    if (msg.empty() && h.hash) {
      // A sha256 in either spelling is checked; any other string is carried, as upstream does.
      if (const auto want = statedSha256(*h.hash)) {
        const auto got = detail::sha256OfRegularFile(v.joined);
        if (!got) {
          msg = "cannot read " + std::string(field) + " '" + name + "' to check its hash: " + got.error().message;
        } else if (got.value() != *want) {
          set_.diagnostics.push_back(makeError(
              "ARTIFACT_HASH", h.file, hashPath,
              "the " + std::string(field) + " '" + name + "' has sha256 " + got.value() + ", but hash states " +
                  *want + "; update the hash to the file's, or restore the file it was written for"));
          removed_.insert({"uhd", i});
          markUnloaded(h, "did not load");
          continue;
        }
      } else {
        set_.diagnostics.push_back(Diagnostic{
            Severity::Note, "HASH_UNCHECKED", h.file, hashPath,
            "hash '" + *h.hash + "' is no sha256 (64 hex digits, bare or after 'sha256:'); the " + field + " '" +
                name + "' is not checked against it"});
      }
    }
    if (msg.empty()) continue;
    set_.diagnostics.push_back(makeError("ARTIFACT", h.file, "$." + h.adapter + "." + field, msg));
    removed_.insert({"uhd", i});
    markUnloaded(h, "did not load");
  }
}

// A scoring role names one UHD per metric for each arch key (the runtime cannot
// choose between two of one metric, and two without a metric count as one); every
// predict_engine UHD declares its metric, the units engines are compared in.
void Loader::checkRoleMetrics(const Engine& e, bool& refused) {
  for (const std::string role : {"sort_kernel_catalog", "predict_engine"}) {
    const auto table = e.heuristics.find(role);
    if (table == e.heuristics.end()) continue;
    for (const auto& [arch, ids] : table->second) {
      const std::string base = e.heuristicPaths.at(role + "/" + arch);
      const bool list = e.raw.at(role).at(arch).is_array();
      std::map<std::string, const HeuristicDescriptor*> byMetric;  // "" stands for no metric
      for (std::size_t j = 0; j < ids.size(); ++j) {
        const HeuristicDescriptor* h = kept(set_.heuristics, "uhd", ids[j]);
        if (h == nullptr || (role == "predict_engine" && h->adapter == "static_order")) continue;
        const std::string path = list ? jsonPathIndex(base, j) : base;
        if (role == "predict_engine" && !h->metric) {
          set_.diagnostics.push_back(makeError(
              "ROLE_METRIC", e.file, path,
              "predict_engine names UHD '" + h->name + "' (" + h->file +
                  "), which declares no score.metric; an engine prediction is compared across engines in a "
                  "metric: add \"score\": {\"metric\": \"tflops\"} (or \"time\") to it"));
          refused = true;
          continue;
        }
        const std::string metric = h->metric.value_or("");
        const auto [it, fresh] = byMetric.emplace(metric, h);
        if (fresh) continue;
        const std::string what = metric.empty() ? "no metric" : "metric '" + metric + "'";
        set_.diagnostics.push_back(makeError(
            "ROLE_METRIC", e.file, path,
            role + " names two UHDs with " + what + " for '" + arch + "': '" + it->second->name + "' (" +
                it->second->file + ") and '" + h->name + "' (" + h->file +
                "); a scoring role takes one UHD per metric for each arch"));
        refused = true;
      }
    }
  }
}

// A model is trained against the revisions of the descriptors it names; a
// descriptor of the set at another revision makes it stale (a warning, as the
// runtime still loads it). A descriptor without a revision makes no claim to compare.
void Loader::checkTrainedAgainst() {
  for (std::size_t i = 0; i < set_.heuristics.size(); ++i) {
    if (removed_.count({"uhd", i}) != 0) continue;
    const HeuristicDescriptor& h = set_.heuristics[i];
    for (const HeuristicDescriptor::TrainedRef& ref : h.trainedAgainst) {
      const DescriptorInfo* named = nullptr;
      const std::optional<std::string>* revision = nullptr;
      const auto take = [&](const auto* d) {
        if (d == nullptr) return;
        named = d;
        revision = &d->revision;
      };
      if (ref.type == "ued") {
        take(kept(set_.engines, "ued", ref.id));
      } else if (ref.type == "kmd") {
        take(kept(set_.metadataSchemas, "kmd", ref.id));
      } else {
        take(kept(set_.matchers, "umd", ref.id));
      }
      if (named == nullptr || !*revision || **revision == ref.revision) continue;
      const std::string T = upperType(ref.type);
      set_.diagnostics.push_back(makeWarning(
          "TRAINED_AGAINST_STALE", h.file, ref.path,
          "UHD '" + h.name + "' was trained against " + T + " '" + ref.id + "' revision " + ref.revision + ", but " +
              named->file + " has revision " + **revision + "; retrain the model against revision " + **revision +
              " (or correct trained_against)"));
    }
  }
}

void Loader::resolveEngines() {
  for (std::size_t i = 0; i < set_.engines.size(); ++i) {
    if (removed_.count({"ued", i}) != 0) continue;
    Engine& e = set_.engines[i];
    bool refused = false;
    std::vector<std::string> unloaded;
    auto ref = [&](const std::string& id, const std::string& want, const std::string& path) {
      std::string why;
      const RefFound r = lookup(id, want, e.file, path, &why);
      if (r == RefFound::Refused) refused = true;
      if (r == RefFound::Unloaded) unloaded.push_back(why);
      return r == RefFound::Ok;
    };
    if (ref(e.metadata, "kmd", "$.metadata")) {
      const MetadataSchema& kmd = set_.metadataSchemas[index_.at(idKey(e.metadata)).index];
      std::string names;
      for (const MetadataField& f : kmd.fields) names += (names.empty() ? "'" : ", '") + f.name + "'";
      for (std::size_t k = 0; k < e.knobs.size(); ++k) {
        if (kmd.field(e.knobs[k]) != nullptr) continue;
        set_.diagnostics.push_back(makeError(
            "UNRESOLVED_REF", e.file, jsonPathIndex("$.knobs", k),
            "knob '" + e.knobs[k] + "' is no field of KMD '" + kmd.name + "' (" + kmd.file +
                "); expected one of " + (names.empty() ? std::string("(none)") : names)));
        refused = true;
      }
    }
    for (const auto& [role, table] : e.heuristics) {
      for (const auto& [arch, ids] : table) {
        const std::string base = e.heuristicPaths[role + "/" + arch];
        const bool list = e.raw.at(role).at(arch).is_array();
        for (std::size_t j = 0; j < ids.size(); ++j) {
          const std::string path = list ? jsonPathIndex(base, j) : base;
          if (!ref(ids[j], "uhd", path) || role != "predict_engine") continue;
          // A static order ranks kernels by priority; it has no score to rank engines by.
          const HeuristicDescriptor& h = set_.heuristics[index_.at(idKey(ids[j])).index];
          if (h.adapter != "static_order") continue;
          set_.diagnostics.push_back(makeError(
              "UNRESOLVED_REF", e.file, path,
              "predict_engine cannot use UHD '" + h.name + "' (" + h.file + "): its adapter '" +
                  h.adapter + "' ranks kernels by priority and scores no engine; expected a UHD of "
                  "adapter 'native', 'tree_data', 'table' or 'custom_library'"));
          refused = true;
        }
      }
    }
    checkRoleMetrics(e, refused);
    if (refused || !unloaded.empty()) {
      if (!refused) {
        set_.diagnostics.push_back(makeWarning("ENGINE_DROPPED", e.file, "",
                                               "dropping engine '" + e.name + "': " + unloaded.front()));
      }
      removed_.insert({"ued", i});
      markUnloaded(e, "did not load");
    }
  }
}

void Loader::resolvePacks() {
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    if (removed_.count({"kdp", i}) != 0) continue;
    Pack& p = set_.packs[i];
    bool refused = false;
    bool failedRef = false;  // an unloaded reference whose descriptor was refused with an error
    std::vector<std::string> unloaded;
    auto ref = [&](const std::string& id, const std::string& want, const std::string& path) {
      std::string why;
      const RefFound r = lookup(id, want, p.file, path, &why, &failedRef);
      if (r == RefFound::Refused) refused = true;
      if (r == RefFound::Unloaded) unloaded.push_back(why);
    };
    for (std::size_t m = 0; m < p.matchers.size(); ++m) ref(p.matchers[m], "umd", jsonPathIndex("$.matchers", m));
    if (p.engine) ref(*p.engine, "ued", "$.engine");
    if (p.dispatch) ref(*p.dispatch, "udd", "$.dispatch");
    std::vector<PackMember> resolved;
    for (const KernelRef& kr : p.refs) {
      std::string why;
      const RefFound r = lookup(kr.id, "ukd", p.file, kr.jsonPath, &why);
      if (r == RefFound::Refused) refused = true;
      if (r != RefFound::Ok) continue;  // a skipped or malformed UKD leaves only itself out
      Standalone& u = standalone_[index_.at(idKey(kr.id)).index];
      if (!u.claimedBy.empty()) {
        set_.diagnostics.push_back(makeError("DUPLICATE_MEMBER", p.file, kr.jsonPath,
                                             "UKD '" + u.kernel.id + "' (" + u.kernel.file +
                                                 ") is already in pack " + u.claimedBy +
                                                 "; a kernel belongs to one pack"));
        continue;
      }
      u.claimedBy = p.file;
      PackMember m;
      m.index = kr.index;
      m.ref = kr.id;
      m.kernel = u.kernel;
      m.raw = u.raw;
      m.root = u.root;
      resolved.push_back(std::move(m));
    }
    if (!refused && !unloaded.empty()) {
      set_.diagnostics.push_back(makeWarning("PACK_DROPPED", p.file, "",
                                             "dropping pack '" + p.name + "': " + unloaded.front()));
    }
    if (refused || !unloaded.empty()) {
      removed_.insert({"kdp", i});
      // A version skip drops the pack quietly; after an error, what does resolve is still judged.
      if (!refused && !failedRef) continue;
      judgedOnly_.insert(i);
    }
    for (PackMember& m : resolved) p.members.push_back(std::move(m));
    const auto byIndex = [](const PackMember& a, const PackMember& b) { return a.index < b.index; };
    if (!std::is_sorted(p.members.begin(), p.members.end(), byIndex)) {
      std::stable_sort(p.members.begin(), p.members.end(), byIndex);
    }

    // A kernel's arch is a subset of its pack's; its metadata fills the KMD.
    const Engine* engine = p.engine ? kept(set_.engines, "ued", *p.engine) : nullptr;
    const MetadataSchema* kmd = engine ? kept(set_.metadataSchemas, "kmd", engine->metadata) : nullptr;
    keepMembers(p.members, [&](PackMember& m) {
      bool ok = true;
      if (!p.arch.empty() && m.kernel.arch && !m.kernel.arch->empty()) {
        std::string extra;
        for (const std::string& a : *m.kernel.arch)  // a generic family covers its members
          if (std::none_of(p.arch.begin(), p.arch.end(), [&](const std::string& pa) { return targetRunsOn(a, pa); }))
            extra += (extra.empty() ? "'" : ", '") + a + "'";
        if (!extra.empty()) {
          std::string listed;
          for (const std::string& a : p.arch) listed += (listed.empty() ? "" : ", ") + a;
          set_.diagnostics.push_back(makeError(
              "ARCH_NOT_SUBSET", m.kernel.file, jsonPathKey(m.kernel.jsonPath, "arch"),
              "arch " + extra + " not in its KDP's arch [" + listed + "] (" + p.file +
                  "); a kernel's arch is a subset of its pack's"));
          ok = false;
        }
      }
      if (kmd != nullptr) {
        if (auto md = completeMetadata(*kmd, m.kernel, set_.diagnostics)) {
          m.completedMetadata = std::move(*md);
        } else {
          ok = false;
        }
      } else {
        m.completedMetadata = m.kernel.metadata;
      }
      return ok;
    });
  }
  for (const Standalone& u : standalone_) {
    if (!u.removed && u.claimedBy.empty()) {
      set_.diagnostics.push_back(Diagnostic{Severity::Note, "ORPHAN_KERNEL", u.kernel.file, "",
                                            "not referenced by any KDP; this kernel ships in no shard"});
    }
  }
}

// The completed metadata is unique among kernels one engine serves on one
// arch: two kernels collide where their arch sets meet.
void Loader::checkMetadataUnique() {
  // Per kernel only a map lookup: arch sets and wording are built on a collision.
  struct Seen {
    const Pack* pack;
    const PackMember* member;
  };
  auto archesOf = [](const Pack& p, const PackMember& m) {
    if (m.kernel.arch && !m.kernel.arch->empty()) {
      return std::set<std::string>(m.kernel.arch->begin(), m.kernel.arch->end());
    }
    return std::set<std::string>(p.arch.begin(), p.arch.end());  // empty: every arch
  };
  // Per engine, metadata text -> the kernels seen with it (nearly always one,
  // held without a vector of its own), each map sized once for its kernels.
  struct Group {
    std::size_t count = 0;
    Seen first{};
    std::vector<Seen> more;
  };
  std::vector<std::pair<Pack*, const Engine*>> served;
  std::unordered_map<const Engine*, std::size_t> kernels;
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    Pack& p = set_.packs[i];
    if ((removed_.count({"kdp", i}) != 0 && judgedOnly_.count(i) == 0) || !p.engine) continue;
    const Engine* engine = kept(set_.engines, "ued", *p.engine);
    if (engine == nullptr) continue;
    served.emplace_back(&p, engine);
    kernels[engine] += p.members.size();
  }
  std::unordered_map<const Engine*, std::unordered_map<std::string, Group>> byEngine;
  for (const auto& [engine, n] : kernels) byEngine[engine].reserve(n);  // no rehash visiting every node
  for (const auto& [packPtr, engine] : served) {
    Pack& p = *packPtr;
    std::unordered_map<std::string, Group>& groups = byEngine[engine];
    for (PackMember& m : p.members) {
      const auto slot = groups.try_emplace(canonicalMetadataText(m.completedMetadata)).first;
      const std::string& text = slot->first;
      Group& group = slot->second;
      bool clash = false;
      for (std::size_t k = 0; k < group.count; ++k) {
        const Seen& s = k == 0 ? group.first : group.more[k - 1];
        const std::set<std::string> mine = archesOf(p, m);
        const std::set<std::string> theirs = archesOf(*s.pack, *s.member);
        std::set<std::string> on;
        if (mine.empty()) {
          on = theirs;
        } else if (theirs.empty()) {
          on = mine;
        } else {
          std::set_intersection(mine.begin(), mine.end(), theirs.begin(), theirs.end(),
                                std::inserter(on, on.end()));
          if (on.empty()) continue;  // no shard holds both
        }
        if (!options_.arches.empty()) {
          // Only the shards asked for: `on` empty stands for every arch.
          std::set<std::string> asked;
          for (const std::string& a : options_.arches)
            if (on.empty() || on.count(a) != 0) asked.insert(a);
          if (asked.empty()) continue;
          on = std::move(asked);
        }
        std::string onText;
        for (const std::string& a : on) onText += (onText.empty() ? " on " : ", ") + a;
        const Kernel& other = s.member->kernel;
        const std::string where = other.jsonPath == "$" ? other.file : other.file + ": " + other.jsonPath;
        set_.diagnostics.push_back(makeError(
            "METADATA_NOT_UNIQUE", m.kernel.file, jsonPathKey(m.kernel.jsonPath, "metadata"),
            "completed metadata " + text + " of " + kernelLabel(m.kernel) + " equals that of " + kernelLabel(other) +
                " (" + where + ") under engine '" + engine->name + "'" + onText +
                "; the engine cannot tell them apart"));
        clash = true;
        break;
      }
      // Reported, but kept: the other rules still look at it (all problems of one pass).
      if (!clash) {
        if (group.count++ == 0) {
          group.first = Seen{&p, &m};
        } else {
          group.more.push_back(Seen{&p, &m});
        }
      }
    }
  }
}

void Loader::compact() {
  auto keep = [&](auto& vec, const char* type) {
    using T = typename std::decay_t<decltype(vec)>::value_type;
    std::vector<T> out;
    for (std::size_t i = 0; i < vec.size(); ++i)
      if (removed_.count({type, i}) == 0) out.push_back(std::move(vec[i]));
    vec = std::move(out);
  };
  for (const std::size_t i : judgedOnly_) set_.refusedPacks.push_back(std::move(set_.packs[i]));
  // A pack left with no kernel is dropped.
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    if (removed_.count({"kdp", i}) != 0 || !set_.packs[i].members.empty()) continue;
    const Pack& p = set_.packs[i];
    set_.diagnostics.push_back(makeWarning("PACK_DROPPED", p.file, "$.kernelDescriptors",
                                           "dropping pack '" + p.name +
                                               "': none of its kernels loaded"));
    removed_.insert({"kdp", i});
  }
  keep(set_.packs, "kdp");
  keep(set_.dispatches, "udd");
  keep(set_.engines, "ued");
  keep(set_.metadataSchemas, "kmd");
  keep(set_.matchers, "umd");
  keep(set_.heuristics, "uhd");
}

void Loader::resolve() {
  uniqueIds();
  checkArtifacts();
  resolveEngines();
  checkTrainedAgainst();
  resolvePacks();
  checkMetadataUnique();
  compact();
}

}  // namespace

// --------------------------------------------------------------------------- set

const Pack* DescriptorSet::findPack(std::string_view id) const { return findById(packs, id); }
const Dispatch* DescriptorSet::findDispatch(std::string_view id) const { return findById(dispatches, id); }
const Engine* DescriptorSet::findEngine(std::string_view id) const { return findById(engines, id); }
const MetadataSchema* DescriptorSet::findMetadataSchema(std::string_view id) const {
  return findById(metadataSchemas, id);
}
const MatcherDescriptor* DescriptorSet::findMatcher(std::string_view id) const { return findById(matchers, id); }
const HeuristicDescriptor* DescriptorSet::findHeuristic(std::string_view id) const {
  return findById(heuristics, id);
}

const PackMember* DescriptorSet::findKernel(std::string_view id, const Pack** pack) const {
  const std::string key = idKey(id);
  for (const Pack& p : packs) {
    for (const PackMember& m : p.members) {
      if (!sameIdKey(m.kernel.id, key)) continue;
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

DescriptorSet loadRoots(const std::vector<fs::path>& roots, const LoaderOptions& options) {
  Loader loader(options);
  try {
    for (std::size_t i = 0; i < roots.size(); ++i) loader.loadRoot(roots[i], i);
    loader.resolve();
  } catch (const std::exception& e) {
    // Nothing in the load should throw; if something does, say so instead of crashing.
    loader.diags().push_back(makeError("INTERNAL", "", "", std::string("loader failure: ") + e.what()));
  }
  DescriptorSet set = loader.take();
  set.maxDecompressedBytes = options.maxDecompressedBytes;  // spent where launch code is loaded
  return set;
}

DescriptorSet loadShard(const fs::path& root, const LoaderOptions& options) {
  return loadRoots({root}, options);
}

std::optional<std::string> descriptorType(std::string_view name) {
  // name.<type>.json with a non-empty first part.
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 3 || parts.back() != "json" || parts.front().empty()) return std::nullopt;
  const std::string_view t = parts[parts.size() - 2];
  for (const char* known : kTypes)
    if (t == known) return std::string(t);
  return std::nullopt;
}

namespace {

// Whether a folder holds a file named like a descriptor, at any depth.
bool holdsDescriptors(const fs::path& folder) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && descriptorType(it->path().filename().string())) return true;
  }
  return false;
}

struct WalkContext {
  fs::path realRoot;  // the root with every link resolved
  std::set<std::string> excluded;
};

void walkFolder(const fs::path& folder, const std::string& relFolder, const WalkContext& ctx,
                std::vector<WalkedFile>& out, std::vector<Diagnostic>& diags) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) {
    diags.push_back(makeError("READ_FAILED", relFolder.empty() ? "." : relFolder, "",
                              "cannot list folder: " + ec.message()));
    return;
  }
  std::sort(entries.begin(), entries.end(), [](const fs::directory_entry& a, const fs::directory_entry& b) {
    return a.path().filename().string() < b.path().filename().string();
  });
  auto note = [&](const std::string& rel, const std::string& why) {
    diags.push_back(Diagnostic{Severity::Note, "SKIPPED", "", "", "skipping " + escapedText(rel) + ": " + why});
  };
  for (const fs::directory_entry& e : entries) {
    const std::string name = e.path().filename().string();
    const std::string rel = relFolder.empty() ? name : relFolder + "/" + name;
    const bool isLink = e.is_symlink(ec);
    const fs::file_type type = e.status(ec).type();  // follows links
    const bool isDir = type == fs::file_type::directory;
    const bool realDir = isDir && !isLink;
    const bool isJson = name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0;
    if (name.front() == '.') {
      if (realDir || isJson) note(rel, "dot-prefixed path");
      continue;
    }
    // A name that is no UTF-8 text cannot be a file field, an id's origin or a JSON
    // report's string: refused, named with its bytes escaped, and not read (a folder
    // only when descriptors lie in it; any other is no business of the walk).
    if ((isJson || (realDir && holdsDescriptors(e.path()))) && !detail::validUtf8(name)) {
      diags.push_back(makeError("NAME_NOT_UTF8", escapedText(rel), "",
                                std::string("the ") + (isDir ? "folder" : "file") +
                                    " name is not UTF-8 text; it was not " + (isDir ? "walked" : "read") +
                                    ": rename it (descriptor files and their folders are named in UTF-8)"));
      continue;
    }
    if (isLink && isDir) {
      note(rel, "symbolic link to a folder (not followed)");
      continue;
    }
    if (realDir) {
      // The archive folder of a shard is not walked; descriptors in it are a
      // mistake (an authored root may not use the name).
      if (relFolder.empty() && name == "kpack") {
        if (holdsDescriptors(e.path())) {
          diags.push_back(makeError("KPACK_FOLDER", rel, "",
                                    "a top-level folder named 'kpack' would collide with the archive folder "
                                    "of a shard; rename it"));
        }
        continue;
      }
      if (ctx.excluded.count(name) != 0) {
        note(rel, "excluded folder (--exclude-folder)");
        continue;
      }
      walkFolder(e.path(), rel, ctx, out, diags);
      continue;
    }
    if (!isJson) continue;
    const auto dtype = descriptorType(name);
    if (!dtype) {
      note(rel, "no descriptor type token; name it <name>.<type>.json with type one of " + typeListText());
      continue;
    }
    if (type != fs::file_type::regular) {
      diags.push_back(makeError("NOT_A_FILE", rel, "",
                                std::string("expected a regular file, found ") + detail::fileKindName(type) +
                                    (isLink ? " behind a symbolic link" : "") + "; it was not opened"));
      continue;
    }
    if (isLink) {
      // A linked descriptor is read only when it stays inside the root.
      const fs::path target = fs::canonical(e.path(), ec);
      const fs::path inside = ec ? fs::path() : target.lexically_relative(ctx.realRoot);
      if (ec || inside.empty() || *inside.begin() == "..") {
        diags.push_back(makeError("LINK_ESCAPES", rel, "",
                                  "a symbolic link that leaves the descriptor root (to " + target.string() +
                                      "); descriptors are read from inside the root only, so it was not opened"));
        continue;
      }
    }
    out.push_back(WalkedFile{rel, e.path(), *dtype});
  }
}

}  // namespace

std::vector<WalkedFile> walkRoot(const fs::path& root, std::vector<Diagnostic>& diags,
                                 const std::vector<std::string>& excludeFolders) {
  std::vector<WalkedFile> out;
  std::error_code ec;
  WalkContext ctx{fs::canonical(root, ec), std::set<std::string>(excludeFolders.begin(), excludeFolders.end())};
  if (ec) ctx.realRoot = root;
  walkFolder(root, "", ctx, out, diags);
  std::sort(out.begin(), out.end(), [](const WalkedFile& a, const WalkedFile& b) { return a.rel < b.rel; });
  return out;
}

Result<Json> readDescriptorFile(const fs::path& path) {
  auto read = detail::readRegularFile(path, kMaxDescriptorBytes);
  if (!read) return Result<Json>::failure(read.error());
  return parseDescriptorText(read.value());
}

std::optional<std::string> detail::noShardIn(const fs::path& folder, const std::vector<WalkedFile>& files) {
  std::error_code ec;
  // Folders below named like arches, links not followed (the walk follows none);
  // those holding kpack/ are shards as pack writes them.
  std::set<std::string> archFolders, shards;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (it->is_symlink(e2) || !it->is_directory(e2) || !isArchName(name)) continue;
    archFolders.insert(name);
    if (fs::is_directory(fs::symlink_status(it->path() / "kpack", e2))) shards.insert(name);
  }
  const std::string guess = !shards.empty() ? *shards.begin() : archFolders.empty() ? "" : *archFolders.begin();
  const std::string hint = guess.empty() ? "" : "; did you mean " + (folder / guess).string() + "?";
  if (files.empty()) return "holds no shard: no descriptor file (<name>.<type>.json) lies under it" + hint;
  if (shards.empty()) return std::nullopt;
  for (const WalkedFile& f : files)
    if (shards.count(f.rel.substr(0, f.rel.find('/'))) == 0) return std::nullopt;
  std::string listed;
  for (const std::string& s : shards) listed += (listed.empty() ? "" : ", ") + s;
  return "holds no shard: its descriptors lie in the shard folder" + std::string(shards.size() == 1 ? " " : "s ") +
         listed + " below it (it is an out root; a shard is OUT_ROOT/<arch>/)" + hint;
}

}  // namespace ukdpack
