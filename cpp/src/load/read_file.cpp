// Judging one descriptor file on its own (any thread): read, scanned onto a
// tape, parsed by its type's reader (kernels from the tape itself), its
// kernels' sources checked; then what it produced joins the set in walk order.
#include <exception>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "base/files.hpp"
#include "json/json_tape.hpp"
#include "load/loader_impl.hpp"
#include "model/object_reader.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

namespace detail {

namespace {

JsonText writtenAs(Json& doc) { return JsonText(std::move(doc)); }
JsonText writtenAs(const detail::JsonNode& doc) { return detail::textOf(doc); }

}  // namespace

// One file on its own (any thread): read, parsed by its type's reader, its
// kernels' sources checked. Touches nothing of the set.
Loader::FileRead Loader::readFile(const WalkedFile& f, const fs::path& root, std::size_t rootIndex,
                                  const IndexedFile* entry, std::string& scratch) const {
  FileRead out;
  auto& diags = out.diags;
  // A KDP the index reads from its spans keeps no copy of its text: it is read into
  // the thread's scratch buffer, and again when a kernel of it is first built. One
  // of the size the index records and older than the index is not read at all: the
  // index's skeleton of it stands for its text until a kernel of it is built.
  const bool spans = entry != nullptr && f.type == "kdp" && entry->spans;
  const bool unchanged =
      spans && boundFolder_ && unchangedSinceIndex(f.path, f.rel, *boundFolder_, *entry, *boundIndex_);
  std::string_view bytes;
  const auto readBytes = [&]() {
    auto read = detail::readRegularFileInto(f.path, kMaxDescriptorBytes, scratch);
    if (!read) {
      Diagnostic d = read.error();
      d.file = f.rel;
      diags.push_back(std::move(d));
      return false;
    }
    bytes = read.value();
    return true;
  };
  if (!unchanged && !readBytes()) return out;
  // The text as the JSON load keeps it, made only where it is kept.
  std::shared_ptr<const std::string> text = spans ? nullptr : std::make_shared<const std::string>(bytes);
  const bool haveBytes = !unchanged;
  const std::string folder = fs::path(f.rel).parent_path().generic_string();
  const DescriptorContext ctx{f.rel, "$", folder.empty() ? root : (root / folder).lexically_normal()};
  // The document, as a Json DOM or (the common case of kernels) a tape of the text.
  const auto withDoc = [&](auto& doc, Json* consume, const InlineKernelReader* inlineKernels = nullptr) {
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
      diags.push_back(makeError(codes::SCHEMA, f.rel, "$.version", vc.refusal));
      remember("did not load");
      return;
    }
    if (vc.gate == VersionGate::Skip) {
      diags.push_back(makeWarning(codes::VERSION_SKIPPED, f.rel, "", "skipping " + f.rel + ": " + vc.message));
      remember("was skipped (" + upperType(f.type) + " version " + vc.version.str() + ")", false);
      return;
    }
    if (vc.gate == VersionGate::Malformed) {
      diags.push_back(makeError(codes::SCHEMA, f.rel, "$.version", vc.message));
      remember("did not load");
      return;
    }
    if (f.type == "kdp") {
      if (auto v = detail::parsePackFrom(doc, consume, ctx, diags, options_.maxVersions.ukd, options_.authored,
                                         inlineKernels)) {
        // The pack's kernels name their files in a few folders: each resolved once.
        detail::RealFolders folders;
        // A kernel read through the index is no authored load's: nothing to check, nothing built.
        keepMembers(v->members, [&](const PackMember& m) {
          return m.deferred() || kernelSourcesOk(m.kernel(), root, diags, folders);
        });
        // Members read from spans got their root as they were made.
        if (inlineKernels == nullptr)
          for (PackMember& m : v->members) m.root = rootIndex;
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
  if (entry != nullptr) {
    const bool binds = unchanged || bindsTo(bytes, *entry);
    std::vector<std::size_t> at;
    std::optional<std::string> skeleton;
    if (unchanged) {
      if (skeletonPlaces(*entry, at)) skeleton.emplace(entry->skeleton);
    } else if (binds && spans) {
      // A file read is cut here, and must give the index's skeleton of it.
      skeleton = packSkeleton(bytes, *entry, at);
      if (skeleton && *skeleton != entry->skeleton) skeleton.reset();
    }
    if (!binds) {
      out.indexMismatch = std::string(kShardIndexFile) + " is stale: " + f.rel +
                          " is not the file it was written for (its size or digest differs)";
    } else if (spans) {
      // The pack read from its skeleton (its text with each inline kernel's object
      // cut out); each kernel is built from its own span when first asked for.
      // Nothing is kept when a span is not exactly one kernelDescriptors object or
      // the pack says anything: the file is then read as written.
      auto skeletonText = skeleton ? std::make_shared<const std::string>(std::move(*skeleton)) : nullptr;
      // A node per kernel's "{}" and a few dozen for the pack's own fields: the tape
      // is not grown (and copied) on the way.
      constexpr std::size_t kPackValues = 64;
      auto tape = skeletonText ? detail::JsonTape::scan(skeletonText, entry->kernels.size() + kPackValues) : nullptr;
      std::size_t next = 0;
      bool fits = tape != nullptr;
      const auto reader =
          std::make_shared<SpanKernels>(f.path, boundIndex_, entry, f.rel, ctx.baseDir, options_.maxVersions.ukd);
      const InlineKernelReader fromSpan = [&](std::size_t i, std::size_t offset, std::vector<PackMember>& members) {
        if (next >= entry->kernels.size() || entry->kernels[next].listIndex != i || at[next] != offset) {
          fits = false;
          return;
        }
        PackMember& m = members.emplace_back();
        m.index = i;
        m.root = rootIndex;
        // The reader's record, kept alive with the reader: no allocation per kernel.
        m.defer(std::shared_ptr<const DeferredKernel>(reader, &reader->record(next++)));
      };
      if (fits) withDoc(tape->root(), nullptr, &fromSpan);
      if (fits && next == entry->kernels.size() && out.pack && out.diags.empty()) {
        out.fromSpans = true;
        out.spanReader = reader;
        return out;
      }
      out = FileRead{};
      out.indexMismatch = std::string(kShardIndexFile) + " does not fit " + f.rel +
                          ": its kernels do not read from the spans and skeleton it records";
    }
  }
  if (!haveBytes && !readBytes()) return out;
  if (!text) text = std::make_shared<const std::string>(bytes);
  // One scan of the text, which also words every refusal of the text itself.
  // Kernels (KDP, UKD: nearly all of a shard's bytes) are read from the tape;
  // the other types from a DOM built from it.
  auto tape = detail::readText(text);
  if (!tape) {
    Diagnostic d = tape.error();
    d.file = f.rel;
    diags.push_back(std::move(d));
    return out;
  }
  if (f.type == "kdp" || f.type == "ukd") {
    withDoc(tape.value()->root(), nullptr);
    return out;
  }
  // Mutable: the typed readers may move subtrees out once they have read them.
  Json doc = tape.value()->root().toJson();
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
  auto place = [&](auto& vec, auto& value) {
    if (!value) return;
    value->root = rootIndex;
    order_.push_back(Slot{f.type, vec.size()});
    vec.push_back(std::move(*value));
  };
  if (read.spanReader) spanReaders_[set_.packs.size()] = std::move(read.spanReader);
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
      diags.push_back(makeError(codes::PACKED_IN_AUTHORED, kernel.file, jsonPathKey(srcPath, "kind"),
                                "kind '" + src.kind +
                                    "' is the packed form written by the packer; an authored tree names what to "
                                    "build (" +
                                    listedKinds(true) + ")"));
      ok = false;
      return;
    }
    if (*info->fileField == '\0' || !(options_.authored || options_.sourceFiles)) return;
    if (!src.file) return;
    const std::string& given = *src.file;
    // The common case, a plain name of a file that is there, without std::filesystem.
    if (!realRoot_.empty() && detail::containedRegularFile(root, realRoot_, kernel.baseDir, given, folders)) return;
    const auto verdict =
        detail::checkContained(root, kernel.baseDir, given, false, realRoot_.empty() ? nullptr : &realRoot_, &folders);
    const std::string msg = detail::describeFileProblem(verdict, given, info->fileWhat, kernel.file);
    if (msg.empty()) return;
    const bool missing = verdict.problem == detail::PathProblem::None;
    diags.push_back(makeError(
        missing ? (info->producer == SourceProducer::Prebuilt ? codes::PREBUILT_MISSING : codes::SOURCE_MISSING)
                : codes::PATH_REFUSED,
        kernel.file, jsonPathKey(srcPath, info->fileField), msg));
  };
  if (const KernelSource* single = singleLaunchSource(kernel)) {
    check(jsonPathKey(kernel.jsonPath, "kernel_source"), *single);
  } else {
    for (const auto& [name, src] : kernel.sources)
      check(jsonPathKey(jsonPathKey(kernel.jsonPath, "sources"), name), src);
  }
  return ok;
}

}  // namespace detail

Result<Json> readDescriptorFile(const fs::path& path) {
  auto read = detail::readRegularFile(path, detail::kMaxDescriptorBytes);
  if (!read) return Result<Json>::failure(read.error());
  return parseDescriptorText(read.value());
}

}  // namespace ukdpack
