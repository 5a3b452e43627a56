// Kernel, Launch and Source: typed, read-only views of a loaded kernel, built
// on the launch helpers. The keys a UKD holds its launches under are named here
// and in the C++ reader only: Python reads launches through these views (or,
// for a document the runtime does not read, through document_launches).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "modules.hpp"
#include "pyjson.hpp"
#include "views.hpp"

namespace ukdpack::bindings {

namespace {

constexpr const char* kSingleKey = "kernel_source";  // a single-launch kernel's source
constexpr const char* kMultiKey = "sources";         // a multi-launch kernel's map of launches

struct SourceView {
  std::shared_ptr<const void> owner;
  const KernelSource* source;
  std::string jsonPath;
};

struct LaunchView {
  std::shared_ptr<const void> owner;
  const Kernel* kernel;
  std::optional<std::string> name;  // nullopt: the single launch
  const KernelSource* source;
};

struct KernelView {
  std::shared_ptr<const void> owner;
  const Kernel* kernel;
};

// Where the launches sit: `kernel_source` for a single launch, else `sources`.
const char* launchesKey(const Kernel& k) { return singleLaunchSource(k) != nullptr ? kSingleKey : kMultiKey; }

std::string launchesPath(const Kernel& k) { return jsonPathKey(k.jsonPath, launchesKey(k)); }

std::string launchPath(const Kernel& k, const std::optional<std::string>& name) {
  return name ? jsonPathKey(launchesPath(k), *name) : launchesPath(k);
}

// Every launch, sorted by name; the single launch alone for a single-launch kernel.
std::vector<LaunchView> launchesOf(const KernelView& v) {
  std::vector<LaunchView> out;
  if (const KernelSource* single = singleLaunchSource(*v.kernel)) {
    out.push_back({v.owner, v.kernel, std::nullopt, single});
    return out;
  }
  for (const std::string& name : launchNamesOf(*v.kernel))
    out.push_back({v.owner, v.kernel, name, &v.kernel->sources.at(name)});
  return out;
}

SourceView sourceOf(const LaunchView& l) { return {l.owner, l.source, launchPath(*l.kernel, l.name)}; }

std::optional<std::string> orNone(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

// A UKD document's launches as written, judged by nothing: (name or None, JSON
// path, value) sorted by name. `kernel_source` wins when it is there and not
// null; a `sources` that is no mapping holds none.
py::list documentLaunches(const py::object& doc, const std::string& path) {
  py::list out;
  const py::object single = doc.attr("get")(kSingleKey);
  if (!single.is_none()) {
    out.append(py::make_tuple(py::none(), jsonPathKey(path, kSingleKey), single));
    return out;
  }
  const py::object byName = doc.attr("get")(kMultiKey);
  const py::object mapping = py::module_::import("collections.abc").attr("Mapping");
  if (!py::isinstance(byName, mapping)) return out;
  std::vector<std::pair<std::string, py::object>> named;
  for (const auto& key : byName) named.emplace_back(std::string(py::str(key)), py::reinterpret_borrow<py::object>(key));
  std::sort(named.begin(), named.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::string mapPath = jsonPathKey(path, kMultiKey);
  for (const auto& [name, key] : named) out.append(py::make_tuple(name, jsonPathKey(mapPath, name), byName[key]));
  return out;
}

}  // namespace

std::vector<std::string> sortedLaunches(const Kernel& k) {
  const std::set<std::string> names = launchNamesOf(k);
  return std::vector<std::string>(names.begin(), names.end());
}

bool isPacked(const Kernel& k) { return allLaunchSources(k, isPackedSource); }

std::vector<std::string> kindsOf(const Kernel& k) {
  std::set<std::string> kinds;
  allLaunchSources(k, [&](const KernelSource& s) {
    kinds.insert(s.kind);
    return true;
  });
  return std::vector<std::string>(kinds.begin(), kinds.end());
}

std::optional<std::pair<std::string, std::optional<std::string>>> launchAt(const DescriptorSet& set,
                                                                           const std::string& file,
                                                                           const std::string& jsonPath) {
  const auto holds = [&](const std::string& path) {
    if (jsonPath.compare(0, path.size(), path) != 0) return false;
    return jsonPath.size() == path.size() || jsonPath[path.size()] == '.' || jsonPath[path.size()] == '[';
  };
  for (const Pack& p : set.packs) {
    for (const PackMember& m : p.members) {
      const Kernel& k = m.kernel();
      if (k.file != file || !holds(k.jsonPath)) continue;
      if (singleLaunchSource(k) != nullptr) {
        if (holds(launchesPath(k))) return std::make_pair(k.id, std::optional<std::string>());
        continue;
      }
      for (const auto& entry : k.sources)
        if (holds(launchPath(k, entry.first))) return std::make_pair(k.id, std::optional<std::string>(entry.first));
    }
  }
  return std::nullopt;
}

namespace {

// A document as written: the view keeps its file's text alive (not the set it was
// loaded with, which a pack frees once its plans are made).
struct DocumentView {
  JsonText text;
};

}  // namespace

py::object documentOf(const JsonText& document) {
  if (document.text().empty()) return fromJson(document.json());
  return py::cast(DocumentView{document});
}

py::object kernelView(std::shared_ptr<const void> owner, const Kernel& kernel) {
  return py::cast(KernelView{std::move(owner), &kernel});
}

py::list codeLaunchRows(const std::shared_ptr<const DescriptorSet>& set, const std::vector<std::string>& kinds) {
  const std::set<std::string, std::less<>> wanted(kinds.begin(), kinds.end());
  py::list out;
  for (const Pack& p : set->packs) {
    const py::str packFile(p.file);
    for (const PackMember& m : p.members) {
      const Kernel& k = m.kernel();
      py::object kernelFile, kernelPath, id, name;  // made once per kernel, when it has such a launch
      for (const LaunchView& l : launchesOf(KernelView{set, &k})) {
        if (wanted.find(l.source->kind) == wanted.end()) continue;
        if (!kernelFile) {
          kernelFile = py::str(k.file);
          kernelPath = py::str(k.jsonPath);
          id = py::str(k.id);
          name = py::str(k.name);
        }
        SourceView source = sourceOf(l);
        py::str sourcePath(source.jsonPath);
        py::object file = l.source->file ? py::object(py::str(*l.source->file)) : py::object(py::none());
        out.append(py::make_tuple(packFile, kernelFile, kernelPath, id, name, std::move(sourcePath), l.source->kind,
                                  std::move(file), py::cast(std::move(source))));
      }
    }
  }
  return out;
}

py::dict roleMapsDict(const std::map<std::string, HeuristicRoleMap>& roles) {
  py::dict out;
  for (const auto& [role, table] : roles) {
    py::dict byArch;
    for (const auto& [arch, ids] : table) byArch[py::str(arch)] = ids;
    out[py::str(role)] = byArch;
  }
  return out;
}

py::list slotViews(const Engine& engine) {
  py::list out;
  for (const EngineSlot& slot : engine.slots) {
    py::dict item;
    item["name"] = slot.name;
    item["knobs"] = slot.knobs;
    item["knob_ids"] = slot.knobIds();
    item["heuristics"] = roleMapsDict(slot.heuristics);
    item["json_path"] = slot.jsonPath;
    out.append(item);
  }
  return out;
}

py::object slotOrNone(const std::optional<std::string>& slot) {
  return slot ? py::object(py::str(*slot)) : py::object(py::none());
}

void bindViews(py::module_& m) {
  py::class_<DocumentView>(m, "Document",
                           "A descriptor's JSON as written (its file's text, which this keeps alive), read when asked.")
      .def(
          "value", [](const DocumentView& d) { return fromJson(d.text.json()); },
          "The document as Python objects, read from its text (comments stepped over): a new dict each time.")
      .def("__repr__", [](const DocumentView& d) {
        return "<ukdpack Document of " + std::to_string(d.text.text().size()) + " bytes>";
      });
  py::class_<SourceView>(m, "Source", "One kernel source as the runtime read it (read-only).")
      .def_property_readonly("kind", [](const SourceView& s) { return s.source->kind; })
      .def_property_readonly(
          "fields", [](const SourceView& s) { return fromJson(s.source->fields.json()); },
          "The entry as written, kind included (a new dict each time).")
      .def_property_readonly("json_path", [](const SourceView& s) { return s.jsonPath; })
      .def_property_readonly(
          "file", [](const SourceView& s) { return s.source->file; },
          "The file its kind's file field names, as written (None for a kind without one).")
      .def_property_readonly(
          "library", [](const SourceView& s) { return orNone(s.source->library); },
          "A packed source's archive, relative to its descriptor (None unpacked).")
      .def_property_readonly("toc_key", [](const SourceView& s) { return orNone(s.source->tocKey); })
      .def_property_readonly("symbol", [](const SourceView& s) { return orNone(s.source->symbol); })
      .def_property_readonly("sha256", [](const SourceView& s) { return orNone(s.source->sha256); })
      .def_property_readonly(
          "targets", [](const SourceView& s) { return s.source->targets; },
          "A packed launch's feature variants: target ID -> sha256 ({}: one object).")
      .def(
          "__eq__", [](const SourceView& a, const SourceView& b) { return a.source == b.source; }, py::is_operator())
      .def("__hash__", [](const SourceView& s) { return std::hash<const void*>()(s.source); })
      .def("__repr__",
           [](const SourceView& s) { return "<ukdpack Source " + s.source->kind + " at " + s.jsonPath + ">"; });

  py::class_<LaunchView>(m, "Launch", "One launch of a kernel: its name (None: the single launch) and source.")
      .def_property_readonly("name", [](const LaunchView& l) { return l.name; })
      .def_property_readonly("source", &sourceOf)
      .def_property_readonly("json_path", [](const LaunchView& l) { return launchPath(*l.kernel, l.name); })
      .def_property_readonly(
          "label", [](const LaunchView& l) { return launchLabel(*l.kernel, l.name.value_or("")); },
          "How every diagnostic names the launch: \"kernel 'x' (id I) launch 'produce'\".")
      .def(
          "__eq__", [](const LaunchView& a, const LaunchView& b) { return a.source == b.source; }, py::is_operator())
      .def("__hash__", [](const LaunchView& l) { return std::hash<const void*>()(l.source); })
      .def("__repr__",
           [](const LaunchView& l) { return "<ukdpack Launch " + launchLabel(*l.kernel, l.name.value_or("")) + ">"; });

  py::class_<KernelView>(m, "Kernel", "A loaded kernel (UKD), read through the launch helpers (read-only).")
      .def_property_readonly("id", [](const KernelView& k) { return k.kernel->id; })
      .def_property_readonly("name", [](const KernelView& k) { return k.kernel->name; })
      .def_property_readonly("file", [](const KernelView& k) { return k.kernel->file; })
      .def_property_readonly("json_path", [](const KernelView& k) { return k.kernel->jsonPath; })
      .def_property_readonly(
          "launch_names", [](const KernelView& k) { return sortedLaunches(*k.kernel); },
          "Sorted launch names; empty for a single-launch kernel.")
      .def_property_readonly(
          "single_launch_source",
          [](const KernelView& k) -> std::optional<SourceView> {
            const KernelSource* single = singleLaunchSource(*k.kernel);
            if (single == nullptr) return std::nullopt;
            return SourceView{k.owner, single, launchesPath(*k.kernel)};
          },
          "The one source of a single-launch kernel, or None.")
      .def_property_readonly("launches", &launchesOf,
                             "Every launch sorted by name; a single-launch kernel's one launch is named None.")
      .def(
          "launch",
          [](const KernelView& k, const std::optional<std::string>& name) -> std::optional<LaunchView> {
            for (const LaunchView& l : launchesOf(k))
              if (l.name == name) return l;
            return std::nullopt;
          },
          py::arg("name") = py::none(), "The launch of this name (None: the single launch), or None.")
      .def(
          "all_launch_sources",
          [](const KernelView& k, const std::function<bool(const SourceView&)>& predicate) {
            return allLaunchSources(*k.kernel, [&](const KernelSource& s) {
              // The source's path only matters to the predicate's messages: look it up.
              for (const LaunchView& l : launchesOf(k))
                if (l.source == &s) return predicate(sourceOf(l));
              return predicate(SourceView{k.owner, &s, launchesPath(*k.kernel)});
            });
          },
          py::arg("predicate"), "Whether every launch's source satisfies predicate(source).")
      .def_property_readonly(
          "launches_key", [](const KernelView& k) { return std::string(launchesKey(*k.kernel)); },
          "The key of the UKD holding its launches ('kernel_source' or 'sources').")
      .def_property_readonly(
          "launches_path", [](const KernelView& k) { return launchesPath(*k.kernel); },
          "The JSON path of its launches (that key under the kernel's path).")
      .def_property_readonly(
          "packed", [](const KernelView& k) { return isPacked(*k.kernel); },
          "Whether every launch has a packed code object.")
      .def_property_readonly(
          "kinds", [](const KernelView& k) { return kindsOf(*k.kernel); },
          "The kinds of its launches' sources, sorted.")
      .def(
          "__eq__", [](const KernelView& a, const KernelView& b) { return a.kernel == b.kernel; }, py::is_operator())
      .def("__hash__", [](const KernelView& k) { return std::hash<const void*>()(k.kernel); })
      .def("__repr__", [](const KernelView& k) { return "<ukdpack Kernel " + kernelLabel(*k.kernel) + ">"; });

  m.def("document_launches", &documentLaunches, py::arg("doc"), py::arg("json_path") = "$",
        "(launch name or None, JSON path, source as written) of each launch of a UKD document the "
        "runtime does not read (one the packer builds or rewrites), sorted by name; a 'sources' that "
        "is no mapping holds none. Nothing is judged.");
  m.def(
      "document_form_version",
      [](const py::object& doc) {
        // As the reader says of a kernel written without a version: the form's own.
        return py::bool_(doc.attr("__contains__")(kMultiKey)) ? "1.1" : "1.0";
      },
      py::arg("doc"),
      "The version a UKD document's form needs: '1.1' for a multi-launch kernel's 'sources', else '1.0'.");
}

}  // namespace ukdpack::bindings
