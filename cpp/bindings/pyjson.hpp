// Conversions between Python objects and nlohmann::json for the bindings.
#pragma once

#include <pybind11/pybind11.h>

#include "ukdpack/model/descriptors.hpp"

namespace ukdpack::bindings {

namespace py = pybind11;

// dict/list/str/int/float/bool/None -> Json; a str is parsed as JSON text
// (comments allowed) when `parseStrings` is set. Raises ValueError on failure.
Json toJson(const py::handle& obj, bool parseStrings = false);

py::object fromJson(const Json& value);

// A diagnostic as Python sees it: {severity, code, file, path, message}.
py::dict diagnosticDict(const Diagnostic& d);
py::list diagnosticList(const std::vector<Diagnostic>& diags);

// Raises ValueError carrying every diagnostic, one per line.
[[noreturn]] void raiseDiagnostics(const std::vector<Diagnostic>& diags);

}  // namespace ukdpack::bindings
