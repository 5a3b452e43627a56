#include "ukdpack/loader.hpp"

#include <algorithm>
#include <iterator>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "paths.hpp"
#include "utf8.hpp"
#include "ukdpack/arch.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

namespace {

const char* const kTypes[] = {"ukd", "kdp", "udd", "ued", "kmd", "umd", "uhd"};
constexpr std::uint64_t kMaxDescriptorBytes = 256ull << 20;

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

// Python's comment scan, only to word an unterminated /* comment alike.
std::optional<std::size_t> unterminatedCommentLine(std::string_view text) {
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (text.substr(i, 2) == "//") {
      const std::size_t end = text.find('\n', i);
      if (end == std::string_view::npos) return std::nullopt;
      i = end;
    } else if (text.substr(i, 2) == "/*") {
      const std::size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) {
        return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(i), '\n'));
      }
      i = end + 1;
    }
  }
  return std::nullopt;
}

// "[json.exception.parse_error.101] parse error at line 2, column 3: syntax
// error while parsing ..." -> "syntax error while parsing ... at line 2 column 3".
std::string wordParseError(const std::string& what) {
  const std::string marker = "parse error at line ";
  const std::size_t at = what.find(marker);
  if (at == std::string::npos) {
    const std::size_t colon = what.find("] ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }
  const std::size_t colon = what.find(": ", at);
  std::string where = what.substr(at + marker.size(), colon - at - marker.size());  // "2, column 3"
  const std::size_t comma = where.find(", column ");
  if (comma != std::string::npos) where = where.substr(0, comma) + " column " + where.substr(comma + 9);
  const std::string msg = colon == std::string::npos ? "" : what.substr(colon + 2);
  return msg + " at line " + where;
}

const std::string& idOf(const DescriptorInfo& d) { return d.id; }

template <class T>
const T* findById(const std::vector<T>& items, std::string_view id) {
  const std::string key = idKey(id);
  for (const T& item : items)
    if (idKey(idOf(item)) == key) return &item;
  return nullptr;
}

// A standalone UKD file, before packs claim it.
struct Standalone {
  Kernel kernel;
  Json raw;
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
  struct Unloaded {
    std::string file;
    std::string why;  // "did not load" / "was skipped (UDD version 1.2)"
  };

  void loadFile(const WalkedFile& f, const fs::path& root, std::size_t rootIndex);
  void uniqueIds();
  void checkArtifacts();
  void resolveEngines();
  void resolvePacks();
  void checkMetadataUnique();
  void compact();

  RefFound lookup(const std::string& ref, const std::string& want, const std::string& ownerFile,
                  const std::string& path, std::string* why = nullptr);
  DescriptorInfo* info(const Slot& s);
  void markUnloaded(const DescriptorInfo& d, std::string why) {
    unloaded_[idKey(d.id)] = Unloaded{d.file, std::move(why)};
  }

  LoaderOptions options_;
  DescriptorSet set_;
  std::vector<Standalone> standalone_;
  std::vector<Slot> order_;  // every file-backed descriptor in load order
  std::map<std::string, Slot> index_;  // id key -> kept descriptor
  std::map<std::string, std::string> inlineIds_;  // id key -> KDP file
  std::map<std::string, Unloaded> unloaded_;      // id key -> why it is not there
  std::set<std::pair<std::string, std::size_t>> removed_;  // (type, index)
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
  for (const WalkedFile& f : walkRoot(root, set_.diagnostics, options_.excludeFolders)) loadFile(f, root, index);
}

void Loader::loadFile(const WalkedFile& f, const fs::path& root, std::size_t rootIndex) {
  auto& diags = set_.diagnostics;
  std::string text;
  {
    std::error_code ec;
    const auto size = fs::file_size(f.path, ec);
    if (!ec && size > kMaxDescriptorBytes) {
      diags.push_back(makeError("READ_FAILED", f.rel, "",
                                "file is larger than a descriptor can be (" + std::to_string(size) +
                                    " bytes)"));
      return;
    }
    std::ifstream in(f.path, std::ios::binary);
    std::ostringstream buf;
    if (in) buf << in.rdbuf();
    if (!in) {
      diags.push_back(makeError("READ_FAILED", f.rel, "", "cannot read file"));
      return;
    }
    text = buf.str();
  }
  auto parsed = parseDescriptorText(text);
  if (!parsed) {
    Diagnostic d = parsed.error();
    d.file = f.rel;
    diags.push_back(std::move(d));
    return;
  }
  // Mutable: the typed readers may move subtrees out once they have read them.
  Json& doc = parsed.value();
  const Version& max = options_.maxVersions.of(f.type);
  const VersionCheck vc = checkVersion(doc, f.type, max);
  auto remember = [&](const std::string& why) {
    const auto id = doc.is_object() ? doc.find("id") : doc.end();
    if (doc.is_object() && id != doc.end() && id->is_string() && !id->get<std::string>().empty()) {
      unloaded_.emplace(idKey(id->get<std::string>()), Unloaded{f.rel, why});
    }
  };
  if (vc.gate == VersionGate::Skip) {
    diags.push_back(makeWarning("VERSION_SKIPPED", f.rel, "", "skipping " + f.rel + ": " + vc.message));
    remember("was skipped (" + upperType(f.type) + " version " + vc.version.str() + ")");
    return;
  }
  if (vc.gate == VersionGate::Malformed) {
    diags.push_back(makeError("SCHEMA", f.rel, "$.version", vc.message));
    remember("did not load");
    return;
  }
  const std::string folder = fs::path(f.rel).parent_path().generic_string();
  const DescriptorContext ctx{f.rel, "$", folder.empty() ? root : (root / folder).lexically_normal()};
  bool loaded = false;
  auto place = [&](auto& vec, auto&& value) {
    value.root = rootIndex;
    order_.push_back(Slot{f.type, vec.size()});
    vec.push_back(std::move(value));
    loaded = true;
  };
  if (f.type == "kdp") {
    if (auto v = parsePack(std::move(doc), ctx, diags, options_.maxVersions.ukd)) {
      for (PackMember& m : v->members) m.root = rootIndex;
      place(set_.packs, std::move(*v));
    }
  } else if (f.type == "udd") {
    if (auto v = parseDispatch(doc, ctx, diags)) place(set_.dispatches, std::move(*v));
  } else if (f.type == "ued") {
    if (auto v = parseEngine(doc, ctx, diags)) place(set_.engines, std::move(*v));
  } else if (f.type == "kmd") {
    if (auto v = parseMetadataSchema(doc, ctx, diags)) place(set_.metadataSchemas, std::move(*v));
  } else if (f.type == "umd") {
    if (auto v = parseMatcher(doc, ctx, diags)) place(set_.matchers, std::move(*v));
  } else if (f.type == "uhd") {
    if (auto v = parseHeuristic(doc, ctx, diags)) place(set_.heuristics, std::move(*v));
  } else if (f.type == "ukd") {
    if (auto k = parseKernel(doc, ctx, diags)) {
      order_.push_back(Slot{"ukd", standalone_.size()});
      standalone_.push_back(Standalone{std::move(*k), std::move(doc), rootIndex, false, ""});
      loaded = true;
    }
  }
  if (!loaded) remember("did not load");
}

// Ids are unique across every type (SPEC 2.2); the first one in load order
// stays, each later one is refused and not loaded.
void Loader::uniqueIds() {
  std::map<std::string, std::string> seen;  // id key -> where
  auto where = [](const std::string& file, const std::string& path) {
    return path == "$" ? file : file + " (" + path + ")";
  };
  // With several roots, the first holder is named with its root.
  auto claim = [&](const std::string& id, const std::string& file, const std::string& path,
                   std::size_t root) {
    std::string at = where(file, path);
    if (set_.roots.size() > 1 && root < set_.roots.size()) at += " in " + set_.roots[root].string();
    const auto [it, fresh] = seen.emplace(idKey(id), at);
    if (fresh) return true;
    set_.diagnostics.push_back(makeError(
        "DUPLICATE_ID", file, jsonPathKey(path, "id"),
        "id '" + id + "' is already used by " + it->second +
            "; ids are unique across every descriptor type of a root"));
    return false;
  };
  for (const Slot& s : order_) {
    if (s.type == "ukd") {
      Standalone& u = standalone_[s.index];
      if (!claim(u.kernel.id, u.kernel.file, "$", u.root)) u.removed = true;
      continue;
    }
    DescriptorInfo* d = info(s);
    if (!claim(d->id, d->file, d->jsonPath, d->root)) {
      removed_.insert({s.type, s.index});
      continue;
    }
    if (s.type == "kdp") {
      Pack& p = set_.packs[s.index];
      std::vector<PackMember> kept;
      for (PackMember& m : p.members) {
        if (claim(m.kernel.id, m.kernel.file, m.kernel.jsonPath, p.root)) {
          inlineIds_.emplace(idKey(m.kernel.id), p.file);
          kept.push_back(std::move(m));
        }
      }
      p.members = std::move(kept);
    }
  }
  for (const Slot& s : order_) {
    if (s.type == "ukd" ? standalone_[s.index].removed : removed_.count({s.type, s.index}) != 0) continue;
    const std::string& id = s.type == "ukd" ? standalone_[s.index].kernel.id : info(s)->id;
    index_.emplace(idKey(id), s);
  }
}

RefFound Loader::lookup(const std::string& ref, const std::string& want,
                        const std::string& ownerFile, const std::string& path, std::string* why) {
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
    return RefFound::Unloaded;
  }
  if (const auto in = inlineIds_.find(key); in != inlineIds_.end() && want == "ukd") {
    set_.diagnostics.push_back(makeError("UNRESOLVED_REF", ownerFile, path,
                                         "'" + ref + "' is an inline UKD of " + in->second +
                                             "; only standalone UKDs (*.ukd.json) are referenced by id"));
    return RefFound::Refused;
  }
  set_.diagnostics.push_back(makeError("UNRESOLVED_REF", ownerFile, path,
                                       "'" + ref + "' names no descriptor of this root; expected the id of a " +
                                           wantName));
  return RefFound::Refused;
}

// A UHD's artifact ships beside it: it must exist inside the root.
void Loader::checkArtifacts() {
  for (std::size_t i = 0; i < set_.heuristics.size(); ++i) {
    HeuristicDescriptor& h = set_.heuristics[i];
    if (!h.artifact || removed_.count({"uhd", i}) != 0) continue;
    const std::string& name = *h.artifact;
    const auto v = detail::checkContained(set_.roots[h.root], h.baseDir, name, false);
    const std::string msg = detail::describeFileProblem(v, name, "artifact", h.file);
    if (msg.empty()) continue;
    set_.diagnostics.push_back(makeError("ARTIFACT", h.file, "$." + h.adapter + ".artifact", msg));
    removed_.insert({"uhd", i});
    markUnloaded(h, "did not load");
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
        for (std::size_t j = 0; j < ids.size(); ++j) ref(ids[j], "uhd", list ? jsonPathIndex(base, j) : base);
      }
    }
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
    std::vector<std::string> unloaded;
    auto ref = [&](const std::string& id, const std::string& want, const std::string& path) {
      std::string why;
      const RefFound r = lookup(id, want, p.file, path, &why);
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
    if (refused) {
      removed_.insert({"kdp", i});
      continue;
    }
    if (!unloaded.empty()) {
      set_.diagnostics.push_back(makeWarning("PACK_DROPPED", p.file, "",
                                             "dropping pack '" + p.name + "': " + unloaded.front()));
      removed_.insert({"kdp", i});
      continue;
    }
    for (PackMember& m : resolved) p.members.push_back(std::move(m));
    std::stable_sort(p.members.begin(), p.members.end(),
                     [](const PackMember& a, const PackMember& b) { return a.index < b.index; });

    // A kernel's arch is a subset of its pack's (SPEC 4.2); its metadata fills the KMD.
    const Engine* engine = p.engine ? findById(set_.engines, *p.engine) : nullptr;
    const MetadataSchema* kmd = engine ? findById(set_.metadataSchemas, engine->metadata) : nullptr;
    std::vector<PackMember> kept;
    for (PackMember& m : p.members) {
      bool ok = true;
      if (!p.arch.empty() && m.kernel.arch && !m.kernel.arch->empty()) {
        std::string extra;
        for (const std::string& a : *m.kernel.arch)
          if (std::find(p.arch.begin(), p.arch.end(), a) == p.arch.end()) extra += (extra.empty() ? "'" : ", '") + a + "'";
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
      if (ok) kept.push_back(std::move(m));
    }
    p.members = std::move(kept);
  }
  for (const Standalone& u : standalone_) {
    if (!u.removed && u.claimedBy.empty()) {
      set_.diagnostics.push_back(Diagnostic{Severity::Note, "ORPHAN_KERNEL", u.kernel.file, "",
                                            "not referenced by any KDP; this kernel ships in no shard"});
    }
  }
}

// The completed metadata is unique among kernels one engine serves on one
// arch (SPEC 4.5): two kernels collide where their arch sets meet.
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
  std::unordered_map<std::string, std::vector<Seen>> byEngine;  // engine key \n metadata text
  byEngine.reserve(1024);
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    Pack& p = set_.packs[i];
    if (removed_.count({"kdp", i}) != 0 || !p.engine) continue;
    const Engine* engine = findById(set_.engines, *p.engine);
    if (engine == nullptr) continue;
    const std::string engineKey = idKey(engine->id) + "\n";
    for (PackMember& m : p.members) {
      const std::string text = canonicalMetadataText(m.completedMetadata);
      std::vector<Seen>& seen = byEngine[engineKey + text];
      bool clash = false;
      for (const Seen& s : seen) {
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
        std::string onText;
        for (const std::string& a : on) onText += (onText.empty() ? " on " : ", ") + a;
        const Kernel& other = s.member->kernel;
        const std::string where = other.jsonPath == "$" ? other.file : other.file + ": " + other.jsonPath;
        set_.diagnostics.push_back(makeError(
            "METADATA_NOT_UNIQUE", m.kernel.file, jsonPathKey(m.kernel.jsonPath, "metadata"),
            "completed metadata " + text + " equals that of kernel '" + other.name + "' (" + where +
                ") under engine '" + engine->name + "'" + onText + "; the engine cannot tell them apart"));
        clash = true;
        break;
      }
      // Reported, but kept: the other rules still look at it (all problems of one pass).
      if (!clash) seen.push_back(Seen{&p, &m});
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
  // A pack left with no kernel is dropped (SPEC 9.1).
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
      if (idKey(m.kernel.id) != key) continue;
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
  return loader.take();
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

void walkFolder(const fs::path& folder, const std::string& relFolder, const std::set<std::string>& excluded,
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
    diags.push_back(Diagnostic{Severity::Note, "SKIPPED", "", "", "skipping " + rel + ": " + why});
  };
  for (const fs::directory_entry& e : entries) {
    const std::string name = e.path().filename().string();
    const std::string rel = relFolder.empty() ? name : relFolder + "/" + name;
    const bool isLink = e.is_symlink(ec);
    const bool isDir = e.is_directory(ec);  // follows links
    const bool realDir = isDir && !isLink;
    const bool isJson = name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0;
    if (name.front() == '.') {
      if (realDir || isJson) note(rel, "dot-prefixed path");
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
      if (excluded.count(name) != 0) {
        note(rel, "excluded folder (--exclude-folder)");
        continue;
      }
      walkFolder(e.path(), rel, excluded, out, diags);
      continue;
    }
    if (!isJson) continue;
    const auto type = descriptorType(name);
    if (!type) {
      note(rel, "no descriptor type token; name it <name>.<type>.json with type one of " + typeListText());
      continue;
    }
    out.push_back(WalkedFile{rel, e.path(), *type});
  }
}

}  // namespace

std::vector<WalkedFile> walkRoot(const fs::path& root, std::vector<Diagnostic>& diags,
                                 const std::vector<std::string>& excludeFolders) {
  std::vector<WalkedFile> out;
  walkFolder(root, "", std::set<std::string>(excludeFolders.begin(), excludeFolders.end()), out, diags);
  std::sort(out.begin(), out.end(), [](const WalkedFile& a, const WalkedFile& b) { return a.rel < b.rel; });
  return out;
}

namespace {
// The DOM builder of nlohmann, plus the keys of each open object (few: a linear
// scan beats a set), to find a key said twice.
class DuplicateKeySax {
 public:
  explicit DuplicateKeySax(Json& root) : dom_(root, /*allow_exceptions=*/true) {}
  std::optional<std::string> duplicate;

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const std::string& s) { return dom_.number_float(v, s); }
  bool string(std::string& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (depth_ == keys_.size()) keys_.emplace_back();
    keys_[depth_++].clear();
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    std::vector<std::string>& seen = keys_[depth_ - 1];
    if (!duplicate && std::find(seen.begin(), seen.end(), k) != seen.end()) duplicate = k;
    seen.push_back(k);
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, token, e);
  }

 private:
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<std::vector<std::string>> keys_;  // reused per depth
  std::size_t depth_ = 0;
};
}  // namespace

Result<Json> parseDescriptorText(std::string_view text) {
  if (const std::size_t bad = detail::firstInvalidUtf8(text); bad != std::string_view::npos) {
    return Result<Json>::failure(makeError("ENCODING", "", "",
                                           "not UTF-8 text: byte " + std::to_string(bad) + " cannot be decoded"));
  }
  // nlohmann keeps the last of duplicate keys silently, and a descriptor must not
  // say a field twice: a SAX handler builds the DOM and watches the keys.
  Json doc;
  DuplicateKeySax sax(doc);
  try {
    Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/true);
    const std::optional<std::string>& duplicate = sax.duplicate;
    if (duplicate) {
      return Result<Json>::failure(
          makeError("DUPLICATE_KEY", "", "", "duplicate key '" + *duplicate + "' in one object"));
    }
    return Result<Json>::success(std::move(doc));
  } catch (const Json::exception& e) {
    if (const auto line = unterminatedCommentLine(text)) {
      return Result<Json>::failure(makeError(
          "JSON_SYNTAX", "", "", "unterminated /* comment starting on line " + std::to_string(*line)));
    }
    return Result<Json>::failure(makeError("JSON_SYNTAX", "", "", "not valid JSON: " + wordParseError(e.what())));
  }
}

}  // namespace ukdpack
