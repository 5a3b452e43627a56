// Assembling the set once every file is read: ids unique across types,
// references resolved (engines, packs, their standalone kernels), shipped
// artifacts, role metrics, trained-against revisions, metadata unique per
// engine (per slot of a slotted one) and arch; what is refused is left out.
// The slot rules are in slots.cpp.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/files.hpp"
#include "base/paths.hpp"
#include "load/loader_impl.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack::detail {

// Ids are unique across every type; the first one in load order
// stays, each later one is refused and not loaded.
void Loader::uniqueIds() {
  std::unordered_map<std::string, Holder>& seen = holders_;
  // Room for what is claimed below: a pack read through a shard index claims no kernel.
  const auto claimsKernels = [&](const Pack& p) {
    return !(set_.fromIndex && !p.members.empty() && p.members.front().deferred());
  };
  std::size_t ids = order_.size();
  for (const Pack& p : set_.packs)
    if (claimsKernels(p)) ids += p.members.size();
  seen.reserve(ids);
  auto where = [&](const Holder& h) {
    const std::string path = h.path != nullptr ? *h.path : jsonPathIndex("$.kernelDescriptors", h.member);
    std::string at = path == "$" ? *h.file : *h.file + " (" + path + ")";
    // With several roots, the first holder is named with its root.
    if (set_.roots.size() > 1 && h.root < set_.roots.size()) at += " in " + set_.roots[h.root].string();
    return at;
  };
  // `path` is worded only for a duplicate: a kernel's is built then, not per kernel.
  auto claim = [&](std::string_view id, const std::string& file, const auto& path, const Holder& holder) {
    const auto [it, fresh] = seen.emplace(idKey(id), holder);
    if (fresh) return true;
    set_.diagnostics.push_back(makeError(codes::DUPLICATE_ID, file, jsonPathKey(path(), "id"),
                                         "id '" + std::string(id) + "' is already used by " + where(it->second) +
                                             "; ids are unique across every descriptor type of a root"));
    return false;
  };
  const auto topPath = [] { return std::string("$"); };
  static const std::string top = "$";
  for (const Slot& s : order_) {
    if (s.type == "ukd") {
      Standalone& u = standalone_[s.index];
      if (!claim(u.kernel.id, u.kernel.file, topPath, Holder{&u.kernel.file, &top, 0, u.root})) u.removed = true;
      continue;
    }
    DescriptorInfo* d = info(s);
    if (!claim(d->id, d->file, [&] { return d->jsonPath; }, Holder{&d->file, &d->jsonPath, 0, d->root})) {
      removed_.insert({s.type, s.index});
      continue;
    }
    if (s.type == "kdp") {
      Pack& p = set_.packs[s.index];
      // Through a shard index the pack-time load found every kernel id unique in these
      // very bytes: its kernels are not claimed one by one (no reference names them).
      if (!claimsKernels(p)) continue;
      // Only inline kernels so far (a pack's file, path by place): read from the
      // member, which a shard index's load holds without building the kernel.
      keepMembers(p.members, [&](const PackMember& m) {
        return claim(
            m.id(), p.file, [&] { return jsonPathIndex("$.kernelDescriptors", m.index); },
            Holder{&p.file, nullptr, m.index, p.root});
      });
    }
  }
  for (const Slot& s : order_) {
    if (s.type == "ukd" ? standalone_[s.index].removed : removed_.count({s.type, s.index}) != 0) continue;
    const std::string& id = s.type == "ukd" ? standalone_[s.index].kernel.id : info(s)->id;
    index_.emplace(idKey(id), s);
  }
}

RefFound Loader::lookup(const std::string& ref, const std::string& want, const std::string& ownerFile,
                        const std::string& path, std::string* why, bool* failed) {
  const std::string key = idKey(ref);
  const std::string wantName = upperType(want);
  const auto it = index_.find(key);
  if (it != index_.end() && removed_.count({it->second.type, it->second.index}) == 0) {
    if (it->second.type == want) return RefFound::Ok;
    const std::string file =
        it->second.type == "ukd" ? standalone_[it->second.index].kernel.file : info(it->second)->file;
    set_.diagnostics.push_back(makeError(
        codes::UNRESOLVED_REF, ownerFile, path,
        "'" + ref + "' is a " + upperType(it->second.type) + " (" + file + "), expected the id of a " + wantName));
    return RefFound::Refused;
  }
  if (const auto u = unloaded_.find(key); u != unloaded_.end()) {
    if (why != nullptr) *why = "'" + ref + "' (" + u->second.file + ") " + u->second.why;
    if (failed != nullptr) *failed = *failed || u->second.failed;
    return RefFound::Unloaded;
  }
  // A kernel inline in a pack holds its id with no JSON path of its own.
  if (const auto in = holders_.find(key); in != holders_.end() && in->second.path == nullptr && want == "ukd") {
    set_.diagnostics.push_back(makeError(codes::UNRESOLVED_REF, ownerFile, path,
                                         "'" + ref + "' is an inline UKD of " + *in->second.file +
                                             "; only standalone UKDs (*.ukd.json) are referenced by id"));
    return RefFound::Refused;
  }
  std::vector<std::string> ids;  // the kept descriptors of the type wanted, for a suggestion
  for (const auto& [k, slot] : index_) {
    if (slot.type != want || removed_.count({slot.type, slot.index}) != 0) continue;
    ids.push_back(slot.type == "ukd" ? standalone_[slot.index].kernel.id : info(slot)->id);
  }
  set_.diagnostics.push_back(makeError(
      codes::UNRESOLVED_REF, ownerFile, path,
      "'" + ref + "' names no descriptor of this root; expected the id of a " + wantName + didYouMean(ref, ids)));
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
      if (top == kArchiveFolder && v.rootRel.find('/') != std::string::npos) {
        msg = std::string(field) + " '" + name + "' lands in the reserved top-level folder '" + v.rootRel.substr(0, 5) +
              "/', where a shard's archives are written; move it to another folder";
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
              codes::ARTIFACT_HASH, h.file, hashPath,
              "the " + std::string(field) + " '" + name + "' has sha256 " + got.value() + ", but hash states " + *want +
                  "; update the hash to the file's, or restore the file it was written for"));
          removed_.insert({"uhd", i});
          markUnloaded(h, "did not load");
          continue;
        }
      } else {
        set_.diagnostics.push_back(Diagnostic{Severity::Note, codes::HASH_UNCHECKED, h.file, hashPath,
                                              "hash '" + *h.hash +
                                                  "' is no sha256 (64 hex digits, bare or after 'sha256:'); the " +
                                                  field + " '" + name + "' is not checked against it"});
      }
    }
    if (msg.empty()) continue;
    set_.diagnostics.push_back(makeError(codes::ARTIFACT, h.file, "$." + h.adapter + "." + field, msg));
    removed_.insert({"uhd", i});
    markUnloaded(h, "did not load");
  }
}

// A scoring role names one UHD per metric for each arch key (the runtime cannot
// choose between two of one metric, and two without a metric count as one); every
// predict_engine UHD declares its metric, the units engines are compared in. The
// roles of the engine, or of one of its slots (`slot`).
void Loader::checkRoleMetrics(const Engine& e, const EngineSlot* slot, bool& refused) {
  const auto& heuristics = slot != nullptr ? slot->heuristics : e.heuristics;
  const auto& paths = slot != nullptr ? slot->heuristicPaths : e.heuristicPaths;
  const Json& raw = slot != nullptr ? slot->raw : e.raw;
  for (const std::string role : {"sort_kernel_catalog", "predict_engine"}) {
    const auto table = heuristics.find(role);
    if (table == heuristics.end()) continue;
    for (const auto& [arch, ids] : table->second) {
      const std::string base = paths.at(role + "/" + arch);
      const bool list = raw.at(role).at(arch).is_array();
      std::map<std::string, const HeuristicDescriptor*> byMetric;  // "" stands for no metric
      for (std::size_t j = 0; j < ids.size(); ++j) {
        const HeuristicDescriptor* h = kept(set_.heuristics, "uhd", ids[j]);
        if (h == nullptr || (role == "predict_engine" && h->adapter == "static_order")) continue;
        const std::string path = list ? jsonPathIndex(base, j) : base;
        if (role == "predict_engine" && !h->metric) {
          set_.diagnostics.push_back(
              makeError(codes::ROLE_METRIC, e.file, path,
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
        set_.diagnostics.push_back(makeError(codes::ROLE_METRIC, e.file, path,
                                             role + " names two UHDs with " + what + " for '" + arch + "': '" +
                                                 it->second->name + "' (" + it->second->file + ") and '" + h->name +
                                                 "' (" + h->file +
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
      set_.diagnostics.push_back(
          makeWarning(codes::TRAINED_AGAINST_STALE, h.file, ref.path,
                      "UHD '" + h.name + "' was trained against " + T + " '" + ref.id + "' revision " + ref.revision +
                          ", but " + named->file + " has revision " + **revision +
                          "; retrain the model against revision " + **revision + " (or correct trained_against)"));
    }
  }
}

// Knobs name fields of the engine's KMD: the engine's (`listPath` "$.knobs") or a slot's.
void Loader::checkKnobs(const Engine& e, const MetadataSchema& kmd, const std::vector<std::string>& knobs,
                        const std::string& listPath, const EngineSlot* slot, bool& refused) {
  std::string names;
  for (const MetadataField& f : kmd.fields) names += (names.empty() ? "'" : ", '") + f.name + "'";
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    if (kmd.field(knobs[k]) != nullptr) continue;
    const std::string of = slot != nullptr ? " of slot '" + slot->name + "'" : std::string();
    set_.diagnostics.push_back(makeError(codes::UNRESOLVED_REF, e.file, jsonPathIndex(listPath, k),
                                         "knob '" + knobs[k] + "'" + of + " is no field of KMD '" + kmd.name + "' (" +
                                             kmd.file + "); expected one of " +
                                             (names.empty() ? std::string("(none)") : names)));
    refused = true;
  }
}

// The role maps of the engine, or of one of its slots (`slot`): each id a UHD,
// no static_order UHD ranking engines, each UHD of the slot it serves.
void Loader::resolveRoleMaps(const Engine& e, const EngineSlot* slot, std::vector<std::string>& unloaded,
                             bool& refused) {
  const auto& heuristics = slot != nullptr ? slot->heuristics : e.heuristics;
  const auto& paths = slot != nullptr ? slot->heuristicPaths : e.heuristicPaths;
  const Json& raw = slot != nullptr ? slot->raw : e.raw;
  for (const auto& [role, table] : heuristics) {
    for (const auto& [arch, ids] : table) {
      const std::string base = paths.at(role + "/" + arch);
      const bool list = raw.at(role).at(arch).is_array();
      for (std::size_t j = 0; j < ids.size(); ++j) {
        const std::string path = list ? jsonPathIndex(base, j) : base;
        std::string why;
        const RefFound r = lookup(ids[j], "uhd", e.file, path, &why);
        if (r == RefFound::Refused) refused = true;
        if (r == RefFound::Unloaded) unloaded.push_back(why);
        if (r != RefFound::Ok) continue;
        const HeuristicDescriptor& h = set_.heuristics[index_.at(idKey(ids[j])).index];
        checkHeuristicSlot(e, slot, role, h, path, refused);
        if (role != "predict_engine" || h.adapter != "static_order") continue;
        // A static order ranks kernels by priority; it has no score to rank engines by.
        set_.diagnostics.push_back(makeError(codes::UNRESOLVED_REF, e.file, path,
                                             "predict_engine cannot use UHD '" + h.name + "' (" + h.file +
                                                 "): its adapter '" + h.adapter +
                                                 "' ranks kernels by priority and scores no engine; expected a UHD of "
                                                 "adapter 'native', 'tree_data', 'table' or 'custom_library'"));
        refused = true;
      }
    }
  }
}

void Loader::resolveEngines() {
  for (std::size_t i = 0; i < set_.engines.size(); ++i) {
    if (removed_.count({"ued", i}) != 0) continue;
    Engine& e = set_.engines[i];
    bool refused = false;
    std::vector<std::string> unloaded;
    std::string why;
    const RefFound kmdFound = lookup(e.metadata, "kmd", e.file, "$.metadata", &why);
    if (kmdFound == RefFound::Refused) refused = true;
    if (kmdFound == RefFound::Unloaded) unloaded.push_back(why);
    if (kmdFound == RefFound::Ok) {
      const MetadataSchema& kmd = set_.metadataSchemas[index_.at(idKey(e.metadata)).index];
      checkKnobs(e, kmd, e.knobs, "$.knobs", nullptr, refused);
      for (const EngineSlot& slot : e.slots)
        checkKnobs(e, kmd, slot.knobs, jsonPathKey(slot.jsonPath, "knobs"), &slot, refused);
    }
    resolveRoleMaps(e, nullptr, unloaded, refused);
    checkRoleMetrics(e, nullptr, refused);
    for (const EngineSlot& slot : e.slots) {
      resolveRoleMaps(e, &slot, unloaded, refused);
      checkRoleMetrics(e, &slot, refused);
    }
    if (refused || !unloaded.empty()) {
      if (!refused) {
        set_.diagnostics.push_back(
            makeWarning(codes::ENGINE_DROPPED, e.file, "", "dropping engine '" + e.name + "': " + unloaded.front()));
      }
      removed_.insert({"ued", i});
      markUnloaded(e, "did not load");
    }
  }
}

void Loader::resolvePacks() {
  // Per KMD, the one copy its files' span readers share (a shard's files name a few KMDs).
  std::map<const MetadataSchema*, std::shared_ptr<const MetadataSchema>> kmdCopies;
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
    checkPackSlot(p, refused);
    std::vector<PackMember> resolved;
    for (const KernelRef& kr : p.refs) {
      std::string why;
      const RefFound r = lookup(kr.id, "ukd", p.file, kr.jsonPath, &why);
      if (r == RefFound::Refused) refused = true;
      if (r != RefFound::Ok) continue;  // a skipped or malformed UKD leaves only itself out
      Standalone& u = standalone_[index_.at(idKey(kr.id)).index];
      if (!u.claimedBy.empty()) {
        set_.diagnostics.push_back(makeError(codes::DUPLICATE_MEMBER, p.file, kr.jsonPath,
                                             "UKD '" + u.kernel.id + "' (" + u.kernel.file + ") is already in pack " +
                                                 u.claimedBy + "; a kernel belongs to one pack"));
        continue;
      }
      u.claimedBy = p.file;
      PackMember m;
      m.index = kr.index;
      m.setRef(kr.id);
      m.setKernel(u.kernel);
      m.setRaw(u.raw);
      m.root = u.root;
      resolved.push_back(std::move(m));
    }
    if (!refused && !unloaded.empty()) {
      set_.diagnostics.push_back(
          makeWarning(codes::PACK_DROPPED, p.file, "", "dropping pack '" + p.name + "': " + unloaded.front()));
    }
    if (refused || !unloaded.empty()) {
      removed_.insert({"kdp", i});
      // A version skip drops the pack quietly; after an error, what does resolve is still judged.
      if (!refused && !failedRef) continue;
      judgedOnly_.insert(i);
    }
    // Inline kernels are in list order already: only standalone ones join out of place.
    const bool inlineOnly = resolved.empty();
    for (PackMember& m : resolved) p.members.push_back(std::move(m));
    const auto byIndex = [](const PackMember& a, const PackMember& b) { return a.index < b.index; };
    if (!inlineOnly && !std::is_sorted(p.members.begin(), p.members.end(), byIndex)) {
      std::stable_sort(p.members.begin(), p.members.end(), byIndex);
    }

    // A kernel's arch is a subset of its pack's; its metadata fills the KMD.
    const Engine* engine = p.engine ? kept(set_.engines, "ued", *p.engine) : nullptr;
    const MetadataSchema* kmd = engine ? kept(set_.metadataSchemas, "kmd", engine->metadata) : nullptr;
    const auto reader = spanReaders_.find(i);
    if (reader != spanReaders_.end() && kmd != nullptr) {
      std::shared_ptr<const MetadataSchema>& copy = kmdCopies[kmd];
      if (!copy) copy = std::make_shared<const MetadataSchema>(*kmd);
      reader->second->completeWith(copy);
    }
    // A pack whose kernels all read through the shard index: the pack-time load judged
    // these very bytes (pack and kernels) without a word, so no kernel is looked at.
    if (inlineOnly && reader != spanReaders_.end()) continue;
    // Kernels read through a shard index share their arch lists: each judged once.
    const std::optional<std::vector<std::string>>* lastArch = nullptr;
    std::string extra;
    keepMembers(p.members, [&](PackMember& m) {
      bool ok = true;
      const std::optional<std::vector<std::string>>& arch = m.arch();
      if (!p.arch.empty() && arch && !arch->empty()) {
        if (&arch != lastArch) {
          lastArch = &arch;
          extra.clear();
          for (const std::string& a : *arch)  // a generic family covers its members
            if (std::none_of(p.arch.begin(), p.arch.end(), [&](const std::string& pa) { return targetRunsOn(a, pa); }))
              extra += (extra.empty() ? "'" : ", '") + a + "'";
        }
        if (!extra.empty()) {
          std::string listed;
          for (const std::string& a : p.arch) listed += (listed.empty() ? "" : ", ") + a;
          set_.diagnostics.push_back(makeError(codes::ARCH_NOT_SUBSET, m.kernel().file,
                                               jsonPathKey(m.kernel().jsonPath, "arch"),
                                               "arch " + extra + " not in its KDP's arch [" + listed + "] (" + p.file +
                                                   "); a kernel's arch is a subset of its pack's"));
          ok = false;
        }
      }
      if (m.deferred()) {
        // Read with the kernel, by its reader (the KMD it completes against is set below).
      } else if (kmd != nullptr) {
        if (auto md = completeMetadata(*kmd, m.kernel(), set_.diagnostics)) {
          m.setCompletedMetadata(std::move(*md));
        } else {
          ok = false;
        }
      } else {
        m.setCompletedMetadata(m.kernel().metadata);
      }
      return ok;
    });
  }
  for (const Standalone& u : standalone_) {
    if (!u.removed && u.claimedBy.empty()) {
      set_.diagnostics.push_back(Diagnostic{Severity::Note, codes::ORPHAN_KERNEL, u.kernel.file, "",
                                            "not referenced by any KDP; this kernel ships in no shard"});
    }
  }
}

// The completed metadata is unique among kernels one engine serves on one
// arch, per slot of a slotted engine (each slot is a catalog of its own, picked
// from on its own): two kernels collide where their arch sets meet.
void Loader::checkMetadataUnique() {
  // Through a shard index, every kernel's bytes and the KMDs are the ones the pack-time
  // load judged without a word: nothing to find, and each kernel is left unbuilt.
  if (set_.fromIndex) return;
  // Per kernel only a map lookup: arch sets and wording are built on a collision.
  struct Seen {
    const Pack* pack;
    const PackMember* member;
  };
  auto archesOf = [](const Pack& p, const PackMember& m) {
    if (m.kernel().arch && !m.kernel().arch->empty()) {
      return std::set<std::string>(m.kernel().arch->begin(), m.kernel().arch->end());
    }
    return std::set<std::string>(p.arch.begin(), p.arch.end());  // empty: every arch
  };
  // Per catalog (an engine, or one slot of it), metadata text -> the kernels seen
  // with it (nearly always one, held without a vector of its own), each map sized
  // once for its kernels.
  struct Group {
    std::size_t count = 0;
    Seen first{};
    std::vector<Seen> more;
  };
  using Catalog = std::pair<const Engine*, std::size_t>;  // an engine and its slot (0 when unslotted)
  std::vector<std::pair<Pack*, Catalog>> served;
  std::map<Catalog, std::size_t> kernels;
  for (std::size_t i = 0; i < set_.packs.size(); ++i) {
    Pack& p = set_.packs[i];
    if ((removed_.count({"kdp", i}) != 0 && judgedOnly_.count(i) == 0) || !p.engine) continue;
    const Engine* engine = kept(set_.engines, "ued", *p.engine);
    if (engine == nullptr) continue;
    std::size_t slot = 0;
    if (engine->slotted()) {
      // A pack naming no slot of its engine is refused already (SLOT_MISSING, SLOT_UNKNOWN).
      const auto at = p.slot ? engine->slotIndex(*p.slot) : std::nullopt;
      if (!at) continue;
      slot = *at;
    }
    served.emplace_back(&p, Catalog{engine, slot});
    kernels[Catalog{engine, slot}] += p.members.size();
  }
  std::map<Catalog, std::unordered_map<std::string, Group>> byCatalog;
  for (const auto& [catalog, n] : kernels) byCatalog[catalog].reserve(n);  // no rehash visiting every node
  for (const auto& [packPtr, catalog] : served) {
    Pack& p = *packPtr;
    const Engine* engine = catalog.first;
    std::unordered_map<std::string, Group>& groups = byCatalog[catalog];
    for (PackMember& m : p.members) {
      const auto entry = groups.try_emplace(canonicalMetadataText(m.completedMetadata())).first;
      const std::string& text = entry->first;
      Group& group = entry->second;
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
          std::set_intersection(mine.begin(), mine.end(), theirs.begin(), theirs.end(), std::inserter(on, on.end()));
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
        const Kernel& other = s.member->kernel();
        const std::string where = other.jsonPath == "$" ? other.file : other.file + ": " + other.jsonPath;
        set_.diagnostics.push_back(
            makeError(codes::METADATA_NOT_UNIQUE, m.kernel().file, jsonPathKey(m.kernel().jsonPath, "metadata"),
                      "completed metadata " + text + " of " + kernelLabel(m.kernel()) + " equals that of " +
                          kernelLabel(other) + " (" + where + ") under engine '" + engine->name + "'" +
                          (engine->slotted() ? " (slot '" + engine->slots[catalog.second].name + "')" : "") + onText +
                          "; the " + (engine->slotted() ? "slot" : "engine") + " cannot tell them apart"));
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
    set_.diagnostics.push_back(makeWarning(codes::PACK_DROPPED, p.file, "$.kernelDescriptors",
                                           "dropping pack '" + p.name + "': none of its kernels loaded"));
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
  checkTrainedSlots();
  resolveEngines();
  checkTrainedAgainst();
  resolvePacks();
  checkSlotsFilled();
  checkMetadataUnique();
  compact();
}

}  // namespace ukdpack::detail
