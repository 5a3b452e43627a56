// The descriptor model: kernels (UKD) and their sources, and the three helpers
// that are the one reader of a kernel's launches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/json/json_text.hpp"

namespace ukdpack {

// "<major>.<minor>" of a descriptor type's version line.
struct Version {
  int major = 0;
  int minor = 0;

  static std::optional<Version> parse(std::string_view text);
  std::string str() const;
  friend bool operator==(const Version& a, const Version& b) { return a.major == b.major && a.minor == b.minor; }
  friend bool operator!=(const Version& a, const Version& b) { return !(a == b); }
  friend bool operator<(const Version& a, const Version& b) {
    return a.major != b.major ? a.major < b.major : a.minor < b.minor;
  }
};

// One kernel argument as the AMDGPU metadata note (or a cubin's parameter
// records) describe it; hidden arguments are never part of a signature.
struct SignatureArg {
  std::string kind;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  std::optional<std::string> name;
};
using Signature = std::vector<SignatureArg>;

// "[global_buffer/8@0 'ws', by_value/4@8]" for log lines.
std::string describeSignature(const Signature& sig);

// One source of a kernel: the single `kernel_source` or one `sources` entry.
struct KernelSource {
  std::string kind;  // a row of sourceKinds()
  // The entry as written, `kind` included; null in a source no entry was read into
  // (a multi-launch kernel's unused `source`).
  JsonText fields;
  // The string the kind's file field (SourceKindInfo::fileField) names, when
  // the kind has one and it is a string: what the loader checks exists.
  std::optional<std::string> file;

  // Filled for the packed form (SourceKindInfo::packed()).
  std::string library;
  std::string tocKey;
  std::string symbol;
  std::string sha256;
  Signature signature;
  // Several objects for one launch, one per target ID the archive files it under
  // (feature variants): target ID -> sha256. Empty: the one object of `sha256`.
  std::map<std::string, std::string> targets;
};

// How the reader reads one field of a kernel source (and what the packer may
// write there).
enum class SourceFieldType {
  String,         // a non-empty string
  RelativePath,   // a non-empty relative path without '..' segments (an identity key)
  Object,         // a JSON object
  Build,          // {defines: {NAME: scalar}, flags: [string], generic: bool}
  Sha256,         // 64 lowercase hex digits
  Signature,      // [{kind, size, offset, name?}]
  TargetDigests,  // {target ID: sha256}: feature variants of one packed object
};
struct SourceField {
  const char* name;
  SourceFieldType type;
  bool required;
};
// How a kind's code object comes to be.
enum class SourceProducer {
  Compile,   // a compiler (the row's `compiler`) builds it from a source file
  Prebuilt,  // the file is the object
  Module,    // a Python builder module writes it
  None,      // no code object (embedded source the host compiles)
  Packed,    // the packed form: an archive member the packer wrote
};
const char* producerName(SourceProducer p);  // "compile", "prebuilt", "module", "none", "packed"

// What ukdpack knows of each kernel-source kind, in one table: its fields (in
// reading order, `kind` aside), the field that names a file, whether it may be a
// launch of a `sources` map, the archive entry type of its code objects, how its
// object comes to be, and which field names the launch's symbol. The reader,
// the loader's messages, the runtime's packed-form tests and (through the
// extension) the packer all read it: adding a kind is a row here and a producer.
struct SourceKindInfo {
  const char* name;
  std::vector<SourceField> fields;
  const char* fileField;  // "" when no field names a file
  const char* fileWhat;   // how messages call that file ("source", "prebuilt object")
  bool launchable;        // may be a `sources` launch
  const char* entryType;  // "hsaco", "cubin", or "" (no code object of its own)
  bool authored;          // an authored tree may name it (the packed form is the packer's)
  SourceProducer producer;
  const char* symbolField;  // the field naming the launch's symbol; "": read from the object
  const char* stemField;    // the field whose base name stems a toc key
  const char* compiler;     // the compiler a Compile producer runs ("" for others)

  // Whether a source of this kind may carry `field`.
  bool takes(std::string_view field) const;
  // The packed form: an archive member named by library, toc key and digest.
  bool packed() const { return producer == SourceProducer::Packed; }
};
const std::vector<SourceKindInfo>& sourceKinds();
// The row of `kind`, or nullptr for an unknown kind.
const SourceKindInfo* sourceKind(std::string_view kind);
// The row of the packed form (the one kind whose producer is Packed).
const SourceKindInfo& packedKind();
// Whether `src` is in the packed form (an archive member).
bool isPackedSource(const KernelSource& src);
// The kinds (authored ones only, with `authoredOnly`) as a message lists them:
// "hip, hsaco, embedded_source, cuda or builder".
std::string listedKinds(bool authoredOnly);

// One kernel variant (a UKD, standalone or inline in a KDP).
struct Kernel {
  std::string id;
  std::string name;
  Version version;
  Json metadata = Json::object();
  std::int64_t priority = 0;
  std::optional<std::vector<std::string>> arch;  // absent: the pack's arches

  // Single launch: `source`. Multi launch: `sources`, keyed by launch name
  // (so iteration is in sorted name order); `source` then stays default.
  // Read both only through the helpers below.
  KernelSource source;
  std::map<std::string, KernelSource> sources;

  Json provenance;                // null when absent
  std::string file;               // descriptor file it was read from
  std::string jsonPath;           // "$" standalone, "$.kernelDescriptors[<i>]" inline
  std::filesystem::path baseDir;  // folder that `library` paths are joined onto
  // Empty, or why the kernel could not be read from its file when first used (a
  // shard read through its index, whose file changed after the load): it then holds
  // only what the index records, and its code is refused with this reason.
  std::string unreadable;
};

// The launch names of a kernel: empty for a single-launch kernel.
std::set<std::string> launchNamesOf(const Kernel& kernel);

// The one source of a single-launch kernel, or nullptr for a multi-launch
// kernel. Points into `kernel`: valid only while it lives.
const KernelSource* singleLaunchSource(const Kernel& kernel);
const KernelSource* singleLaunchSource(const Kernel&& kernel) = delete;

// Whether every launch's source satisfies `pred`, whatever the kernel's shape.
bool allLaunchSources(const Kernel& kernel, const std::function<bool(const KernelSource&)>& pred);

// "{consume, produce}" (sorted), "{}" for a single-launch kernel.
std::string describeLaunchSet(const std::set<std::string>& names);

// "kernel 'NAME' (id ID)": how every diagnostic names a kernel, its id beside its
// name (as upstream's validator does; scripts grep for the id).
std::string kernelLabel(std::string_view name, std::string_view id);
std::string kernelLabel(const Kernel& kernel);
// A kernel's launch: "kernel 'K' (id I, single launch)" for "", else "kernel 'K' (id I) launch 'NAME'".
std::string launchLabel(const Kernel& kernel, const std::string& launch);
std::string launchLabel(std::string_view name, std::string_view id, const std::string& launch);

// Where a kernel object sits, for diagnostics and `library` resolution.
struct KernelContext {
  std::string file;
  std::string jsonPath = "$";
  std::filesystem::path baseDir;
};

// Parses one UKD object strictly: every problem is appended to `diags`
// (errors name file and JSON path); returns nothing when any error was found.
std::optional<Kernel> parseKernel(const Json& ukd, const KernelContext& ctx, std::vector<Diagnostic>& diags);

// The one refusal of a construct older trees (and older upstream packers) wrote:
// "legacy form: <what>; write <instead> instead", naming `ukdpack migrate` where
// that command rewrites it mechanically. One message per occurrence replaces
// the unknown-key and missing-field errors the old shape would otherwise cause.
std::string legacyFormMessage(std::string_view what, std::string_view instead, bool rewritable);

// Whether a key is extension data (`x-` or `_` prefix): carried, never read.
bool isExtensionKey(std::string_view key);

// Whether a launch name has the shape [A-Za-z][A-Za-z0-9_]*.
bool isLaunchName(std::string_view name);

// ---------------------------------------------------------------------------
// The other descriptor types. Each parser is strict in the way
// parseKernel is: it reads exactly the fields the type's JSON Schema names,
// words every refusal as the schema's `x-expect` / `x-message` texts do, and
// refuses unknown keys except extension keys (`x-`, `_`).

// A descriptor context names the file (root-relative), the JSON path of the
// object and the folder relative paths in it are joined onto.
using DescriptorContext = KernelContext;

// The comparison key of an id: UUIDs compare case-insensitively (lowercased),
// other ids verbatim.
std::string idKey(std::string_view id);
// The same into `key`, whose capacity is reused (a lookup's key made without allocating).
void assignIdKey(std::string& key, std::string_view id);
// Whether idKey(id) == key, without building idKey(id) (lookups by id).
bool sameIdKey(std::string_view id, std::string_view key);

// The versions each descriptor type's reader reads: "<major>.<minor>" up to a
// maximum minor within one major.
struct VersionLimits {
  Version kdp{1, 1};
  Version ukd{1, 1};
  Version udd{1, 1};
  Version ued{1, 1};
  Version kmd{1, 0};
  Version umd{1, 0};
  Version uhd{1, 1};

  // The limit of a type token ("kdp", "ukd", ...); kdp's for an unknown token.
  const Version& of(std::string_view type) const;
};

// "1.0, 1.1" for a limit of 1.1: every version a reader up to `max` reads.
std::string readableVersions(const Version& max);

// What a reader up to `max` does with a document's `version`: read
// it, skip it (a newer minor or another major: a warning), refuse it (not a
// version at all: an error), or leave a missing version to the parser.
enum class VersionGate { Read, Skip, Malformed, Missing };
struct VersionCheck {
  VersionGate gate = VersionGate::Missing;
  Version version;      // when it parsed
  std::string message;  // for Skip and Malformed: the sentence to report
  // For Skip and Malformed: the refusal where a newer version cannot be skipped
  // (an authored tree: the packer cannot write what it does not read).
  std::string refusal;
};
// `type` is the token ("ukd"); messages name it upper-case ("UKD version 1.2").
VersionCheck checkVersion(const Json& doc, std::string_view type, const Version& max);

// Fields every file-backed descriptor has, plus where it was read from.
struct DescriptorInfo {
  std::string id;
  Version version;
  std::string name;
  std::string file;  // root-relative path of the file holding it
  std::string jsonPath = "$";
  std::filesystem::path baseDir;  // the folder of that file
  std::size_t root = 0;           // index into DescriptorSet::roots
  // The object as written, extension keys included; a pack's without its
  // kernelDescriptors (each kernel's object is its member's `raw`).
  Json raw;
};

// A kernel read when it is first asked for (a shard index's: a load that reads
// each kernel from its own bytes). `read` builds it and its completed metadata
// exactly as the JSON load would; what the state manager ranks and filters on
// is known up front.
class KernelReader {
 public:
  virtual ~KernelReader() = default;
  virtual void read(std::size_t index, Kernel& kernel, Json& completedMetadata) const = 0;
  // The kernel's object as written (null when its file no longer reads as it did).
  virtual JsonText raw(std::size_t index) const = 0;
};
// One per deferred kernel, held by its reader in one array per file (not one
// allocation each); a member points at its record through a shared_ptr that
// keeps the reader alive.
struct DeferredKernel {
  const KernelReader* reader = nullptr;  // the record's owner
  std::size_t index = 0;                 // the reader's own numbering
  std::string_view id;                   // a view of what `reader` keeps alive
  std::int64_t priority = 0;
  // Lists many kernels share, held once by the reader: the kernel's arches
  // (nullopt: its pack's) and its launch names (sorted; empty: a single launch).
  const std::optional<std::vector<std::string>>* arch = nullptr;
  const std::vector<std::string>* launches = nullptr;
  mutable std::once_flag once;
  mutable std::unique_ptr<Kernel> kernel;  // allocated when built: a set of 100,000 holds few
  mutable Json completedMetadata;

  void ensure() const {
    std::call_once(once, [this] {
      auto built = std::make_unique<Kernel>();
      reader->read(index, *built, completedMetadata);
      kernel = std::move(built);
    });
  }
};

// The kernel of a member that holds none (default-constructed).
const Kernel& emptyKernel();

// One kernel of a pack: inline in the KDP, or a standalone UKD it names by id.
// Small (four words): a set read through a shard index holds one per kernel and
// builds nothing else for it until it is asked for; what a member owns (its
// kernel, raw object, completed metadata, reference) is held apart, shared by
// copies until one of them is edited.
struct PackMember {
  std::size_t index = 0;  // position in the KDP's kernelDescriptors
  std::size_t root = 0;   // root the UKD was read from (a standalone UKD's own)

  // The standalone UKD's id; empty for an inline kernel.
  const std::string& ref() const;
  // The UKD object as written, extension keys included. A deferred kernel's is
  // read from its file when first asked for: a load keeps no descriptor text.
  JsonText raw() const;

  // The kernel. Read only through this accessor: a load may build it on first
  // use rather than up front (any thread), and the reference stays valid while the set lives.
  const Kernel& kernel() const {
    if (deferred_) {
      deferred_->ensure();
      return *deferred_->kernel;
    }
    return own_ ? own_->kernel : emptyKernel();
  }
  // The metadata completed by the engine's KMD (defaults filled in); the
  // metadata as written when the pack has no engine. Filled by the loader.
  const Json& completedMetadata() const;
  // What ranking and filtering read, without building a deferred kernel.
  std::string_view id() const { return deferred_ ? deferred_->id : std::string_view(kernel().id); }
  std::int64_t priority() const { return deferred_ ? deferred_->priority : kernel().priority; }
  const std::optional<std::vector<std::string>>& arch() const { return deferred_ ? *deferred_->arch : kernel().arch; }
  // Whether its launch names are exactly `names` (empty: a single launch).
  bool launchesAre(const std::set<std::string>& names) const;
  // Its launch names, sorted (empty: a single launch), read as launchesAre does.
  std::vector<std::string> launchNames() const;
  // Whether the kernel is read on first use (and not yet built).
  bool deferred() const { return deferred_ != nullptr; }
  // A deferred kernel read anew into `kernel` and `completed`, and not kept: a check
  // that reads every kernel once then holds none. False (nothing read) when not deferred.
  bool readUnkept(Kernel& kernel, Json& completed) const {
    if (!deferred_) return false;
    deferred_->reader->read(deferred_->index, kernel, completed);
    return true;
  }

  // The loader's (and a test's) writers. Copies of a member share what it owns
  // until one of them is edited.
  Kernel& editKernel();
  void setKernel(Kernel kernel);
  Json& editCompletedMetadata();
  void setCompletedMetadata(Json metadata);
  void setRef(std::string ref);
  void setRaw(JsonText raw);
  void defer(std::shared_ptr<const DeferredKernel> deferred) { deferred_ = std::move(deferred); }

 private:
  // One allocation for all of it (the kernel inline: a default one is no kernel).
  struct Owned {
    std::string ref;
    JsonText raw;
    Kernel kernel;
    Json completedMetadata;
  };
  // What this member owns, made unshared first (copied when a copy shares it).
  Owned& owned();

  std::shared_ptr<Owned> own_;  // nullptr: nothing of its own (a deferred member's usual state)
  std::shared_ptr<const DeferredKernel> deferred_;
};

// A standalone UKD reference as written in kernelDescriptors.
struct KernelRef {
  std::size_t index = 0;
  std::string id;
  std::string jsonPath;
};

// KDP: binds kernels to one engine, one dispatch descriptor and matchers.
struct Pack : DescriptorInfo {
  std::vector<std::string> arch;  // empty: every arch
  std::vector<std::string> matchers;
  std::optional<std::string> engine;
  std::optional<std::string> dispatch;
  // KDP 1.1: the slot of its (slotted) engine whose catalog its kernels join.
  std::optional<std::string> slot;
  // Kernels in kernelDescriptors order. parsePack fills the inline ones; the
  // loader adds the standalone ones it resolves from `refs`.
  std::vector<PackMember> members;
  std::vector<KernelRef> refs;
  Json provenance;  // null when absent
};

// UDD: the native dispatch symbol and, from 1.1, the launches it runs.
struct Dispatch : DescriptorInfo {
  std::string dispatchSymbol;
  std::optional<std::vector<std::string>> launches;  // in run order
};

// One heuristic role map entry: arch (or "default") -> UHD ids.
using HeuristicRoleMap = std::map<std::string, std::vector<std::string>>;

// One slot of a slotted engine (UED 1.1): a position in the engine's run order
// whose kernel is picked from the slot's own catalog (the kernels of every KDP
// naming the slot), ranked by the slot's own heuristics.
struct EngineSlot {
  std::string name;                // [a-z][a-z0-9_]{0,31}, unique in the engine
  std::vector<std::string> knobs;  // KMD field names; their knob ids are "<slot>.<field>"
  // role ("sort_kernel_catalog", "predict_applicable_kernels") -> map
  std::map<std::string, HeuristicRoleMap> heuristics;
  std::map<std::string, std::string> heuristicPaths;  // "role/arch" -> JSON path
  std::string jsonPath;                               // "$.slots[<i>]"
  Json raw;                                           // the slot object as written

  // "<slot>.<field>" for each knob, in order.
  std::vector<std::string> knobIds() const;
};

// UED: engine identity, its KMD, heuristics and knobs.
struct Engine : DescriptorInfo {
  std::string metadata;                 // KMD id
  std::optional<std::string> revision;  // "<major>.<minor>", as upstream writes it
  std::optional<std::string> sdkVersion;
  std::optional<std::string> graphMatchSymbol;  // graph_match.native
  std::vector<std::string> knobs;
  std::vector<std::string> behaviorNotes;
  std::vector<std::string> numericalNotes;
  // role ("sort_kernel_catalog", "predict_engine", "predict_applicable_kernels") -> map
  std::map<std::string, HeuristicRoleMap> heuristics;
  std::map<std::string, std::string> heuristicPaths;  // "role/arch" -> JSON path
  // UED 1.1: the slots in run order; empty for an unslotted engine, whose knobs
  // and kernel roles are engine-wide (a slotted engine has them per slot only).
  std::vector<EngineSlot> slots;

  bool slotted() const { return !slots.empty(); }
  // The slot named `name`, or nullptr.
  const EngineSlot* slot(std::string_view name) const;
  // The index of slot `name` in run order, or nullopt.
  std::optional<std::size_t> slotIndex(std::string_view name) const;
};

// The heuristic roles of a UED, in schema order.
const std::vector<std::string>& heuristicRoles();
// The roles a slot of a slotted UED carries (predict_engine stays engine-wide).
const std::vector<std::string>& slotHeuristicRoles();
// Whether a slot name has the shape [a-z][a-z0-9_]{0,31}.
bool isSlotName(std::string_view name);

// The `behavior_notes` a UED may list (a closed vocabulary).
const std::vector<std::string>& behaviorNoteVocabulary();

struct MetadataField {
  std::string name;
  std::string type;                  // bool int float string int_list
  std::optional<Json> defaultValue;  // absent: the field is mandatory
};

// KMD: the typed fields every kernel's metadata fills.
struct MetadataSchema : DescriptorInfo {
  std::optional<std::string> revision;  // "<major>.<minor>"
  std::vector<MetadataField> fields;
  const MetadataField* field(const std::string& name) const;
};

// UMD: a native applicability check.
struct MatcherDescriptor : DescriptorInfo {
  std::string scope;                    // graph | kernel
  std::optional<std::string> revision;  // "<major>.<minor>"
  std::string matchSymbol;
};

// UHD: how kernels are ranked.
struct HeuristicDescriptor : DescriptorInfo {
  std::string adapter;                   // native static_order tree_data table custom_library
  Json body = Json::object();            // the object keyed by the adapter name
  std::optional<std::string> symbol;     // native.symbol / custom_library.symbol
  std::optional<std::string> artifact;   // tree_data/table.artifact: a file shipped beside the UHD
  std::optional<std::string> library;    // custom_library.library: shipped beside it too
  std::optional<std::string> objective;  // max | min; absent only for static_order
  std::optional<std::string> metric;     // score.metric: tflops | time; absent when it declares none
  // The body's `hash` (tree_data, table, custom_library) as written: a sha256 in
  // either spelling (bare 64 hex, or 'sha256:' + 64 hex) is checked against the file;
  // any other non-empty string is carried unchecked, as upstream does.
  std::optional<std::string> hash;
  // What `trained_against` names: (type "ued" | "kmd" | "umd", id, revision, JSON path
  // of the revision), compared with the descriptors of the set (a warning when stale).
  struct TrainedRef {
    std::string type;
    std::string id;
    std::string revision;
    std::string path;
    std::optional<std::string> slot;  // the ued ref's `slot` (UHD 1.1)
  };
  std::vector<TrainedRef> trainedAgainst;
  // UHD 1.1: the slot of a slotted engine it ranks or filters kernels for; a UHD
  // named in a slot's role map declares that slot.
  std::optional<std::string> slot;
};

// The lowercase 64-hex digest a body `hash` states, when it is a sha256 in
// either spelling ("sha256:" + 64 hex, or 64 bare hex); nullopt for any other string.
std::optional<std::string> statedSha256(std::string_view hash);

// Strict parsers; each appends every problem to `diags` and returns nothing
// when the descriptor itself is malformed. parsePack gates each inline kernel
// by `maxUkd` (a newer one is skipped with a VERSION_SKIPPED warning) and
// leaves out a malformed inline kernel (its errors in `diags`) while keeping
// the pack.
// With `refuseNewer`, a newer inline kernel is an error instead (authored trees).
std::optional<Pack> parsePack(const Json& kdp, const DescriptorContext& ctx, std::vector<Diagnostic>& diags,
                              const Version& maxUkd = VersionLimits{}.ukd, bool refuseNewer = false);
// The same, moving each kernel's object into its member's `raw` instead of
// copying it (the loader's path: it has no further use for the document).
std::optional<Pack> parsePack(Json&& kdp, const DescriptorContext& ctx, std::vector<Diagnostic>& diags,
                              const Version& maxUkd = VersionLimits{}.ukd, bool refuseNewer = false);
std::optional<Dispatch> parseDispatch(const Json& udd, const DescriptorContext& ctx, std::vector<Diagnostic>& diags);
std::optional<Engine> parseEngine(const Json& ued, const DescriptorContext& ctx, std::vector<Diagnostic>& diags);
std::optional<MetadataSchema> parseMetadataSchema(const Json& kmd, const DescriptorContext& ctx,
                                                  std::vector<Diagnostic>& diags);
std::optional<MatcherDescriptor> parseMatcher(const Json& umd, const DescriptorContext& ctx,
                                              std::vector<Diagnostic>& diags);
std::optional<HeuristicDescriptor> parseHeuristic(const Json& uhd, const DescriptorContext& ctx,
                                                  std::vector<Diagnostic>& diags);

// A kernel's metadata completed by its engine's KMD (defaults filled in);
// problems (unknown field, wrong type, missing mandatory field) go to `diags`
// at the kernel's file and `<jsonPath>.metadata`. Nothing when any was found.
std::optional<Json> completeMetadata(const MetadataSchema& kmd, const Kernel& kernel, std::vector<Diagnostic>& diags);

// Metadata in one canonical spelling (sorted keys, ", " and ": ", non-ASCII
// escaped, as json.dumps(sort_keys=True) writes): how messages quote it and
// how kernels' completed metadata is compared.
std::string canonicalMetadataText(const Json& metadata);

}  // namespace ukdpack
