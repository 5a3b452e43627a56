// Strict parsers of KDP, UDD, UED, KMD, UMD and UHD. The wording of
// every refusal follows the JSON Schemas under schemas/ (their x-expect /
// x-message texts), so the packer and the runtime read alike.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <regex>
#include <set>
#include <type_traits>
#include <utility>

#include "json/json_tape.hpp"
#include "model/object_reader.hpp"
#include "ukdpack/model/arch.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack {

using detail::BasicObjectReader;
using detail::describeFound;
using detail::JsonNode;
using detail::ObjectReader;

namespace {

// 8-4-4-4-12 hex digits. Hand-written: ids are looked up per kernel, and
// std::regex costs microseconds a match.
bool isUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

// A UUID's comparison form: hex digits in lower case (the rest is digits and dashes).
char lowerHex(char c) { return c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Json builtValue(const Json& value) { return value; }
Json builtValue(const JsonNode& value) { return value.toJson(); }
// A string value's text without a copy.
std::string_view stringOf(const Json& value) { return value.get_ref<const std::string&>(); }
std::string_view stringOf(const JsonNode& value) { return value.str(); }

// id, version, name and the context every file-backed descriptor carries.
// `skipKey` is left out of `raw` (a pack's kernels, which its members hold).
template <class V>
void readCommon(BasicObjectReader<V>& r, const V& doc, const DescriptorContext& ctx, DescriptorInfo& info,
                std::string_view skipKey = {}) {
  info.file = ctx.file;
  info.jsonPath = ctx.jsonPath;
  info.baseDir = ctx.baseDir;
  if (skipKey.empty() || !doc.is_object()) {
    info.raw = builtValue(doc);
  } else {
    info.raw = Json::object();
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (it.key() != skipKey) info.raw.emplace(it.key(), builtValue(it.value()));
    }
  }
  info.id = r.string("id", true).value_or("");
  detail::readSchemaKey(r);
  if (const V* v = r.get("version")) {
    const auto parsed = v->is_string() ? Version::parse(v->template get<std::string>()) : std::nullopt;
    if (parsed) {
      info.version = *parsed;
    } else {
      r.error(r.pathOf("version"), "expected a version '<major>.<minor>', found " + describeFound(*v));
    }
  } else {
    r.error(r.path(), "missing required field 'version'");
  }
}

// A list of bare arch ids, each once (common.schema.json#/$defs/archList).
template <class V>
std::optional<std::vector<std::string>> readArchList(BasicObjectReader<V>& r, std::string_view key, bool required) {
  const V* list = r.array(key, required);
  if (list == nullptr) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  std::set<std::string> seen;
  bool repeated = false;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const V& item = (*list)[i];
    if (!item.is_string() || !isArchName(item.template get<std::string>())) {
      r.error(jsonPathIndex(r.pathOf(key), i),
              "expected a bare arch id such as gfx90a or sm_90, found " + describeFound(item));
      ok = false;
      continue;
    }
    if (!seen.insert(item.template get<std::string>()).second) repeated = true;
    out.push_back(item.template get<std::string>());
  }
  if (repeated) {
    r.error(r.pathOf(key), "expected each arch once, found a repeated arch");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

// A list of non-empty strings; `unique` refuses repeats ("expected unique items").
template <class V>
std::optional<std::vector<std::string>> readStrings(BasicObjectReader<V>& r, std::string_view key, bool required,
                                                    bool nonEmpty, bool unique) {
  const V* list = r.array(key, required);
  if (list == nullptr) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const V& item = (*list)[i];
    const std::string p = jsonPathIndex(r.pathOf(key), i);
    if (!item.is_string()) {
      r.error(p, "expected string, found " + describeFound(item));
      ok = false;
    } else if (nonEmpty && item.template get<std::string>().empty()) {
      r.error(p, "expected a non-empty string, found ''");
      ok = false;
    } else {
      out.push_back(item.template get<std::string>());
    }
  }
  if (unique && ok) {
    std::set<std::string> seen(out.begin(), out.end());
    if (seen.size() != out.size()) {
      r.error(r.pathOf(key), "expected unique items, found a repeated item");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

// A required member that is an id or null; `what` is "UED" or "UDD".
template <class V>
std::optional<std::string> readIdOrNull(BasicObjectReader<V>& r, std::string_view key, const std::string& what) {
  if (!r.has(key)) {
    r.error(r.path(), "missing required field '" + std::string(key) + "'");
    return std::nullopt;
  }
  const V* v = r.get(key);
  if (v->is_null()) return std::nullopt;
  if (!v->is_string() || v->template get<std::string>().empty()) {
    r.error(r.pathOf(key), "expected a " + what + " id or null, found " + describeFound(*v));
    return std::nullopt;
  }
  return v->template get<std::string>();
}

// A slot name ([a-z][a-z0-9_]{0,31}) at `key`, when present: nullopt when absent or
// refused. With `type` ("KDP", "UHD"), a `version` before 1.1 refuses the key itself.
template <class V>
std::optional<std::string> readSlotName(BasicObjectReader<V>& r, std::string_view key, std::string_view type = {},
                                        const Version& version = Version{1, 1}) {
  const V* v = r.get(key);
  if (v == nullptr) return std::nullopt;
  if (!type.empty() && version < Version{1, 1}) {
    r.error(r.pathOf(key),
            "'" + std::string(key) + "' needs " + std::string(type) + " version 1.1, found version " + version.str());
    return std::nullopt;
  }
  if (v->is_string() && isSlotName(stringOf(*v))) return std::string(stringOf(*v));
  r.error(r.pathOf(key), "expected a slot name matching [a-z][a-z0-9_]{0,31}, found " + describeFound(*v));
  return std::nullopt;
}

// A string member that must match `pattern`; `expect` words the refusal.
std::optional<std::string> readPatterned(ObjectReader& r, std::string_view key, bool required,
                                         const std::regex& pattern, const std::string& expect) {
  if (!r.has(key)) {
    if (required) r.error(r.path(), "missing required field '" + std::string(key) + "'");
    return std::nullopt;
  }
  const Json* v = r.get(key);
  if (!v->is_string() || !std::regex_match(v->get_ref<const std::string&>(), pattern)) {
    r.error(r.pathOf(key), "expected " + expect + ", found " + describeFound(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

// A string member from a fixed set (schema `enum`).
std::optional<std::string> readEnum(ObjectReader& r, std::string_view key, bool required,
                                    const std::vector<std::string>& options) {
  if (!r.has(key)) {
    if (required) r.error(r.path(), "missing required field '" + std::string(key) + "'");
    return std::nullopt;
  }
  const Json* v = r.get(key);
  if (v->is_string() && std::find(options.begin(), options.end(), v->get<std::string>()) != options.end()) {
    return v->get<std::string>();
  }
  std::string listed;
  for (const std::string& o : options) listed += (listed.empty() ? "'" : ", '") + o + "'";
  r.error(r.pathOf(key), "expected one of " + listed + ", found " + describeFound(*v) +
                             (v->is_string() ? didYouMean(v->get<std::string>(), options) : std::string()));
  return std::nullopt;
}

// An optional "<major>.<minor>" string (`revision` of a UED, KMD or UMD, and of
// the descriptors a UHD was trained against): upstream writes it so.
std::optional<std::string> readRevision(ObjectReader& r, std::string_view key, bool required = false) {
  // Each half at most nine digits, as upstream's loader reads it (an int32 either way).
  static const std::regex dotted("^[0-9]{1,9}\\.[0-9]{1,9}$");
  return readPatterned(r, key, required, dotted, "a revision '<major>.<minor>'");
}

// An optional free-form object (`provenance`): carried, never interpreted.
void readProvenance(ObjectReader& r, Json* out = nullptr) {
  const Json* prov = r.get("provenance");
  if (prov == nullptr) return;
  if (!prov->is_object()) {
    r.error(r.pathOf("provenance"), "expected object, found " + describeFound(*prov));
  } else if (out != nullptr) {
    *out = *prov;
  }
}

// A string as json.dumps writes it (ensure_ascii): printable ASCII without a
// quote or backslash stands as it is; anything else is left to nlohmann.
void dumpString(std::string& out, const std::string& s) {
  const bool plain =
      std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
  } else {
    out += Json(s).dump(-1, ' ', true);
  }
}

// The canonical spelling of a value (see canonicalMetadataText), appended to `out`.
void appendCanonical(std::string& out, const Json& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      dumpString(out, it.key());
      out += ": ";
      appendCanonical(out, it.value());
      first = false;
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i != 0) out += ", ";
      appendCanonical(out, v[i]);
    }
    out += ']';
  } else if (v.is_string()) {
    dumpString(out, v.get_ref<const std::string&>());
  } else if (v.is_number_unsigned()) {
    out += std::to_string(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    out += std::to_string(v.get<std::int64_t>());
  } else {
    out += v.dump(-1, ' ', true);
  }
}

}  // namespace

std::string canonicalMetadataText(const Json& metadata) {
  std::string out;
  appendCanonical(out, metadata);
  return out;
}

std::string legacyFormMessage(std::string_view what, std::string_view instead, bool rewritable) {
  std::string out = "legacy form: " + std::string(what) + "; write " + std::string(instead) + " instead";
  if (rewritable) out += " (`ukdpack migrate ROOT --out NEW` rewrites it)";
  return out;
}

std::string idKey(std::string_view id) {
  std::string s;
  assignIdKey(s, id);
  return s;
}

void assignIdKey(std::string& key, std::string_view id) {
  key.assign(id);
  if (isUuid(key)) {
    for (char& c : key) c = lowerHex(c);
  }
}

bool sameIdKey(std::string_view id, std::string_view key) {
  if (id.size() != key.size()) return false;
  if (id == key) return true;  // a key is its own key; a UUID's key is lower case already
  if (!isUuid(id)) return false;
  for (std::size_t i = 0; i < id.size(); ++i)
    if (lowerHex(id[i]) != key[i]) return false;
  return true;
}

const Version& VersionLimits::of(std::string_view type) const {
  if (type == "ukd") return ukd;
  if (type == "udd") return udd;
  if (type == "ued") return ued;
  if (type == "kmd") return kmd;
  if (type == "umd") return umd;
  if (type == "uhd") return uhd;
  return kdp;
}

std::string readableVersions(const Version& max) {
  std::string out;
  for (int minor = 0; minor <= max.minor; ++minor) {
    if (!out.empty()) out += ", ";
    out += Version{max.major, minor}.str();
  }
  return out;
}

namespace detail {

template <class V>
VersionCheck checkVersionOf(const V& doc, std::string_view type, const Version& max) {
  VersionCheck check;
  if (!doc.is_object()) return check;  // the parser refuses a non-object
  const auto it = doc.find("version");
  if (it == doc.end()) return check;
  const auto parsed = it->is_string() ? Version::parse(stringOf(*it)) : std::nullopt;
  if (parsed && parsed->major == max.major && parsed->minor <= max.minor) {
    // The common case, once per kernel: nothing to word.
    check.version = *parsed;
    check.gate = VersionGate::Read;
    return check;
  }
  const std::string T = upper(type);
  check.refusal =
      "expected a " + T + " version this ukdpack reads (" + readableVersions(max) + "), found " + describeFound(*it);
  if (!parsed) {
    check.gate = VersionGate::Malformed;
    check.message = check.refusal;
    return check;
  }
  check.version = *parsed;
  check.gate = VersionGate::Skip;
  check.message = T + " version " + parsed->str() +
                  (parsed->major == max.major ? " is newer than this build reads ("
                                              : " is another major version than this build reads (") +
                  T + " " + readableVersions(max) + ")";
  return check;
}

template VersionCheck checkVersionOf<Json>(const Json&, std::string_view, const Version&);
template VersionCheck checkVersionOf<JsonNode>(const JsonNode&, std::string_view, const Version&);

}  // namespace detail

VersionCheck checkVersion(const Json& doc, std::string_view type, const Version& max) {
  return detail::checkVersionOf(doc, type, max);
}

const std::vector<std::string>& heuristicRoles() {
  static const std::vector<std::string> roles{"sort_kernel_catalog", "predict_engine", "predict_applicable_kernels"};
  return roles;
}

const std::vector<std::string>& slotHeuristicRoles() {
  static const std::vector<std::string> roles{"sort_kernel_catalog", "predict_applicable_kernels"};
  return roles;
}

bool isSlotName(std::string_view name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

std::vector<std::string> EngineSlot::knobIds() const {
  std::vector<std::string> out;
  out.reserve(knobs.size());
  for (const std::string& k : knobs) out.push_back(name + "." + k);
  return out;
}

const EngineSlot* Engine::slot(std::string_view name) const {
  for (const EngineSlot& s : slots)
    if (s.name == name) return &s;
  return nullptr;
}

std::optional<std::size_t> Engine::slotIndex(std::string_view name) const {
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (slots[i].name == name) return i;
  return std::nullopt;
}

const MetadataField* MetadataSchema::field(const std::string& name) const {
  for (const MetadataField& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

// --------------------------------------------------------------------------- KDP

namespace {

// A member's `raw`: the element itself (moved out of a consumed DOM, copied
// from a kept one), or a view of a tape's text.
void keepRaw(PackMember& m, const Json& item, Json* consume, std::size_t i) {
  // Moved last: nothing reads this element again (finish() looks at keys only).
  m.setRaw(consume != nullptr ? std::move((*consume)["kernelDescriptors"][i]) : item);
}
void keepRaw(PackMember& m, const JsonNode& item, Json*, std::size_t) { m.setRaw(detail::textOf(item)); }

}  // namespace

namespace detail {

// `consume` (the loader's document, never read again): kernel objects move
// into their members instead of being copied.
template <class V>
std::optional<Pack> parsePackFrom(const V& kdp, Json* consume, const DescriptorContext& ctx,
                                  std::vector<Diagnostic>& diags, const Version& maxUkd, bool refuseNewer,
                                  const InlineKernelReader* inlineKernels) {
  BasicObjectReader<V> r(kdp, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  Pack p;
  readCommon(r, kdp, ctx, p, "kernelDescriptors");
  p.name = r.string("name", true).value_or("");
  if (r.has("arch")) {
    p.arch = readArchList(r, "arch", true).value_or(std::vector<std::string>{});
  } else {
    // Older packers left `arch` out for "every arch"; say so once, not as a bare missing field.
    r.error(r.path(), legacyFormMessage("a KDP without 'arch'", "\"arch\": [] (every arch)", true));
  }
  p.matchers = readStrings(r, "matchers", true, true, false).value_or(std::vector<std::string>{});
  p.engine = readIdOrNull(r, "engine", "UED");
  p.dispatch = readIdOrNull(r, "dispatch", "UDD");
  p.slot = readSlotName(r, "slot", "KDP", p.version);
  if (const V* prov = r.get("provenance")) {
    if (prov->is_object()) {
      p.provenance = builtValue(*prov);
    } else {
      r.error(r.pathOf("provenance"), "expected object, found " + describeFound(*prov));
    }
  }
  // The pack's own fields decide whether it loads; a bad kernelDescriptors
  // element only leaves that kernel out, so its errors do not fail the pack.
  if (const V* list = r.array("kernelDescriptors", true)) {
    const std::string listPath = r.pathOf("kernelDescriptors");
    if (list->empty()) {
      r.error(listPath, "expected at least one kernel, found an empty list");
    }
    p.members.reserve(list->size());
    // One context for every inline kernel, only its path changed: copying the
    // file and folder per kernel cost three allocations each.
    KernelContext kernelCtx{ctx.file, "", ctx.baseDir};
    for (std::size_t i = 0; i < list->size(); ++i) {
      const V& item = (*list)[i];
      if (inlineKernels != nullptr && item.is_object()) {
        std::size_t offset = std::string::npos;
        if constexpr (std::is_same_v<V, JsonNode>) offset = item.begin_offset();
        (*inlineKernels)(i, offset, p.members);
        continue;
      }
      const std::string path = jsonPathIndex(listPath, i);
      if (item.is_string()) {
        if (item.template get<std::string>().empty()) {
          diags.push_back(makeError(codes::SCHEMA, ctx.file, path, "expected a non-empty string, found ''"));
          continue;
        }
        p.refs.push_back(KernelRef{i, item.template get<std::string>(), path});
        continue;
      }
      if (!item.is_object()) {
        diags.push_back(makeError(codes::SCHEMA, ctx.file, path,
                                  "expected an inline UKD object or the id string of a standalone "
                                  "UKD, found " +
                                      describeFound(item)));
        continue;
      }
      const VersionCheck vc = checkVersionOf(item, "ukd", maxUkd);
      if (vc.gate == VersionGate::Skip && refuseNewer) {
        diags.push_back(makeError(codes::SCHEMA, ctx.file, jsonPathKey(path, "version"), vc.refusal));
        continue;
      }
      if (vc.gate == VersionGate::Skip) {
        const auto name = item.find("name");
        const auto id = item.find("id");
        const bool named = name != item.end() && name->is_string();
        const std::string label = !named ? std::string("this kernel")
                                  : id != item.end() && id->is_string()
                                      ? kernelLabel(name->template get<std::string>(), id->template get<std::string>())
                                      : "kernel '" + name->template get<std::string>() + "'";
        diags.push_back(makeWarning(codes::VERSION_SKIPPED, ctx.file, path, "skipping " + label + ": " + vc.message));
        continue;
      }
      if (vc.gate == VersionGate::Malformed) {
        diags.push_back(makeError(codes::SCHEMA, ctx.file, jsonPathKey(path, "version"), vc.message));
        continue;
      }
      kernelCtx.jsonPath = path;
      if (auto k = parseKernelFrom(item, kernelCtx, diags)) {
        PackMember m;
        m.index = i;
        m.setKernel(std::move(*k));
        keepRaw(m, item, consume, i);
        p.members.push_back(std::move(m));
      }
    }
  }
  r.finish();
  if (r.failed()) return std::nullopt;
  return p;
}

template std::optional<Pack> parsePackFrom<Json>(const Json&, Json*, const DescriptorContext&, std::vector<Diagnostic>&,
                                                 const Version&, bool, const InlineKernelReader*);
template std::optional<Pack> parsePackFrom<JsonNode>(const JsonNode&, Json*, const DescriptorContext&,
                                                     std::vector<Diagnostic>&, const Version&, bool,
                                                     const InlineKernelReader*);

}  // namespace detail

std::optional<Pack> parsePack(const Json& kdp, const DescriptorContext& ctx, std::vector<Diagnostic>& diags,
                              const Version& maxUkd, bool refuseNewer) {
  return detail::parsePackFrom(kdp, nullptr, ctx, diags, maxUkd, refuseNewer);
}

std::optional<Pack> parsePack(Json&& kdp, const DescriptorContext& ctx, std::vector<Diagnostic>& diags,
                              const Version& maxUkd, bool refuseNewer) {
  return detail::parsePackFrom(kdp, &kdp, ctx, diags, maxUkd, refuseNewer);
}

// --------------------------------------------------------------------------- UDD

std::optional<Dispatch> parseDispatch(const Json& udd, const DescriptorContext& ctx, std::vector<Diagnostic>& diags) {
  ObjectReader r(udd, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  Dispatch d;
  readCommon(r, udd, ctx, d);
  d.name = r.string("name", true).value_or("");
  d.dispatchSymbol = r.string("dispatch_symbol", true).value_or("");
  if (r.has("launches")) {
    const Json* v = r.get("launches");
    const std::string path = r.pathOf("launches");
    if (d.version < Version{1, 1}) {
      r.error(path, "'launches' needs UDD version 1.1, found version " + d.version.str());
    } else if (!v->is_array()) {
      r.error(path, "expected array, found " + describeFound(*v));
    } else {
      std::vector<std::string> names;
      bool ok = true;
      for (std::size_t i = 0; i < v->size(); ++i) {
        const Json& item = (*v)[i];
        if (!item.is_string() || !isLaunchName(item.get<std::string>())) {
          r.error(jsonPathIndex(path, i),
                  "expected a launch name matching [A-Za-z][A-Za-z0-9_]*, found " + describeFound(item));
          ok = false;
          continue;
        }
        names.push_back(item.get<std::string>());
      }
      if (v->size() < 2) {
        r.error(path, "a handler that declares launches runs at least two, found " + std::to_string(v->size()));
        ok = false;
      }
      if (std::set<std::string>(names.begin(), names.end()).size() != names.size()) {
        r.error(path, "expected each launch name once, found a repeated name");
        ok = false;
      }
      if (ok) d.launches = std::move(names);
    }
  }
  r.finish();
  if (r.failed()) return std::nullopt;
  return d;
}

// --------------------------------------------------------------------------- UED

namespace {

// A role map: arch (or "default") -> UHD ids. sort_kernel_catalog and
// predict_engine take one id or a non-empty list of distinct ids (one per
// metric); predict_applicable_kernels takes exactly one id.
void readRoleMap(ObjectReader& r, const std::string& role, std::map<std::string, HeuristicRoleMap>& heuristics,
                 std::map<std::string, std::string>& heuristicPaths) {
  const Json* map = r.object(role, false);
  if (map == nullptr) return;
  const std::string rolePath = r.pathOf(role);
  if (map->empty()) {
    r.error(rolePath, "expected at least 1 entries, found 0");
    return;
  }
  const bool single = role == "predict_applicable_kernels";
  HeuristicRoleMap out;
  for (auto it = map->begin(); it != map->end(); ++it) {
    const std::string& arch = it.key();
    const std::string p = jsonPathKey(rolePath, arch);
    if (arch != "default" && !isArchName(arch)) {
      r.error(p, "expected an arch id or 'default', found '" + arch + "'");
      continue;
    }
    const Json& v = it.value();
    std::vector<std::string> ids;
    bool ok = true;
    if (v.is_string() && !v.get<std::string>().empty()) {
      ids.push_back(v.get<std::string>());
    } else if (!single && v.is_array() && !v.empty()) {
      for (const Json& item : v) {
        if (!item.is_string() || item.get<std::string>().empty())
          ok = false;
        else
          ids.push_back(item.get<std::string>());
      }
    } else {
      ok = false;
    }
    if (!ok) {
      r.error(p, single
                     ? "expected one UHD id, found " + describeFound(v)
                     : "expected a UHD id or a non-empty list of UHD ids (one per metric), found " + describeFound(v));
      continue;
    }
    if (std::set<std::string>(ids.begin(), ids.end()).size() != ids.size()) {
      r.error(p, "expected each UHD id once, found a repeated id");
      continue;
    }
    out[arch] = std::move(ids);
    heuristicPaths[role + "/" + arch] = p;
  }
  heuristics[role] = std::move(out);
}

// UED 1.1 `slots`: a non-empty ordered list of {name, knobs?, sort_kernel_catalog?,
// predict_applicable_kernels?}, names unique. False when refused.
bool readSlots(ObjectReader& r, Engine& e) {
  const Json* list = r.array("slots", true);
  if (list == nullptr) return false;
  const std::string listPath = r.pathOf("slots");
  if (e.version < Version{1, 1}) {
    r.error(listPath, "'slots' needs UED version 1.1, found version " + e.version.str());
    return false;
  }
  if (list->empty()) {
    r.error(listPath, "expected at least one slot, found an empty list (an engine without slots leaves 'slots' out)");
    return false;
  }
  bool ok = true;
  std::map<std::string, std::string> seen;  // name -> path of its first slot
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string path = jsonPathIndex(listPath, i);
    ObjectReader s((*list)[i], r.file(), path, r.diags());
    if (!s.isObject()) {
      ok = false;
      continue;
    }
    EngineSlot slot;
    slot.jsonPath = path;
    slot.raw = (*list)[i];
    if (!s.has("name")) s.error(path, "missing required field 'name'");
    slot.name = readSlotName(s, "name").value_or("");
    slot.knobs = readStrings(s, "knobs", false, true, true).value_or(std::vector<std::string>{});
    for (const std::string& role : slotHeuristicRoles()) readRoleMap(s, role, slot.heuristics, slot.heuristicPaths);
    if (s.has("predict_engine")) {
      s.get("predict_engine");
      s.error(s.pathOf("predict_engine"),
              "predict_engine ranks engines, not a slot's kernels: expected it at the engine's top level");
    }
    readProvenance(s);
    s.finish();
    if (s.failed()) {
      ok = false;
      continue;
    }
    const auto [it, fresh] = seen.emplace(slot.name, path);
    if (!fresh) {
      r.error(jsonPathKey(path, "name"), "slot '" + slot.name + "' is named twice (first at " + it->second +
                                             "); slot names are unique in an engine");
      ok = false;
      continue;
    }
    e.slots.push_back(std::move(slot));
  }
  if (!ok) e.slots.clear();
  return ok;
}

}  // namespace

namespace {

// Whether `text` reads as an SDK version the way upstream's Version does: three
// integers (each may carry a sign and fit 32 bits) split by '.', whitespace allowed
// before each integer and dot, anything after the patch ignored.
bool sdkVersionFits(const std::string& text) {
  static const std::regex shape("^\\s*([+-]?[0-9]+)\\s*\\.\\s*([+-]?[0-9]+)\\s*\\.\\s*([+-]?[0-9]+)");
  std::smatch m;
  if (!std::regex_search(text, m, shape)) return false;
  for (std::size_t i = 1; i <= 3; ++i) {
    std::string part = m[i].str();
    const bool negative = part.front() == '-';
    if (part.front() == '+' || part.front() == '-') part.erase(0, 1);
    part.erase(0, std::min(part.find_first_not_of('0'), part.size() - 1));  // leading zeros
    if (part.size() > 10) return false;
    const long long n = std::stoll(part);
    if (negative ? n > 2147483648LL : n > 2147483647LL) return false;
  }
  return true;
}

}  // namespace

// The behavior notes an engine may declare: a closed vocabulary, because the
// runtime acts on them (today: an engine that compiles kernels at run time).
const std::vector<std::string>& behaviorNoteVocabulary() {
  static const std::vector<std::string> notes{"runtime_compilation"};
  return notes;
}

std::optional<Engine> parseEngine(const Json& ued, const DescriptorContext& ctx, std::vector<Diagnostic>& diags) {
  ObjectReader r(ued, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  Engine e;
  readCommon(r, ued, ctx, e);
  static const std::regex scoped("^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$");
  e.name = readPatterned(r, "name", true, scoped, "a scoped engine name 'namespace:local'").value_or("");
  e.metadata = r.string("metadata", true).value_or("");
  e.revision = readRevision(r, "revision");
  if (const Json* v = r.get("sdk_version")) {
    if (v->is_string() && sdkVersionFits(v->get_ref<const std::string&>())) {
      e.sdkVersion = v->get<std::string>();
    } else {
      r.error(r.pathOf("sdk_version"), "expected a version 'MAJOR.MINOR.PATCH', found " + describeFound(*v));
    }
  }
  readProvenance(r);
  bool ok = true;
  if (const Json* gm = r.object("graph_match", false)) {
    ObjectReader g(*gm, r.file(), r.pathOf("graph_match"), r.diags());
    e.graphMatchSymbol = g.string("native", true);
    readProvenance(g);
    g.finish();
    ok = !g.failed();
  }
  // Slots written on a UED 1.0 are refused by readSlots; the engine-level forms then read as before.
  const bool slottedShape = r.has("slots") && !(e.version < Version{1, 1});
  if (r.has("slots")) ok = readSlots(r, e) && ok;
  if (slottedShape) {
    // A slotted engine ranks, filters and tunes per slot: engine-wide forms would be ambiguous.
    for (const char* key : {"knobs", "sort_kernel_catalog", "predict_applicable_kernels"}) {
      if (!r.has(key)) continue;
      r.get(key);
      r.error(r.pathOf(key), std::string("a slotted engine has no engine-level '") + key +
                                 "': move it into each slot of $.slots (knob ids are then '<slot>.<field>')");
      ok = false;
    }
  }
  if (!slottedShape) e.knobs = readStrings(r, "knobs", false, true, true).value_or(std::vector<std::string>{});
  if (const Json* notes = r.array("behavior_notes", false)) {
    const std::vector<std::string>& vocabulary = behaviorNoteVocabulary();
    std::string listed;
    for (const std::string& n : vocabulary) listed += (listed.empty() ? "'" : ", '") + n + "'";
    for (std::size_t i = 0; i < notes->size(); ++i) {
      const Json& item = (*notes)[i];
      if (item.is_string() &&
          std::find(vocabulary.begin(), vocabulary.end(), item.get<std::string>()) != vocabulary.end()) {
        if (std::find(e.behaviorNotes.begin(), e.behaviorNotes.end(), item.get<std::string>()) !=
            e.behaviorNotes.end()) {
          r.error(jsonPathIndex(r.pathOf("behavior_notes"), i),
                  "expected each note once, found '" + item.get<std::string>() + "' again");
          continue;
        }
        e.behaviorNotes.push_back(item.get<std::string>());
        continue;
      }
      r.error(jsonPathIndex(r.pathOf("behavior_notes"), i),
              "expected one of " + listed + ", found " + describeFound(item));
    }
  }
  e.numericalNotes = readStrings(r, "numerical_notes", false, false, true).value_or(std::vector<std::string>{});
  for (const std::string& role : heuristicRoles()) {
    if (!r.has(role) || (slottedShape && role != "predict_engine")) continue;
    readRoleMap(r, role, e.heuristics, e.heuristicPaths);
  }
  if (const Json* legacy = r.get("heuristic")) {
    const std::string id = legacy->is_string() ? legacy->get<std::string>() : std::string("X");
    r.error(r.pathOf("heuristic"),
            legacyFormMessage("a UED 'heuristic'", "\"sort_kernel_catalog\": {\"default\": \"" + id + "\"}", true));
  }
  r.finish();
  if (r.failed() || !ok) return std::nullopt;
  return e;
}

// --------------------------------------------------------------------------- KMD

std::optional<MetadataSchema> parseMetadataSchema(const Json& kmd, const DescriptorContext& ctx,
                                                  std::vector<Diagnostic>& diags) {
  ObjectReader r(kmd, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  MetadataSchema m;
  readCommon(r, kmd, ctx, m);
  m.name = r.string("name", true).value_or("");
  m.revision = readRevision(r, "revision");
  bool ok = true;
  if (const Json* list = r.array("fields", true)) {
    std::set<std::string> seen;
    static const std::regex fieldName("^[A-Za-z_][A-Za-z0-9_]*$");
    static const std::vector<std::string> types{"bool", "int", "float", "string", "int_list"};
    for (std::size_t i = 0; i < list->size(); ++i) {
      ObjectReader f((*list)[i], r.file(), jsonPathIndex(r.pathOf("fields"), i), r.diags());
      if (!f.isObject()) {
        ok = false;
        continue;
      }
      MetadataField field;
      field.name =
          readPatterned(f, "name", true, fieldName, "a field name matching [A-Za-z_][A-Za-z0-9_]*").value_or("");
      field.type = readEnum(f, "type", true, types).value_or("");
      if (const Json* dv = f.get("default_value")) {
        const std::string p = f.pathOf("default_value");
        const std::string& t = field.type;
        auto refuse = [&](const std::string& path, const std::string& want, const Json& found) {
          f.error(path, "expected " + want + ", found " + describeFound(found));
        };
        if (t == "bool" && !dv->is_boolean()) refuse(p, "boolean", *dv);
        if (t == "int" && !dv->is_number_integer()) refuse(p, "integer", *dv);
        if (t == "float" && !dv->is_number()) refuse(p, "number", *dv);
        if (t == "string" && !dv->is_string()) refuse(p, "string", *dv);
        if (t == "int_list") {
          if (!dv->is_array()) {
            refuse(p, "array", *dv);
          } else {
            for (std::size_t j = 0; j < dv->size(); ++j)
              if (!(*dv)[j].is_number_integer()) refuse(jsonPathIndex(p, j), "integer", (*dv)[j]);
          }
        }
        field.defaultValue = *dv;
      }
      if (const Json* d = f.get("description"); d != nullptr && !d->is_string()) {
        f.error(f.pathOf("description"), "expected string, found " + describeFound(*d));
      }
      f.finish();
      if (f.failed()) {
        ok = false;
        continue;
      }
      if (!seen.insert(field.name).second) {
        r.error(jsonPathKey(f.path(), "name"), "field '" + field.name + "' is defined twice");
        continue;
      }
      m.fields.push_back(std::move(field));
    }
  }
  r.finish();
  if (r.failed() || !ok) return std::nullopt;
  return m;
}

// --------------------------------------------------------------------------- UMD

std::optional<MatcherDescriptor> parseMatcher(const Json& umd, const DescriptorContext& ctx,
                                              std::vector<Diagnostic>& diags) {
  ObjectReader r(umd, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  MatcherDescriptor m;
  readCommon(r, umd, ctx, m);
  m.name = r.string("name", true).value_or("");
  m.scope = readEnum(r, "scope", true, {"graph", "kernel"}).value_or("");
  m.revision = readRevision(r, "revision");
  m.matchSymbol = r.string("match_symbol", true).value_or("");
  r.finish();
  if (r.failed()) return std::nullopt;
  return m;
}

// --------------------------------------------------------------------------- UHD

namespace {

// `{id, revision}` of a descriptor a UHD was trained against; false when refused.
bool readTrainedRef(const Json& value, ObjectReader& parent, const std::string& path, const std::string& type,
                    std::vector<HeuristicDescriptor::TrainedRef>& out) {
  ObjectReader t(value, parent.file(), path, parent.diags());
  if (!t.isObject()) return false;
  const auto id = t.string("id", true);
  const auto revision = readRevision(t, "revision", true);
  std::optional<std::string> slot;
  if (type == "ued") {
    // UHD 1.1: the slot of that engine the model was trained for.
    slot = readSlotName(t, "slot");
  }
  t.finish();
  if (t.failed()) return false;
  out.push_back(HeuristicDescriptor::TrainedRef{type, *id, *revision, t.pathOf("revision"), slot});
  return true;
}

// `trained_against`: what a data-driven UHD was fitted to. It names the
// descriptor set (ued, kmd and umd, all three) or the provider build measured
// (selector_revision), or both, and may add feature_semantics_revision.
// False when refused (the child readers' errors are already in the diagnostics).
bool readTrainedAgainst(ObjectReader& r, std::vector<HeuristicDescriptor::TrainedRef>& out) {
  const Json* ta = r.object("trained_against", false);
  if (ta == nullptr) return true;
  ObjectReader t(*ta, r.file(), r.pathOf("trained_against"), r.diags());
  bool ok = true;
  const bool namesSet = t.has("ued") || t.has("kmd") || t.has("umd");
  if (!namesSet && !t.has("selector_revision")) {
    t.error(t.path(),
            "expected a descriptor set ('ued', 'kmd' and 'umd') or a 'selector_revision', found " + describeFound(*ta));
    ok = false;
  }
  if (namesSet) {
    // All three or none: two thirds of a descriptor set is a claim nothing can check.
    for (const char* key : {"ued", "kmd"}) {
      if (!t.has(key)) {
        t.error(t.path(),
                std::string("missing required field '") + key + "' (a descriptor set names 'ued', 'kmd' and 'umd')");
      } else {
        ok = readTrainedRef(*t.get(key), t, t.pathOf(key), key, out) && ok;
      }
    }
    if (!t.has("umd")) {
      t.error(t.path(), "missing required field 'umd' (a descriptor set names 'ued', 'kmd' and 'umd')");
    } else if (const Json* umd = t.array("umd", true)) {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < umd->size(); ++i) {
        const std::string p = jsonPathIndex(t.pathOf("umd"), i);
        if (!readTrainedRef((*umd)[i], t, p, "umd", out)) {
          ok = false;
        } else if (!seen.insert(idKey(out.back().id)).second) {
          t.error(p, "expected each UMD once, found '" + out.back().id + "' again");
          out.pop_back();
        }
      }
    }
  }
  t.string("selector_revision", false);
  if (const Json* fs = t.get("feature_semantics_revision")) {
    if (!fs->is_number_integer() || fs->get<std::int64_t>() < 1) {
      t.error(t.pathOf("feature_semantics_revision"), "expected an integer >= 1, found " + describeFound(*fs));
    }
  }
  t.finish();
  return ok && !t.failed();
}

// The transforms a score may name: a consumer inverts the transform to get the
// metric's units back, so the vocabulary is closed (upstream's ScoreTransform).
const std::vector<std::string>& scoreTransforms() {
  static const std::vector<std::string> names{"identity", "log1p", "log", "exp", "sqrt"};
  return names;
}

// `score`: what the model predicts. A throughput (tflops) is maximised, a time
// minimised; `objective` must say the same. The metric is optional, but a
// calibrated score (comparable across engines) names one.
// Sets `ok` false when refused.
std::optional<std::string> readScore(ObjectReader& r, bool& ok) {
  const Json* score = r.object("score", false);
  if (score == nullptr) return std::nullopt;
  ObjectReader s(*score, r.file(), r.pathOf("score"), r.diags());
  auto metric = readEnum(s, "metric", false, {"tflops", "time"});
  if (const Json* c = s.get("calibrated"); c != nullptr && !c->is_boolean()) {
    s.error(s.pathOf("calibrated"), "expected boolean, found " + describeFound(*c));
  } else if (c != nullptr && c->get<bool>() && !s.has("metric")) {
    s.error(s.pathOf("calibrated"),
            "a calibrated score is comparable across engines only in a named quantity: expected "
            "'metric' ('tflops' or 'time') beside \"calibrated\": true");
  }
  readEnum(s, "transform", false, scoreTransforms());
  s.finish();
  if (s.failed()) ok = false;
  return metric;
}

// `features_signature`: what the model reads, each entry a `$name` reference
// or a single-key expression object, each once.
void readFeaturesSignature(ObjectReader& r, bool required) {
  const Json* list = r.array("features_signature", required);
  if (list == nullptr) return;
  const std::string path = r.pathOf("features_signature");
  if (list->empty()) {
    r.error(path, "expected at least 1 entries, found 0");
    return;
  }
  std::set<std::string> seen;
  bool repeated = false;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    const bool reference = item.is_string() && item.get_ref<const std::string&>().size() > 1 &&
                           item.get_ref<const std::string&>().front() == '$';
    if (!reference && !(item.is_object() && item.size() == 1)) {
      const bool bare = item.is_string() && !item.get_ref<const std::string&>().empty() &&
                        item.get_ref<const std::string&>().front() != '$';
      r.error(jsonPathIndex(path, i), "expected a '$name' feature reference or a single-key expression object, found " +
                                          describeFound(item) +
                                          (bare ? " (write '$" + item.get<std::string>() + "')" : std::string()));
      continue;
    }
    if (!seen.insert(item.dump()).second) repeated = true;
  }
  if (repeated) r.error(path, "expected unique items, found a repeated item");
}

// `categorical_encoding`: `$name` -> {category: int32 code}, each vocabulary non-empty.
void readCategoricalEncoding(ObjectReader& r) {
  const Json* enc = r.object("categorical_encoding", false);
  if (enc == nullptr) return;
  const std::string encPath = r.pathOf("categorical_encoding");
  for (auto f = enc->begin(); f != enc->end(); ++f) {
    const std::string fp = jsonPathKey(encPath, f.key());
    if (f.key().empty() || f.key().front() != '$') {
      r.error(fp, "expected a '$name' feature reference as key, found '" + f.key() + "'" +
                      (f.key().empty() ? std::string() : " (write '$" + f.key() + "')"));
      continue;
    }
    if (!f->is_object()) {
      r.error(fp, "expected an object of category -> integer, found " + describeFound(*f));
      continue;
    }
    if (f->empty()) {
      r.error(fp, "expected at least 1 category, found 0");
      continue;
    }
    for (auto c = f->begin(); c != f->end(); ++c) {
      const bool fits =
          c->is_number_integer() && c->get<std::int64_t>() >= INT32_MIN && c->get<std::int64_t>() <= INT32_MAX;
      if (!fits) {
        r.error(jsonPathKey(fp, c.key()),
                std::string(c->is_number_integer() ? "expected an integer within 32 bits" : "expected integer") +
                    ", found " + describeFound(*c));
      }
    }
  }
}

}  // namespace

std::optional<std::string> statedSha256(std::string_view hash) {
  std::string_view hex = hash;
  if (hex.size() == 71 && hex.substr(0, 7) == "sha256:") hex.remove_prefix(7);
  if (hex.size() != 64) return std::nullopt;
  std::string out;
  out.reserve(64);
  for (const char c : hex) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'))) return std::nullopt;
    out += l;
  }
  return out;
}

std::optional<HeuristicDescriptor> parseHeuristic(const Json& uhd, const DescriptorContext& ctx,
                                                  std::vector<Diagnostic>& diags) {
  ObjectReader r(uhd, ctx.file, ctx.jsonPath, diags);
  if (!r.isObject()) return std::nullopt;
  HeuristicDescriptor h;
  readCommon(r, uhd, ctx, h);
  h.name = r.string("name", true).value_or("");
  readProvenance(r);
  h.slot = readSlotName(r, "slot", "UHD", h.version);
  if (!r.has("adapter") && (r.has("kind") || r.has("payload"))) {
    // The pre-adapter shape: one refusal instead of unknown 'kind'/'payload'
    // and a missing adapter, body and objective.
    r.get("kind");
    const Json* payload = r.get("payload");
    const std::string symbol = payload != nullptr && payload->is_string() ? payload->get<std::string>() : "S";
    r.error(r.path(),
            legacyFormMessage(
                "a UHD with 'kind'/'payload'",
                "\"adapter\": \"native\", \"native\": {\"symbol\": \"" + symbol + "\"}, \"objective\": \"max\"", true));
    r.finish();
    return std::nullopt;
  }
  static const std::vector<std::string> adapters{"native", "static_order", "tree_data", "table", "custom_library"};
  h.adapter = readEnum(r, "adapter", true, adapters).value_or("");
  const bool ordered = h.adapter == "static_order";
  const bool trained = h.adapter == "tree_data" || h.adapter == "table";
  // static_order ranks by kernel priority: nothing to maximise or minimise.
  const bool needsObjective = !ordered && !h.adapter.empty();
  if (needsObjective && !r.has("objective")) {
    // Upstream's earlier UHDs carried none; a score of time is minimised, else maximised.
    const Json* score = r.has("score") ? &uhd.at("score") : nullptr;
    const bool time = score != nullptr && score->is_object() && score->value("metric", Json()) == "time";
    r.error(r.path(), legacyFormMessage("a UHD without 'objective' (adapter '" + h.adapter + "')",
                                        time ? "\"objective\": \"min\"" : "\"objective\": \"max\"", true));
  }
  h.objective = readEnum(r, "objective", false, {"max", "min"});
  bool partsOk = true;
  h.metric = readScore(r, partsOk);
  if (h.metric && h.objective) {
    const std::string want = *h.metric == "tflops" ? "max" : "min";
    if (*h.objective != want) {
      r.error(r.pathOf("objective"), "a score of metric '" + *h.metric + "' is " +
                                         (want == "max" ? "maximised" : "minimised") + ": expected objective '" + want +
                                         "', found '" + *h.objective + "'");
    }
  } else if (h.metric && ordered && !r.has("objective")) {
    const std::string want = *h.metric == "tflops" ? "max" : "min";
    r.error(r.path(),
            "missing required field 'objective': a score of metric '" + *h.metric + "' needs objective '" + want + "'");
  }
  readFeaturesSignature(r, trained);
  // A model reading features states which (features_hash) and what it was trained on.
  const bool reads = trained || r.has("features_signature");
  static const std::regex featuresHash("^sha256:[0-9a-f]{16}$");
  readPatterned(r, "features_hash", reads, featuresHash, "'sha256:' and 16 lowercase hex digits");
  if (reads && !r.has("trained_against")) {
    r.error(r.path(), "missing required field 'trained_against' (" +
                          (trained ? "adapter '" + h.adapter + "' is trained on data"
                                   : std::string("a UHD with a features_signature was trained on data")) +
                          ")");
  }
  partsOk = readTrainedAgainst(r, h.trainedAgainst) && partsOk;
  for (const HeuristicDescriptor::TrainedRef& ref : h.trainedAgainst) {
    if (!ref.slot) continue;
    const std::string path = ref.path.substr(0, ref.path.rfind('.')) + ".slot";
    if (h.version < Version{1, 1}) {
      r.error(path, "'slot' needs UHD version 1.1, found version " + h.version.str());
    } else if (h.slot != ref.slot) {
      r.error(path, "trained_against names slot '" + *ref.slot + "' of its engine, but the UHD " +
                        (h.slot ? "declares slot '" + *h.slot + "'" : std::string("declares no slot")) +
                        ": expected \"slot\": \"" + *ref.slot + "\" at the top level, the same as trained_against's");
      partsOk = false;
    }
  }
  readCategoricalEncoding(r);
  // Every body present is checked for shape; only the adapter's one is used.
  bool bodiesOk = true;
  for (const std::string& name : adapters) {
    const Json* body = r.object(name, false);
    if (body == nullptr) continue;
    ObjectReader b(*body, r.file(), r.pathOf(name), r.diags());
    std::optional<std::string> symbol, artifact, library, hash;
    if (name == "native") {
      symbol = b.string("symbol", true);
    } else if (name == "static_order") {
      if (b.get("order") != nullptr) {
        // Upstream ranks a static order by kernel priority; a list here would be ignored there.
        b.error(b.pathOf("order"),
                "static_order takes no 'order' (upstream does not support one; kernels are "
                "tried in priority order): write \"static_order\": {}");
      }
    } else if (name == "tree_data" || name == "table") {
      artifact = b.string("artifact", true);
      hash = b.string("hash", false);
    } else {
      library = b.string("library", true);
      symbol = b.string("symbol", true);
      hash = b.string("hash", false);
      // The runtime supports no library configuration: only an empty one loads.
      if (const Json* config = b.object("config", false); config != nullptr && !config->empty()) {
        b.error(b.pathOf("config"),
                "expected an empty object (custom_library takes no configuration), found " + describeFound(*config));
      }
    }
    b.finish();
    if (b.failed()) {
      bodiesOk = false;
      continue;
    }
    if (name == h.adapter) {
      h.body = *body;
      h.symbol = symbol;
      h.artifact = artifact;
      h.library = library;
      h.hash = hash;
    } else if (!h.adapter.empty()) {
      r.error(r.pathOf(name),
              "adapter '" + h.adapter + "' takes exactly one body, '" + h.adapter + "', found '" + name + "' too");
    }
  }
  if (!h.adapter.empty() && !r.has(h.adapter)) {
    r.error(r.path(), "missing required field '" + h.adapter + "' (the body of adapter '" + h.adapter + "')");
  }
  r.finish();
  if (r.failed() || !bodiesOk || !partsOk) return std::nullopt;
  return h;
}

// --------------------------------------------------------------------------- metadata

std::optional<Json> completeMetadata(const MetadataSchema& kmd, const Kernel& kernel, std::vector<Diagnostic>& diags) {
  // The path and the list of known fields are worded only for a refusal: most kernels have none.
  const auto mdPath = [&] { return jsonPathKey(kernel.jsonPath, "metadata"); };
  bool ok = true;
  auto error = [&](const std::string& path, const std::string& message) {
    diags.push_back(makeError(codes::METADATA, kernel.file, path, message));
    ok = false;
  };
  const auto known = [&] {
    std::string out;
    std::set<std::string> names;
    for (const MetadataField& f : kmd.fields) names.insert(f.name);
    for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out.empty() ? std::string("(none)") : out;
  };
  for (auto it = kernel.metadata.begin(); it != kernel.metadata.end(); ++it) {
    if (kmd.field(it.key()) == nullptr) {
      error(jsonPathKey(mdPath(), it.key()),
            "unknown metadata field '" + it.key() + "'; KMD '" + kmd.name + "' (" + kmd.file + ") has " + known());
    }
  }
  Json out = Json::object();
  for (const MetadataField& f : kmd.fields) {
    const auto it = kernel.metadata.find(f.name);
    if (it != kernel.metadata.end()) {
      const Json& v = *it;
      bool typed = false;
      if (f.type == "bool") typed = v.is_boolean();
      if (f.type == "int") typed = v.is_number_integer();
      if (f.type == "float") typed = v.is_number();
      if (f.type == "string") typed = v.is_string();
      if (f.type == "int_list") {
        typed = v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& x) { return x.is_number_integer(); });
      }
      if (!typed) {
        error(jsonPathKey(mdPath(), f.name),
              "expected " + f.type + " (KMD '" + kmd.name + "' field), found " + describeFound(v));
      }
      out[f.name] = v;
    } else if (f.defaultValue) {
      out[f.name] = *f.defaultValue;
    } else {
      error(mdPath(), "missing metadata field '" + f.name + "' (" + f.type + "), which KMD '" + kmd.name + "' (" +
                          kmd.file + ") gives no default");
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace ukdpack
