#include "ukdpack/load/revision.hpp"

#include "ukdpack/base/sha256.hpp"

namespace ukdpack {

namespace {

Json launchDocument(const std::string& name, const KernelSource& src) {
  Json doc = {{"name", name}, {"kind", src.kind}};
  if (isPackedSource(src)) {
    doc["toc_key"] = src.tocKey;
    doc["symbol"] = src.symbol;
    doc["sha256"] = src.sha256;
  } else {
    doc["fields"] = src.fields.json();  // unpacked kinds: whatever identifies the code
  }
  return doc;
}

}  // namespace

Json selectorRevisionDocument(const DescriptorSet& set, const Pack& pack) {
  const Dispatch* dispatch = set.dispatchOf(pack);
  const Engine* engine = set.engineOf(pack);
  Json kernels = Json::array();
  for (const PackMember& m : pack.members) {
    const Kernel& k = m.kernel();
    Json launches = Json::array();
    if (const KernelSource* single = singleLaunchSource(k)) {
      launches.push_back(launchDocument("", *single));
    } else {
      // std::map: sorted by launch name, whatever order the JSON had.
      for (const auto& [name, src] : k.sources) launches.push_back(launchDocument(name, src));
    }
    kernels.push_back({{"id", idKey(k.id)},
                       {"priority", k.priority},
                       {"metadata", m.completedMetadata().is_null() ? k.metadata : m.completedMetadata()},
                       {"arch", k.arch ? Json(*k.arch) : Json(nullptr)},
                       {"launches", std::move(launches)}});
  }
  Json doc = {{"pack", idKey(pack.id)},
              {"arch", pack.arch},
              {"engine", engine != nullptr ? Json{{"id", idKey(engine->id)}, {"name", engine->name}}
                                           : Json(pack.engine ? Json(*pack.engine) : Json(nullptr))},
              {"dispatch_symbol", dispatch != nullptr ? Json(dispatch->dispatchSymbol) : Json(nullptr)},
              {"kernels", std::move(kernels)}};
  // Slots only where there are some, so an unslotted pack's document (and revision) stays as it was.
  if (engine != nullptr && engine->slotted()) {
    Json names = Json::array();
    for (const EngineSlot& s : engine->slots) names.push_back(s.name);
    doc["engine"]["slots"] = std::move(names);
  }
  if (pack.slot) doc["slot"] = *pack.slot;
  return doc;
}

std::string selectorRevision(const DescriptorSet& set, const Pack& pack) {
  const std::string text = selectorRevisionDocument(set, pack).dump();
  return sha256Hex(text.data(), text.size());
}

Result<std::string> selectorRevision(const DescriptorSet& set, const std::string& packId) {
  const Pack* pack = set.findPack(packId);
  if (pack == nullptr) {
    return Result<std::string>::failure(
        makeError(codes::PACK_UNKNOWN, "", "", "no loaded pack has id '" + packId + "'"));
  }
  return Result<std::string>::success(selectorRevision(set, *pack));
}

}  // namespace ukdpack
