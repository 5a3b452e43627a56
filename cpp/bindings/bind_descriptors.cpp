#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "modules.hpp"
#include "pyjson.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/arch.hpp"
#include "ukdpack/model/descriptors.hpp"

namespace ukdpack::bindings {

namespace {
Kernel kernelFrom(const py::handle& ukd) {
  const Json j = toJson(ukd, /*parseStrings=*/true);
  std::vector<Diagnostic> diags;
  auto kernel = parseKernel(j, KernelContext{"<ukd>", "$", {}}, diags);
  if (!kernel) raiseDiagnostics(diags);
  return std::move(*kernel);
}
}  // namespace

void bindDescriptors(py::module_& m) {
  m.def(
      "launch_names_of",
      [](const py::handle& ukd) {
        const std::set<std::string> names = launchNamesOf(kernelFrom(ukd));
        return std::vector<std::string>(names.begin(), names.end());
      },
      py::arg("ukd"), "Sorted launch names of a UKD (dict or JSON text); empty for a single-launch kernel.");
  m.def(
      "single_launch_source",
      [](const py::handle& ukd) -> py::object {
        const Kernel kernel = kernelFrom(ukd);
        const KernelSource* src = singleLaunchSource(kernel);
        return src == nullptr ? py::none() : fromJson(src->fields.json());
      },
      py::arg("ukd"), "The one source of a single-launch UKD, or None for a multi-launch UKD.");
  m.def(
      "all_launch_sources",
      [](const py::handle& ukd, const py::function& predicate) {
        const Kernel kernel = kernelFrom(ukd);
        return allLaunchSources(
            kernel, [&](const KernelSource& s) { return predicate(fromJson(s.fields.json())).cast<bool>(); });
      },
      py::arg("ukd"), py::arg("predicate"), "Whether every launch source of a UKD satisfies predicate(source_dict).");
  m.def(
      "describe_launch_set",
      [](const std::vector<std::string>& names) {
        return describeLaunchSet(std::set<std::string>(names.begin(), names.end()));
      },
      py::arg("names"), "'{a, b}' for a set of launch names, sorted; '{}' when empty.");
  m.def(
      "kernel_label", [](const std::string& name, const std::string& id) { return kernelLabel(name, id); },
      py::arg("name"), py::arg("id"), "How every diagnostic names a kernel: \"kernel 'x' (id I)\".");
  m.def(
      "launch_label",
      [](const std::string& name, const std::string& id, const std::optional<std::string>& launch) {
        return launchLabel(name, id, launch.value_or(""));
      },
      py::arg("name"), py::arg("id"), py::arg("launch") = py::none(),
      "How every diagnostic names a kernel's launch: \"kernel 'x' (id I) launch 'produce'\", or "
      "\"kernel 'x' (id I, single launch)\" for None.");
  m.def(
      "check_kernel",
      [](const py::handle& ukd, const std::string& file, const std::string& jsonPath) {
        std::vector<Diagnostic> diags;
        parseKernel(toJson(ukd, true), KernelContext{file, jsonPath, {}}, diags);
        return diagnosticList(diags);
      },
      py::arg("ukd"), py::arg("file") = "", py::arg("json_path") = "$",
      "Every problem the runtime's parser finds in one UKD, as dicts "
      "(severity, code, file, path, message).");
  m.def(
      "complete_metadata",
      [](const py::handle& kmd, const std::string& kmdFile, const py::handle& ukd, const std::string& file,
         const std::string& jsonPath) -> py::tuple {
        // A KMD or kernel that does not parse has its own problems, told where it is read.
        std::vector<Diagnostic> ignored;
        const auto schema = parseMetadataSchema(toJson(kmd, true), KernelContext{kmdFile, "$", {}}, ignored);
        const auto kernel = parseKernel(toJson(ukd, true), KernelContext{file, jsonPath, {}}, ignored);
        if (!schema || !kernel) return py::make_tuple(py::none(), py::list());
        std::vector<Diagnostic> diags;
        const auto completed = completeMetadata(*schema, *kernel, diags);
        return py::make_tuple(completed ? fromJson(*completed) : py::none(), diagnosticList(diags));
      },
      py::arg("kmd"), py::arg("kmd_file"), py::arg("ukd"), py::arg("file"), py::arg("json_path"),
      "(completed metadata or None, diagnostics): a kernel's metadata checked against its "
      "engine's KMD and completed with its defaults, as the runtime loader does.");
  m.def(
      "check_descriptor",
      [](const std::string& type, const py::handle& doc, const std::string& file) {
        std::vector<Diagnostic> diags;
        const Json j = toJson(doc, true);
        const KernelContext ctx{file, "$", {}};
        if (type == "udd")
          parseDispatch(j, ctx, diags);
        else if (type == "ued")
          parseEngine(j, ctx, diags);
        else if (type == "kmd")
          parseMetadataSchema(j, ctx, diags);
        else if (type == "umd")
          parseMatcher(j, ctx, diags);
        else if (type == "uhd")
          parseHeuristic(j, ctx, diags);
        else
          throw py::value_error("check_descriptor reads udd, ued, kmd, umd or uhd, not " + type);
        return diagnosticList(diags);
      },
      py::arg("type"), py::arg("doc"), py::arg("file") = "",
      "Every problem the runtime's parser finds in one generic descriptor (udd, ued, kmd, "
      "umd, uhd), as dicts.");
  m.def(
      "read_json_file",
      [](const std::string& path) -> py::tuple {
        auto doc = readDescriptorFile(path);
        if (!doc) return py::make_tuple(py::none(), utf8Text(doc.error().jsonPath), utf8Text(doc.error().message));
        return py::make_tuple(fromJson(doc.value()), py::none(), py::none());
      },
      py::arg("path"),
      "(value, None, None) for a JSON file read as descriptors are (comments allowed, int64 integers, "
      "finite numbers, no duplicate key, bounded nesting, regular files only), else (None, json_path, "
      "message).");
  m.def("is_launch_name", [](const std::string& n) { return isLaunchName(n); }, py::arg("name"));
}

void bindArch(py::module_& m) {
  m.def("bare_arch", [](const std::string& a) { return bareArch(a); }, py::arg("arch"), "'gfx90a:xnack-' -> 'gfx90a'.");
  m.def("is_arch_name", [](const std::string& a) { return isArchName(a); }, py::arg("arch"));
  m.def(
      "known_targets", [] { return knownTargets(); },
      "Every target of ukdpack's target table (targets.def), in table order.");
  m.def("is_known_target", [](const std::string& a) { return isKnownTarget(a); }, py::arg("arch"));
  m.def(
      "nearest_targets", [](const std::string& a) { return nearestTargets(a); }, py::arg("arch"),
      "The known targets nearest to `arch` (at most two edits), for a 'did you mean'.");
  m.def("is_generic_arch", [](const std::string& a) { return isGenericArch(a); }, py::arg("arch"));
  m.def(
      "target_runs_on", [](const std::string& t, const std::string& a) { return targetRunsOn(t, a); },
      py::arg("target"), py::arg("arch"), "Whether a code object for `target` (bare or generic) runs on `arch`.");
  m.def(
      "target_id_problem", [](const std::string& t) { return targetIdProblem(t); }, py::arg("target_id"),
      "Why `target_id` is no AMD target ID such as 'gfx90a:xnack+' ('' when it is one).");
  m.def(
      "canonical_target_id",
      [](const std::string& t) -> py::object {
        auto id = parseTargetId(t);
        if (!id) return py::none();
        return py::str(id->str());
      },
      py::arg("target_id"), "The target ID with its features in name order, or None.");
  m.def(
      "target_features",
      [](const std::string& t) -> py::dict {
        py::dict out;
        if (auto id = parseTargetId(t)) {
          for (const auto& [name, setting] : id->features) out[py::str(name)] = std::string(1, setting);
        }
        return out;
      },
      py::arg("target_id"), "{feature: '+' or '-'} of a target ID.");
  m.def("generic_targets", []() { return genericTargets(); }, "The generic families, in table order.");
  m.def(
      "generic_members", [](const std::string& g) { return genericMembers(g); }, py::arg("generic"),
      "The member processors of a generic family (empty for none).");
  m.def(
      "generic_family_of", [](const std::string& p) { return genericFamilyOf(p); }, py::arg("processor"),
      "The generic family holding a processor, or ''.");
  m.def(
      "supported_features", [](const std::string& p) { return supportedFeatures(p); }, py::arg("processor"),
      "The target features (xnack, sramecc) a processor supports.");
  m.def(
      "target_id_runs_on", [](const std::string& o, const std::string& d) { return targetIdRunsOn(o, d); },
      py::arg("object"), py::arg("device"),
      "Whether an object built for target ID `object` runs on a device of target ID `device`.");
  m.def(
      "compatible_targets", [](const std::string& d) { return compatibleTargets(d); }, py::arg("device"),
      "The target IDs an entry may be filed under to run on `device`, most specific first.");
}

}  // namespace ukdpack::bindings
