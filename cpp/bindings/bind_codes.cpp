// The diagnostic codes (diagnostic_codes.def), as the packer reads them: Code.NAME
// for each code it emits or compares, and the list with each code's meaning.
#include <pybind11/pybind11.h>

#include "modules.hpp"
#include "ukdpack/base/diagnostics.hpp"

namespace py = pybind11;

namespace ukdpack::bindings {

namespace {
// The names as attributes of a class: Python code says Code.DUPLICATE_ID, never the
// string, and mypy checks the name against _runtime.pyi.
struct CodeNames {};
}  // namespace

void bindCodes(py::module_& m) {
  py::class_<CodeNames> names(m, "Code", "Every diagnostic code as a str attribute of its own name.");
  for (const DiagnosticCodeInfo& c : diagnosticCodes()) names.attr(c.name) = py::str(c.name);
  m.def(
      "diagnostic_codes",
      []() {
        py::list out;
        for (const DiagnosticCodeInfo& c : diagnosticCodes()) out.append(py::make_tuple(c.name, c.meaning));
        return out;
      },
      "Every diagnostic code and its one-line meaning, [(code, meaning)], in name order.");
}

}  // namespace ukdpack::bindings
