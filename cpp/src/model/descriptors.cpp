#include "ukdpack/model/descriptors.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "json/json_tape.hpp"
#include "model/object_reader.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

using detail::BasicObjectReader;
using detail::describeFound;
using detail::JsonNode;

namespace {
// One number of a version: 0, or 1-6 digits without a leading zero.
bool versionNumber(std::string_view s, int& out) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s.front() == '0')) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  std::from_chars(s.data(), s.data() + s.size(), out);
  return true;
}
}  // namespace

std::optional<Version> Version::parse(std::string_view text) {
  const std::size_t dot = text.find('.');
  Version v;
  if (dot == std::string_view::npos || !versionNumber(text.substr(0, dot), v.major) ||
      !versionNumber(text.substr(dot + 1), v.minor)) {
    return std::nullopt;
  }
  return v;
}

std::string Version::str() const { return std::to_string(major) + "." + std::to_string(minor); }

std::string describeSignature(const Signature& sig) {
  std::string out = "[";
  for (std::size_t i = 0; i < sig.size(); ++i) {
    if (i != 0) out += ", ";
    out += sig[i].kind + "/" + std::to_string(sig[i].size) + "@" + std::to_string(sig[i].offset);
    if (sig[i].name) out += " '" + *sig[i].name + "'";
  }
  return out + "]";
}

std::set<std::string> launchNamesOf(const Kernel& kernel) {
  std::set<std::string> names;
  for (const auto& entry : kernel.sources) names.insert(entry.first);
  return names;
}

const Kernel& emptyKernel() {
  static const Kernel none;
  return none;
}

const std::string& PackMember::ref() const {
  static const std::string none;
  return own_ ? own_->ref : none;
}

JsonText PackMember::raw() const {
  if (own_ && !own_->raw.isNull()) return own_->raw;
  return deferred_ ? deferred_->reader->raw(deferred_->index) : JsonText();
}

const Json& PackMember::completedMetadata() const {
  if (deferred_) {
    deferred_->ensure();
    return deferred_->completedMetadata;
  }
  static const Json none;
  return own_ ? own_->completedMetadata : none;
}

PackMember::Owned& PackMember::owned() {
  if (!own_) {
    own_ = std::make_shared<Owned>();
  } else if (own_.use_count() > 1) {
    own_ = std::make_shared<Owned>(*own_);
  }
  return *own_;
}

Kernel& PackMember::editKernel() { return owned().kernel; }
void PackMember::setKernel(Kernel kernel) { owned().kernel = std::move(kernel); }
Json& PackMember::editCompletedMetadata() { return owned().completedMetadata; }
void PackMember::setCompletedMetadata(Json metadata) { owned().completedMetadata = std::move(metadata); }
void PackMember::setRef(std::string ref) { owned().ref = std::move(ref); }
void PackMember::setRaw(JsonText raw) { owned().raw = std::move(raw); }

bool PackMember::launchesAre(const std::set<std::string>& names) const {
  if (deferred_)
    return deferred_->launches->size() == names.size() &&
           std::equal(names.begin(), names.end(), deferred_->launches->begin());
  // Both sorted: compared in place.
  const Kernel& k = kernel();
  return k.sources.size() == names.size() &&
         std::equal(k.sources.begin(), k.sources.end(), names.begin(),
                    [](const auto& entry, const std::string& name) { return entry.first == name; });
}

std::vector<std::string> PackMember::launchNames() const {
  if (deferred_) return *deferred_->launches;
  std::vector<std::string> names;
  for (const auto& entry : kernel().sources) names.push_back(entry.first);
  return names;
}

const KernelSource* singleLaunchSource(const Kernel& kernel) {
  return kernel.sources.empty() ? &kernel.source : nullptr;
}

bool allLaunchSources(const Kernel& kernel, const std::function<bool(const KernelSource&)>& pred) {
  if (kernel.sources.empty()) return pred(kernel.source);
  return std::all_of(kernel.sources.begin(), kernel.sources.end(),
                     [&](const auto& entry) { return pred(entry.second); });
}

std::string kernelLabel(std::string_view name, std::string_view id) {
  return "kernel '" + std::string(name) + "' (id " + std::string(id) + ")";
}

std::string kernelLabel(const Kernel& kernel) { return kernelLabel(kernel.name, kernel.id); }

std::string launchLabel(std::string_view name, std::string_view id, const std::string& launch) {
  if (launch.empty()) return "kernel '" + std::string(name) + "' (id " + std::string(id) + ", single launch)";
  return kernelLabel(name, id) + " launch '" + launch + "'";
}

std::string launchLabel(const Kernel& kernel, const std::string& launch) {
  return launchLabel(kernel.name, kernel.id, launch);
}

std::string describeLaunchSet(const std::set<std::string>& names) {
  std::string out = "{";
  bool first = true;
  for (const std::string& n : names) {
    if (!first) out += ", ";
    out += n;
    first = false;
  }
  return out + "}";
}

bool isExtensionKey(std::string_view key) { return key.substr(0, 2) == "x-" || key.substr(0, 1) == "_"; }

bool isLaunchName(std::string_view name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

namespace {

enum class SourceRole { Single, Launch };

bool isSha256Hex(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A relative path without `..` segments: embedded_source identities.
bool isPlainRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.front() == '\\') return false;
  if (p.size() > 1 && p[1] == ':') return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = p.find_first_of("/\\", start);
    const std::string seg = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (seg == "..") return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

// build: {defines: {NAME: scalar}, flags: [string]}, both optional.
template <class V>
void readBuild(BasicObjectReader<V>& r, std::string_view key, bool required) {
  const V* build = r.object(key, required);
  if (build == nullptr) return;
  BasicObjectReader<V> b(*build, r.file(), r.pathOf(key), r.diags());
  if (const V* defines = b.object("defines", false)) {
    for (auto it = defines->begin(); it != defines->end(); ++it) {
      const V& v = it.value();
      if (!(v.is_string() || v.is_number() || v.is_boolean())) {
        b.error(jsonPathKey(b.pathOf("defines"), it.key()),
                "expected a scalar define value (string, number or boolean), found " + describeFound(v));
      }
    }
  }
  b.stringList("flags", false, true);
  if (const V* generic = b.get("generic"); generic != nullptr && !generic->is_boolean()) {
    b.error(b.pathOf("generic"),
            "expected a boolean (true: compile once for the arch's generic family), found " + describeFound(*generic));
  }
  b.finish();
}

template <class V>
Signature readSignature(BasicObjectReader<V>& r, std::string_view key, bool required) {
  Signature sig;
  const V* list = r.array(key, required);
  if (list == nullptr) return sig;
  sig.reserve(list->size());
  const std::string listPath = r.pathOf(key);
  for (std::size_t i = 0; i < list->size(); ++i) {
    BasicObjectReader<V> a((*list)[i], r.file(), jsonPathIndex(listPath, i), r.diags());
    if (!a.isObject()) continue;
    SignatureArg arg;
    arg.kind = a.string("kind", true).value_or("");
    const auto size = a.integer("size", true);
    const auto offset = a.integer("offset", true);
    if (size && *size < 0) a.error(a.pathOf("size"), "expected a size >= 0, found " + std::to_string(*size));
    if (offset && *offset < 0) a.error(a.pathOf("offset"), "expected an offset >= 0, found " + std::to_string(*offset));
    arg.size = static_cast<std::uint64_t>(std::max<std::int64_t>(0, size.value_or(0)));
    arg.offset = static_cast<std::uint64_t>(std::max<std::int64_t>(0, offset.value_or(0)));
    arg.name = a.string("name", false);
    a.finish();
    sig.push_back(std::move(arg));
  }
  return sig;
}

}  // namespace

const std::vector<SourceKindInfo>& sourceKinds() {
  using F = SourceFieldType;
  using P = SourceProducer;
  // name, fields (name, type, required), file field, what messages call that file,
  // launchable, entry type, authored, producer, symbol field, stem field, compiler
  static const std::vector<SourceKindInfo> kinds = {
      {"hip",
       {{"source", F::String, true}, {"entry", F::String, true}, {"build", F::Build, true}},
       "source",
       "source",
       true,
       "hsaco",
       true,
       P::Compile,
       "entry",
       "source",
       "hip"},
      {"hsaco",
       {{"file", F::String, true}, {"symbol", F::String, true}},
       "file",
       "prebuilt object",
       true,
       "hsaco",
       true,
       P::Prebuilt,
       "symbol",
       "file",
       ""},
      {"embedded_source",
       {{"source_file", F::RelativePath, true}, {"entry_point", F::String, true}},
       "",
       "",
       false,
       "",
       true,
       P::None,
       "entry_point",
       "source_file",
       ""},
      {"cuda",
       {{"source", F::String, true}, {"entry", F::String, true}, {"build", F::Build, true}},
       "source",
       "source",
       true,
       "cubin",
       true,
       P::Compile,
       "entry",
       "source",
       "cuda"},
      // `entry` picks each launch's kernel out of one multi-kernel object; `role`
      // labels a launch (a builder's stages) without making it another launch.
      {"builder",
       {{"module", F::String, true},
        {"function", F::String, true},
        {"spec", F::Object, true},
        {"entry", F::String, false},
        {"role", F::String, false}},
       "",
       "",
       true,
       "hsaco",
       true,
       P::Module,
       "",
       "function",
       ""},
      {"kpack",
       {{"library", F::String, true},
        {"toc_key", F::String, true},
        {"symbol", F::String, true},
        {"sha256", F::Sha256, true},
        {"signature", F::Signature, true},
        {"targets", F::TargetDigests, false}},
       "",
       "",
       true,
       "",
       false,
       P::Packed,
       "symbol",
       "toc_key",
       ""},
  };
  return kinds;
}

const SourceKindInfo* sourceKind(std::string_view kind) {
  for (const SourceKindInfo& k : sourceKinds())
    if (kind == k.name) return &k;
  return nullptr;
}

bool SourceKindInfo::takes(std::string_view field) const {
  return std::any_of(fields.begin(), fields.end(), [&](const SourceField& f) { return field == f.name; });
}

const SourceKindInfo& packedKind() {
  static const SourceKindInfo& packed =
      *std::find_if(sourceKinds().begin(), sourceKinds().end(), [](const SourceKindInfo& k) { return k.packed(); });
  return packed;
}

bool isPackedSource(const KernelSource& src) {
  const SourceKindInfo* info = sourceKind(src.kind);
  return info != nullptr && info->packed();
}

const char* producerName(SourceProducer p) {
  switch (p) {
    case SourceProducer::Compile:
      return "compile";
    case SourceProducer::Prebuilt:
      return "prebuilt";
    case SourceProducer::Module:
      return "module";
    case SourceProducer::None:
      return "none";
    case SourceProducer::Packed:
      return "packed";
  }
  return "none";
}

namespace {

// "a, b or c".
std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

std::string listedKinds(bool authoredOnly) {
  std::vector<std::string> names;
  for (const SourceKindInfo& k : sourceKinds())
    if (k.authored || !authoredOnly) names.emplace_back(k.name);
  return listed(names);
}

namespace {

// The entry as written: a copy of a DOM's, a view of a tape's text.
JsonText writtenAs(const Json& value) { return JsonText(value); }
JsonText writtenAs(const JsonNode& value) { return detail::textOf(value); }
Json built(const Json& value) { return value; }
Json built(const JsonNode& value) { return value.toJson(); }

// Reads one field of a source as its kind's row describes it; the packed form's
// fields land in `src` too.
template <class V>
void readSourceField(BasicObjectReader<V>& r, const SourceKindInfo& kind, const SourceField& field, KernelSource& src) {
  const std::string_view name = field.name;
  switch (field.type) {
    case SourceFieldType::String: {
      const auto value = r.string(name, field.required);
      // The packed form's named members: what the runtime loads the launch by.
      if (!kind.packed()) return;
      if (name == "library") src.library = value.value_or("");
      if (name == "toc_key") src.tocKey = value.value_or("");
      if (name == "symbol") src.symbol = value.value_or("");
      return;
    }
    case SourceFieldType::RelativePath:
      if (auto f = r.string(name, field.required); f && !isPlainRelativePath(*f)) {
        r.error(r.pathOf(name),
                "expected a relative path without '..' segments (it is an identity key), found '" + *f + "'");
      }
      return;
    case SourceFieldType::Object:
      r.object(name, field.required);
      return;
    case SourceFieldType::Build:
      readBuild(r, name, field.required);
      return;
    case SourceFieldType::Sha256:
      if (auto sha = r.string(name, field.required)) {
        if (isSha256Hex(*sha)) {
          src.sha256 = *sha;
        } else {
          r.error(r.pathOf(name), "expected 64 lowercase hex digits, found '" + *sha + "'");
        }
      }
      return;
    case SourceFieldType::Signature:
      src.signature = readSignature(r, name, field.required);
      return;
    case SourceFieldType::TargetDigests:
      // Feature variants of one object (gfx90a:xnack+, gfx90a:xnack-): the digest of
      // the entry filed under each target ID.
      if (const V* targets = r.object(name, field.required)) {
        for (auto it = targets->begin(); it != targets->end(); ++it) {
          const std::string key(it.key());
          const std::string where = jsonPathKey(r.pathOf(name), key);
          if (const std::string why = targetIdProblem(key); !why.empty()) {
            r.error(where, "expected a target ID such as gfx90a:xnack+, found '" + key + "': " + why);
          } else if (!it.value().is_string() || !isSha256Hex(it.value().template get<std::string>())) {
            r.error(where, "expected 64 lowercase hex digits, found " + describeFound(it.value()));
          } else {
            src.targets[key] = it.value().template get<std::string>();
          }
        }
      }
      return;
  }
}

template <class V>
std::optional<KernelSource> parseSource(const V& value, const std::string& file, const std::string& path,
                                        SourceRole role, std::vector<Diagnostic>& diags) {
  BasicObjectReader<V> r(value, file, path, diags);
  if (!r.isObject()) return std::nullopt;
  KernelSource src;
  const auto kind = r.string("kind", true);
  if (!kind) return std::nullopt;
  src.kind = *kind;
  src.fields = writtenAs(value);
  const std::string& k = src.kind;
  if (k == "hsaco_file") {
    // The pre-hsaco shape: one refusal, not unknown code_object_* keys.
    const auto field = [&](std::string_view key) {
      const V* v = r.get(key);
      return v != nullptr && v->is_string() ? "\"" + v->template get<std::string>() + "\"" : std::string("...");
    };
    const std::string file = field("code_object_file");
    const std::string symbol = field("code_object_symbol");
    r.error(r.pathOf("kind"), legacyFormMessage("an 'hsaco_file' source (code_object_file, code_object_symbol)",
                                                "{\"kind\": \"hsaco\", \"file\": " + file + ", \"symbol\": " + symbol +
                                                    "} and name the prebuilt object's arches in the UKD's 'arch'",
                                                true));
    return std::nullopt;
  }
  if (k == "rocke" || k == "rocke_recipe" || k == "rocke_builder") {
    // rocKE kernels were compiled by a tool ukdpack does not run; a builder
    // module calling that compiler is the supported way, and no rule writes it.
    r.error(r.pathOf("kind"), legacyFormMessage("the rocKE kind '" + k + "'",
                                                "a 'builder' source whose module wraps the rocKE compiler "
                                                "(no mechanical rewrite exists)",
                                                false));
    return std::nullopt;
  }
  const SourceKindInfo* info = sourceKind(k);
  if (info == nullptr) {
    std::string quoted;
    std::vector<std::string> names;
    for (const SourceKindInfo& known : sourceKinds()) {
      quoted += (quoted.empty() ? "'" : ", '") + std::string(known.name) + "'";
      names.emplace_back(known.name);
    }
    r.error(r.pathOf("kind"), "expected one of " + quoted + ", found '" + k + "'" + didYouMean(k, names));
    return std::nullopt;
  }
  if (!info->launchable && role != SourceRole::Single) {
    std::vector<std::string> launchable;
    for (const SourceKindInfo& known : sourceKinds())
      if (known.launchable) launchable.push_back(known.name);
    r.error(r.pathOf("kind"),
            "a sources launch cannot be " + k + " (it has no code object); launches are " + listed(launchable));
    return std::nullopt;
  }
  for (const SourceField& field : info->fields) readSourceField(r, *info, field, src);
  if (!info->takes("role") && r.has("role")) {
    r.get("role");
    r.error(r.pathOf("role"), "'role' is a builder-only field; a " + k + " source takes no role");
  }
  r.finish();
  if (r.failed()) return std::nullopt;
  if (*info->fileField != '\0') {
    const auto named = value.find(info->fileField);
    if (named != value.end() && named->is_string()) src.file = named->template get<std::string>();
  }
  return src;
}

}  // namespace

namespace detail {

template <class V>
std::optional<Kernel> parseKernelFrom(const V& ukd, const KernelContext& ctx, std::vector<Diagnostic>& diags) {
  const std::size_t before = diags.size();
  BasicObjectReader<V> r(ukd, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  Kernel k;
  k.file = ctx.file;
  k.jsonPath = ctx.jsonPath;
  k.baseDir = ctx.baseDir;
  k.id = r.string("id", true).value_or("");
  k.name = r.string("name", true).value_or("");
  detail::readSchemaKey(r);
  // Older kernels carried no version: what to write is the version their form
  // needs (a multi-launch kernel's 'sources' came with 1.1), never a made-up 0.0.
  bool versionRead = false;
  if (!r.has("version")) {
    const std::string wantVersion = r.has("sources") ? "\"version\": \"1.1\"" : "\"version\": \"1.0\"";
    r.error(r.path(), ctx.jsonPath != "$" ? legacyFormMessage("an inline UKD without 'version'", wantVersion, true)
                                          : "missing required field 'version'; write " + wantVersion +
                                                " (`ukdpack migrate ROOT --out NEW` adds it)");
  } else if (auto v = r.string("version", true)) {
    if (auto parsed = Version::parse(*v)) {
      k.version = *parsed;
      versionRead = true;
    } else {
      r.error(r.pathOf("version"), "expected a version '<major>.<minor>', found '" + *v + "'");
    }
  }
  if (const V* md = r.object("metadata", true)) k.metadata = built(*md);
  k.priority = r.integer("priority", true).value_or(0);
  if (r.has("arch")) {
    if (auto arch = r.stringList("arch", false)) {
      // Worded only for a refusal; a short list (nearly always one or two) is searched
      // in place, a long one through a set, for the arch listed twice.
      std::set<std::string> seen;
      const bool longList = arch->size() > 8;
      for (std::size_t i = 0; i < arch->size(); ++i) {
        const std::string& a = (*arch)[i];
        const bool twice = longList ? !seen.insert(a).second
                                    : std::find(arch->begin(), arch->begin() + std::ptrdiff_t(i), a) !=
                                          arch->begin() + std::ptrdiff_t(i);
        if (!isArchName(a)) {
          r.error(jsonPathIndex(r.pathOf("arch"), i),
                  "expected a bare arch id such as gfx90a or sm_90, found '" + a + "'");
        } else if (twice) {
          r.error(jsonPathIndex(r.pathOf("arch"), i), "arch '" + a + "' is listed twice");
        }
      }
      k.arch = std::move(*arch);
    }
  }
  if (const V* prov = r.get("provenance")) {
    if (prov->is_object()) {
      k.provenance = built(*prov);
    } else {
      r.error(r.pathOf("provenance"), "expected object, found " + describeFound(*prov));
    }
  }

  const bool hasSingle = r.has("kernel_source");
  const bool hasMulti = r.has("sources");
  if (hasSingle && hasMulti) {
    r.get("kernel_source");
    r.get("sources");
    r.error(r.path(), "a kernel carries exactly one of 'kernel_source' and 'sources', found both");
  } else if (!hasSingle && !hasMulti) {
    r.error(r.path(), "missing required field 'kernel_source' ('sources' for a multi-launch kernel)");
  } else if (hasSingle) {
    if (const V* src = r.get("kernel_source")) {
      if (auto parsed = parseSource(*src, ctx.file, r.pathOf("kernel_source"), SourceRole::Single, diags)) {
        k.source = std::move(*parsed);
      }
    }
  } else if (const V* map = r.object("sources", false)) {
    const std::string mapPath = r.pathOf("sources");
    if (versionRead && k.version < Version{1, 1}) {
      r.error(mapPath, "'sources' needs UKD version 1.1, found version " + k.version.str());
    }
    if (map->size() < 2) {
      r.error(mapPath, "a sources map needs at least two launches, found " + std::to_string(map->size()) +
                           "; a kernel with one launch uses kernel_source");
    }
    std::map<std::string, std::set<std::string>> kinds;  // kind -> launches
    for (auto it = map->begin(); it != map->end(); ++it) {
      const std::string launch(it.key());
      const std::string p = jsonPathKey(mapPath, launch);
      if (!isLaunchName(launch)) {
        r.error(p, "expected a launch name matching [A-Za-z][A-Za-z0-9_]*, found '" + launch + "'");
        continue;
      }
      if (auto parsed = parseSource(it.value(), ctx.file, p, SourceRole::Launch, diags)) {
        kinds[parsed->kind].insert(launch);
        k.sources.emplace(launch, std::move(*parsed));
      }
    }
    if (kinds.size() > 1) {
      std::string found;
      for (const auto& [kind, launches] : kinds) {
        if (!found.empty()) found += ", ";
        found += kind + " " + describeLaunchSet(launches);
      }
      r.error(mapPath, "all launches of a sources map take one kind, found " + found);
    }
  }

  // A prebuilt object runs on the arches it was built for, so its kernel says which.
  const auto isPrebuilt = [](const KernelSource& s) {
    const SourceKindInfo* info = sourceKind(s.kind);
    return info != nullptr && info->producer == SourceProducer::Prebuilt;
  };
  const bool prebuilt = allLaunchSources(k, isPrebuilt) && (!k.sources.empty() || isPrebuilt(k.source));
  if (prebuilt && (!k.arch || k.arch->empty())) {
    r.error(r.pathOf("arch"),
            "an hsaco kernel must name a non-empty arch (the arches its prebuilt objects were "
            "built for)");
  }
  r.finish();
  if (diags.size() != before && hasErrors({diags.begin() + static_cast<std::ptrdiff_t>(before), diags.end()})) {
    return std::nullopt;
  }
  return k;
}

template std::optional<Kernel> parseKernelFrom<Json>(const Json&, const KernelContext&, std::vector<Diagnostic>&);
template std::optional<Kernel> parseKernelFrom<JsonNode>(const JsonNode&, const KernelContext&,
                                                         std::vector<Diagnostic>&);

}  // namespace detail

std::optional<Kernel> parseKernel(const Json& ukd, const KernelContext& ctx, std::vector<Diagnostic>& diags) {
  return detail::parseKernelFrom(ukd, ctx, diags);
}

}  // namespace ukdpack
