#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "modules.hpp"
#include "pyjson.hpp"
#include "ukdpack/arch.hpp"
#include "ukdpack/descriptors.hpp"

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
      py::arg("ukd"),
      "Sorted launch names of a UKD (dict or JSON text); empty for a single-launch kernel.");
  m.def(
      "single_launch_source",
      [](const py::handle& ukd) -> py::object {
        const Kernel kernel = kernelFrom(ukd);
        const KernelSource* src = singleLaunchSource(kernel);
        return src == nullptr ? py::none() : fromJson(src->fields);
      },
      py::arg("ukd"), "The one source of a single-launch UKD, or None for a multi-launch UKD.");
  m.def(
      "all_launch_sources",
      [](const py::handle& ukd, const py::function& predicate) {
        const Kernel kernel = kernelFrom(ukd);
        return allLaunchSources(kernel, [&](const KernelSource& s) {
          return predicate(fromJson(s.fields)).cast<bool>();
        });
      },
      py::arg("ukd"), py::arg("predicate"),
      "Whether every launch source of a UKD satisfies predicate(source_dict).");
  m.def(
      "describe_launch_set",
      [](const std::vector<std::string>& names) {
        return describeLaunchSet(std::set<std::string>(names.begin(), names.end()));
      },
      py::arg("names"), "'{a, b}' for a set of launch names, sorted; '{}' when empty.");
  m.def(
      "check_kernel",
      [](const py::handle& ukd, const std::string& file, const std::string& jsonPath) {
        std::vector<Diagnostic> diags;
        parseKernel(toJson(ukd, true), KernelContext{file, jsonPath, {}}, diags);
        py::list out;
        for (const Diagnostic& d : diags) {
          py::dict item;
          item["severity"] = severityName(d.severity);
          item["code"] = d.code;
          item["file"] = d.file;
          item["path"] = d.jsonPath;
          item["message"] = d.message;
          out.append(item);
        }
        return out;
      },
      py::arg("ukd"), py::arg("file") = "", py::arg("json_path") = "$",
      "Every problem the runtime's parser finds in one UKD, as dicts "
      "(severity, code, file, path, message).");
  m.def("is_launch_name", [](const std::string& n) { return isLaunchName(n); }, py::arg("name"));
}

void bindArch(py::module_& m) {
  m.def("bare_arch", [](const std::string& a) { return bareArch(a); }, py::arg("arch"),
        "'gfx90a:xnack-' -> 'gfx90a'.");
  m.def("is_arch_name", [](const std::string& a) { return isArchName(a); }, py::arg("arch"));
  m.def("is_generic_arch", [](const std::string& a) { return isGenericArch(a); }, py::arg("arch"));
  m.def("target_runs_on",
        [](const std::string& t, const std::string& a) { return targetRunsOn(t, a); },
        py::arg("target"), py::arg("arch"),
        "Whether a code object for `target` (bare or generic) runs on `arch`.");
}

}  // namespace ukdpack::bindings
