#include "ukdpack/validate.hpp"

#include <algorithm>
#include <system_error>
#include <map>
#include <set>

#include "paths.hpp"
#include "ukdpack/arch.hpp"
#include "ukdpack/set_rules.hpp"

namespace ukdpack {

namespace {

std::string plural(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Every arch some pack or kernel names; {""} when none does. Each is one
// shard's view for the state manager.
std::vector<std::string> passArches(const DescriptorSet& set) {
  std::vector<std::string> named = namedArches(set);
  if (named.empty()) named.push_back("");
  return named;
}

}  // namespace

std::optional<std::string> noShardReason(const std::filesystem::path& folder,
                                         const std::vector<std::string>& excludeFolders) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return std::nullopt;
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
  std::vector<Diagnostic> ignored;  // what the walk skips, the load reports
  const std::vector<WalkedFile> files = walkRoot(folder, ignored, excludeFolders);
  // A descriptor the walk refused unread (a FIFO, a link out of the root) is there: the
  // load says what is wrong with it.
  if (files.empty() && hasErrors(ignored)) return std::nullopt;
  if (files.empty()) return "holds no shard: no descriptor file (<name>.<type>.json) lies under it" + hint;
  if (shards.empty()) return std::nullopt;
  for (const WalkedFile& f : files)
    if (shards.count(f.rel.substr(0, f.rel.find('/'))) == 0) return std::nullopt;
  std::string listed;
  for (const std::string& s : shards) listed += (listed.empty() ? "" : ", ") + s;
  return "holds no shard: its descriptors lie in the shard folder" + std::string(shards.size() == 1 ? " " : "s ") +
         listed + " below it (it is an out root; a shard is OUT_ROOT/<arch>/)" + hint;
}

ValidationReport validateRoots(const std::vector<std::filesystem::path>& roots, const ValidateOptions& options) {
  ValidationReport report;
  // A wrong folder is one clear line, not an empty pass or a heap of duplicate ids.
  for (const auto& root : roots) {
    if (auto why = noShardReason(root, options.loader.excludeFolders))
      report.diagnostics.push_back(makeError("NO_SHARD", root.string(), "", *why));
  }
  if (!report.diagnostics.empty()) {
    report.roots = roots;
    return report;  // ok stays false
  }
  LoaderOptions loader = options.loader;
  loader.sourceFiles = true;  // a root may be authored: the files it names must be there
  const auto shared = std::make_shared<const DescriptorSet>(loadRoots(roots, loader));
  const DescriptorSet& set = *shared;
  // One budget of decompressed bytes for the whole run: a hostile archive
  // gains nothing from naming many arches (one pass each).
  const auto cache =
      std::make_shared<ArchiveCache>(ArchiveCache::kDefaultMaxVerifiedBytes, set.maxDecompressedBytes);
  report.roots = set.roots;
  report.diagnostics = set.diagnostics;
  for (const Diagnostic& d : set.diagnostics)
    if (d.code == "PACK_DROPPED" || d.code == "ENGINE_DROPPED") ++report.packsDropped;
  report.packs = set.packs.size();
  for (const Pack& p : set.packs) report.kernels += p.members.size();
  for (Diagnostic& d : checkSetRules(set)) report.diagnostics.push_back(std::move(d));
  for (Diagnostic& d : unreachableNote(set)) report.diagnostics.push_back(std::move(d));

  const std::vector<std::string> arches = passArches(set);
  const bool perArch = arches.size() > 1 || !arches.front().empty();
  // Findings of several passes merge: one line, the arches it holds on.
  std::vector<std::pair<Diagnostic, std::vector<std::string>>> found;
  auto note = [&](const Diagnostic& d, const std::string& arch) {
    for (auto& [have, on] : found) {
      if (have.code == d.code && have.file == d.file && have.jsonPath == d.jsonPath && have.message == d.message) {
        on.push_back(arch);
        return false;
      }
    }
    found.emplace_back(d, std::vector<std::string>{arch});
    return true;
  };
  std::set<std::string> engines;
  std::set<std::string> keptIds;
  std::set<std::string> dropKeys;  // kernel id, code, reason
  bool expectedFound = false;
  for (const std::string& arch : arches) {
    const Registry registry = stubRegistry(set, arch);
    const StateManager manager(shared, registry, arch, cache);
    for (const Diagnostic& d : manager.diagnostics()) note(d, arch);
    for (const DroppedKernel& d : manager.dropped()) {
      if (dropKeys.insert(d.kernelId + "\n" + d.code + "\n" + d.reason).second) report.dropped.push_back(d);
    }
    for (const std::string& line : manager.log())
      if (std::find(report.log.begin(), report.log.end(), line) == report.log.end()) report.log.push_back(line);

    for (const KernelDefinition& def : manager.kept()) {
      keptIds.insert(idKey(def.kernel->id));
      if (def.engine != nullptr) {
        engines.insert(def.engine->name);
        if (options.expectEngine &&
            (def.engine->name == *options.expectEngine || idKey(def.engine->id) == idKey(*options.expectEngine))) {
          expectedFound = true;
        }
      }
      // Only packed kernels have code to check; an authored tree has none yet.
      const bool packed = allLaunchSources(*def.kernel, [](const KernelSource& s) { return s.kind == "kpack"; });
      if (!packed) continue;
      const std::set<std::string> names = launchNamesOf(*def.kernel);
      std::vector<std::optional<std::string>> launches(names.begin(), names.end());
      if (launches.empty()) launches.push_back(std::nullopt);
      for (const auto& launch : launches) {
        auto code = manager.loadLaunchCode(def.kernel->id, launch, arch);
        if (code) {
          ++report.launchesChecked;
        } else {
          note(code.error(), arch);
        }
      }
    }
  }
  for (auto& [d, on] : found) {
    Diagnostic out = d;
    if (perArch && on.size() < arches.size()) {
      std::string listed;
      for (const std::string& a : on) listed += (listed.empty() ? "" : ", ") + a;
      out.message += " (on " + listed + ")";
    }
    report.diagnostics.push_back(std::move(out));
  }
  // A kernel is kept when some shard keeps it and none drops it.
  std::set<std::string> droppedIds;
  for (const DroppedKernel& d : report.dropped) droppedIds.insert(idKey(d.kernelId));
  for (const std::string& id : keptIds) report.kept += droppedIds.count(id) == 0 ? 1 : 0;
  report.engines.assign(engines.begin(), engines.end());
  if (options.expectEngine && !expectedFound) {
    std::string loaded;
    for (const std::string& e : report.engines) loaded += (loaded.empty() ? "'" : ", '") + e + "'";
    report.diagnostics.push_back(makeError(
        "ENGINE_MISSING", "", "",
        "expected engine '" + *options.expectEngine + "' to load with at least one kept kernel; " +
            (loaded.empty() ? std::string("no engine has a kept kernel") : "engines with kept kernels: " + loaded)));
  }
  // A pack without a dispatch is dropped by the runtime by design: not a failure here.
  const bool failingDrop = std::any_of(report.dropped.begin(), report.dropped.end(),
                                       [](const DroppedKernel& d) { return d.code != "NO_DISPATCH"; });
  report.ok = !hasErrors(report.diagnostics) && !failingDrop && report.packsDropped == 0;
  return report;
}

std::string ValidationReport::summary() const {
  std::size_t errors = 0;
  for (const Diagnostic& d : diagnostics)
    if (d.severity == Severity::Error) ++errors;
  const std::string counts = plural(roots.size(), "root", "roots") + ", " + plural(packs, "pack", "packs") + ", " +
                             plural(kernels, "kernel", "kernels") + " (" + std::to_string(kept) + " kept, " +
                             plural(launchesChecked, "launch", "launches") + " verified)";
  if (ok) return "ok: " + counts;
  std::string out = "failed: " + plural(errors, "error", "errors");
  const auto failing = static_cast<std::size_t>(std::count_if(
      dropped.begin(), dropped.end(), [](const DroppedKernel& d) { return d.code != "NO_DISPATCH"; }));
  if (failing != 0) out += ", " + plural(failing, "kernel dropped", "kernels dropped");
  if (packsDropped != 0) out += ", " + plural(packsDropped, "pack dropped", "packs dropped");
  return out + " (" + counts + ")";
}

Json ValidationReport::toJson() const {
  Json diags = Json::array();
  for (const Diagnostic& d : diagnostics) {
    diags.push_back({{"severity", severityName(d.severity)},
                     {"code", d.code},
                     {"file", d.file},
                     {"path", d.jsonPath},
                     {"message", d.message}});
  }
  Json drops = Json::array();
  for (const DroppedKernel& d : dropped) {
    drops.push_back({{"kernel_id", d.kernelId}, {"name", d.kernelName}, {"pack", d.packId},
                     {"pack_name", d.packName}, {"file", d.file}, {"path", d.jsonPath},
                     {"dispatch_symbol", d.dispatchSymbol}, {"code", d.code}, {"reason", d.reason}});
  }
  Json rootList = Json::array();
  for (const auto& r : roots) rootList.push_back(r.string());
  return {{"ok", ok},
          {"roots", rootList},
          {"packs", packs},
          {"kernels", kernels},
          {"kept", kept},
          {"launches_verified", launchesChecked},
          {"packs_dropped", packsDropped},
          {"engines", engines},
          {"dropped", drops},
          {"log", log},
          {"diagnostics", diags},
          {"summary", summary()}};
}

}  // namespace ukdpack
