#include "ukdpack/rules/set_rules.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

using LaunchSet = std::set<std::string>;

struct Member {
  const Pack* pack;
  const PackMember* member;
  const Kernel& kernel() const { return member->kernel(); }
};

// A finding of one arch's pass; `message` holds "{on}" where the arches go.
struct Finding {
  std::string code;
  std::string file;
  std::string path;
  std::string message;
  std::vector<std::string> arches;  // "" is the shard of an arch no descriptor names
};

void note(std::vector<Finding>& found, const std::string& arch, std::string code, std::string file, std::string path,
          std::string message) {
  for (Finding& f : found) {
    if (f.file == file && f.path == path && f.message == message) {
      f.arches.push_back(arch);
      return;
    }
  }
  found.push_back(Finding{std::move(code), std::move(file), std::move(path), std::move(message), {arch}});
}

void merge(std::vector<Finding>& found, std::vector<Diagnostic>& out) {
  for (Finding& f : found) {
    std::string on;
    if (std::find(f.arches.begin(), f.arches.end(), "") == f.arches.end()) {
      for (const std::string& a : f.arches) on += (on.empty() ? " on " : ", ") + a;
    }
    std::string message = f.message;
    const std::size_t at = message.find("{on}");
    if (at != std::string::npos) message.replace(at, 4, on);
    out.push_back(makeError(f.code, f.file, f.path, message));
  }
}

std::string kernelList(std::vector<Member> members) {
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return std::tie(a.pack->file, a.kernel().name, a.kernel().id) <
           std::tie(b.pack->file, b.kernel().name, b.kernel().id);
  });
  std::string out;
  std::string file;
  for (const Member& m : members) {
    const std::string item =
        "'" + m.kernel().name + "' (id " + m.kernel().id + ") " + describeLaunchSet(launchNamesOf(m.kernel()));
    if (m.pack->file != file) {
      out += (out.empty() ? "" : "; ") + m.pack->file + ": " + item;
      file = m.pack->file;
    } else {
      out += ", " + item;
    }
  }
  return out;
}

void launchSets(const DescriptorSet& set, const std::string& arch, std::vector<Finding>& found) {
  // Groups in the order their first kernel appears: (how, label) -> members.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<Member>>> groups;
  auto group = [&](const std::string& how, const std::string& label) -> std::vector<Member>& {
    for (auto& g : groups)
      if (g.first.first == how && g.first.second == label) return g.second;
    groups.push_back({{how, label}, {}});
    return groups.back().second;
  };
  // Packs refused for a failed reference are judged too: one run reports every problem.
  std::vector<const Pack*> packs;
  for (const Pack& p : set.packs) packs.push_back(&p);
  for (const Pack& p : set.refusedPacks) packs.push_back(&p);
  for (const Pack* pack : packs) {
    const Pack& p = *pack;
    // The pack's group, looked up at its first kernel in the shard (one lookup a pack,
    // not one a kernel); no group is added while the pack's kernels join it.
    std::vector<Member>* into = nullptr;
    bool looked = false;
    for (const PackMember& m : p.members) {
      if (!inShard(p, m.kernel(), arch)) continue;
      if (!looked) {
        looked = true;
        if (!p.dispatch) {
          into = &group("kdp", idKey(p.id));
        } else if (const Dispatch* udd = set.dispatchOf(p)) {
          into = &group("symbol", udd->dispatchSymbol);
        }
      }
      if (into != nullptr) into->push_back(Member{&p, &m});
    }
  }
  for (const auto& [key, members] : groups) {
    const auto& [how, label] = key;
    const Pack* first = std::min_element(members.begin(), members.end(), [](const Member& a, const Member& b) {
                          return a.pack->file < b.pack->file;
                        })->pack;
    std::map<std::string, LaunchSet> declared;  // UDD file -> its launches
    if (how == "symbol") {
      const Pack* last = nullptr;
      for (const Member& m : members) {
        if (m.pack == last) continue;  // a pack's kernels are together, and name one UDD
        last = m.pack;
        const Dispatch* udd = set.dispatchOf(*m.pack);
        if (udd != nullptr && udd->launches)
          declared[udd->file] = LaunchSet(udd->launches->begin(), udd->launches->end());
      }
    }
    std::set<LaunchSet> distinctDeclared;
    for (const auto& [file, names] : declared) distinctDeclared.insert(names);
    if (distinctDeclared.size() > 1) {
      std::string listed;
      for (const auto& [file, names] : declared)
        listed += (listed.empty() ? "" : "; ") + file + " " + describeLaunchSet(names);
      note(found, arch, codes::LAUNCHES_DISAGREE, first->file, "$.dispatch",
           "UDDs naming dispatch symbol '" + label + "' declare different launches{on}: " + listed +
               "; one handler runs one set");
      continue;
    }
    if (!declared.empty()) {
      const LaunchSet& want = declared.begin()->second;
      std::vector<Member> odd;
      for (const Member& m : members)
        if (launchNamesOf(m.kernel()) != want) odd.push_back(m);
      if (odd.empty()) continue;
      note(found, arch, codes::LAUNCH_SET_MISMATCH, odd.front().pack->file, "$.kernelDescriptors",
           "dispatch symbol '" + label + "' runs launches " + describeLaunchSet(want) + " (declared by " +
               declared.begin()->first + "), but kernels it serves have other launch sets{on}: " + kernelList(odd) +
               "; make each kernel's sources keys exactly the declared launches");
      continue;
    }
    std::set<LaunchSet> sets;
    for (const Member& m : members) sets.insert(launchNamesOf(m.kernel()));
    if (sets.size() <= 1) continue;
    if (how == "symbol") {
      note(found, arch, codes::LAUNCH_SET_MISMATCH, first->file, "$.kernelDescriptors",
           "dispatch symbol '" + label +
               "' serves kernels with different launch sets{on}, and its handler "
               "declares one set: " +
               kernelList(members) +
               "; put kernels with another launch set in a KDP with its own UDD and dispatch symbol");
    } else {
      note(found, arch, codes::LAUNCH_SET_MISMATCH, first->file, "$.kernelDescriptors",
           "KDP '" + first->name + "' has no dispatch and holds kernels with different launch sets{on}: " +
               kernelList(members) + "; a pack's kernels share one launch set");
    }
  }
}

std::string where(const Kernel& k) { return k.jsonPath == "$" ? k.file : k.file + ": " + k.jsonPath; }

// Rule 4.4 on a packed shard: one toc key of one archive holds one code
// object, so every launch naming it names one sha256 (a kernel's own launches
// may share a module, and then name one digest too).
void packedTocKeys(const DescriptorSet& set, std::vector<Diagnostic>& out) {
  struct First {
    std::string digest;
    const Kernel* kernel;
    std::string launch;
  };
  std::map<std::pair<std::string, std::string>, First> first;  // (archive, toc key)
  std::set<std::tuple<std::string, std::string, std::string, std::string>> reported;
  for (const Pack& p : set.packs) {
    for (const PackMember& m : p.members) {
      const Kernel& k = m.kernel();
      std::vector<std::pair<std::string, const KernelSource*>> launches;
      if (const KernelSource* single = singleLaunchSource(k)) {
        if (isPackedSource(*single)) launches.emplace_back("", single);
      } else {
        for (const auto& [name, src] : k.sources)
          if (isPackedSource(src)) launches.emplace_back(name, &src);
      }
      if (launches.empty()) continue;  // an authored tree's kernels: nothing packed, no paths built
      const std::string folder = std::filesystem::path(k.file).parent_path().generic_string();
      for (const auto& [name, src] : launches) {
        const std::string archive = (std::filesystem::path(folder) / src->library).lexically_normal().generic_string();
        const std::string path = name.empty() ? jsonPathKey(k.jsonPath, "kernel_source")
                                              : jsonPathKey(jsonPathKey(k.jsonPath, "sources"), name);
        const auto [it, fresh] = first.emplace(std::make_pair(archive, src->tocKey), First{src->sha256, &k, name});
        if (fresh || it->second.digest == src->sha256) continue;
        const First& seen = it->second;
        if (!reported.insert({archive, src->tocKey, idKey(seen.kernel->id), idKey(k.id)}).second) continue;
        const std::string head =
            launchLabel(k, name) + " names toc key '" + src->tocKey + "' (" + archive + ") with sha256 " + src->sha256;
        if (idKey(seen.kernel->id) == idKey(k.id)) {
          out.push_back(makeError(codes::TOC_KEY_SHARED, k.file, jsonPathKey(path, "sha256"),
                                  head + ", and launch '" + seen.launch + "' of the same kernel names it with sha256 " +
                                      seen.digest + "; one toc key holds one code object"));
        } else {
          out.push_back(
              makeError(codes::TOC_KEY_SHARED, k.file, jsonPathKey(path, "toc_key"),
                        head + ", but " + launchLabel(*seen.kernel, seen.launch) + " (" + where(*seen.kernel) +
                            ") names it with sha256 " + seen.digest +
                            "; two kernels share a toc key only when they share the code object (one sha256)"));
        }
      }
    }
  }
}

}  // namespace

bool inShard(const Pack& pack, const Kernel& kernel, const std::string& arch) {
  const bool kernelNames = kernel.arch && !kernel.arch->empty();
  if (arch.empty()) return pack.arch.empty() && !kernelNames;
  // A generic family named in an arch list ships to the shard of each member.
  const auto has = [&](const std::vector<std::string>& list) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& a) { return targetRunsOn(a, arch); });
  };
  return (pack.arch.empty() || has(pack.arch)) && (!kernelNames || has(*kernel.arch));
}

namespace {

// Every arch the packs or their kernels name, into `named`.
void collectArches(const std::vector<Pack>& packs, std::set<std::string>& named) {
  for (const Pack& p : packs) {
    named.insert(p.arch.begin(), p.arch.end());
    for (const PackMember& m : p.members)
      if (m.kernel().arch) named.insert(m.kernel().arch->begin(), m.kernel().arch->end());
  }
}

}  // namespace

std::vector<std::string> namedArches(const DescriptorSet& set) {
  std::set<std::string> named;
  collectArches(set.packs, named);
  return std::vector<std::string>(named.begin(), named.end());
}

std::vector<Diagnostic> checkSetRules(const DescriptorSet& set, const std::vector<std::string>& arches) {
  std::vector<std::string> shards = arches;
  if (shards.empty()) {
    std::set<std::string> named;
    collectArches(set.packs, named);
    collectArches(set.refusedPacks, named);
    shards.push_back("");
    shards.insert(shards.end(), named.begin(), named.end());
  }
  std::vector<Finding> found;
  for (const std::string& arch : shards) launchSets(set, arch, found);
  std::vector<Diagnostic> out;
  merge(found, out);
  packedTocKeys(set, out);
  return out;
}

ShardContents shardContents(const DescriptorSet& set, const std::string& arch) {
  ShardContents out;
  std::set<std::string> reached;
  for (const Pack& p : set.packs) {
    const std::size_t before = out.kernels.size();
    for (const PackMember& m : p.members)
      if (arch.empty() || inShard(p, m.kernel(), arch)) out.kernels.push_back(&m);
    if (out.kernels.size() == before) continue;
    out.packs.push_back(&p);
    for (const std::string& m : p.matchers) reached.insert(idKey(m));
    if (p.dispatch) reached.insert(idKey(*p.dispatch));
    if (const Engine* e = set.engineOf(p)) {
      reached.insert(idKey(e->id));
      reached.insert(idKey(e->metadata));
      const auto reach = [&](const std::map<std::string, HeuristicRoleMap>& heuristics) {
        for (const auto& [role, table] : heuristics)
          for (const auto& [a, ids] : table)
            for (const std::string& id : ids) reached.insert(idKey(id));
      };
      reach(e->heuristics);
      // A slotted engine ships every slot's heuristics with any of its kernels.
      for (const EngineSlot& slot : e->slots) reach(slot.heuristics);
    }
  }
  auto scan = [&](const auto& items) {
    for (const auto& d : items)
      if (reached.count(idKey(d.id)) != 0) out.generics.push_back(&d);
  };
  scan(set.dispatches);
  scan(set.engines);
  scan(set.metadataSchemas);
  scan(set.matchers);
  scan(set.heuristics);
  std::stable_sort(out.generics.begin(), out.generics.end(),
                   [](const DescriptorInfo* a, const DescriptorInfo* b) { return a->file < b->file; });
  return out;
}

std::vector<const DescriptorInfo*> unreachable(const DescriptorSet& set) {
  const ShardContents any = shardContents(set, "");
  std::set<const DescriptorInfo*> reached(any.generics.begin(), any.generics.end());
  std::vector<const DescriptorInfo*> out;
  auto scan = [&](const auto& items) {
    for (const auto& d : items)
      if (reached.count(&d) == 0) out.push_back(&d);
  };
  scan(set.dispatches);
  scan(set.engines);
  scan(set.metadataSchemas);
  scan(set.matchers);
  scan(set.heuristics);
  std::stable_sort(out.begin(), out.end(),
                   [](const DescriptorInfo* a, const DescriptorInfo* b) { return a->file < b->file; });
  return out;
}

std::vector<Diagnostic> unreachableNote(const DescriptorSet& set) {
  const std::vector<const DescriptorInfo*> left = unreachable(set);
  if (left.empty()) return {};
  std::string names;
  for (const DescriptorInfo* d : left) names += (names.empty() ? "" : ", ") + d->file;
  const bool one = left.size() == 1;
  return {Diagnostic{Severity::Note, codes::UNREACHABLE, "", "",
                     std::to_string(left.size()) + " generic descriptor" + (one ? " is" : "s are") +
                         " reachable from no KDP and ship" + (one ? "s" : "") + " in no shard: " + names}};
}

}  // namespace ukdpack
