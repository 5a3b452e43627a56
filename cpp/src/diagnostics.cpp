#include "ukdpack/diagnostics.hpp"

#include <algorithm>

namespace ukdpack {

std::string Diagnostic::str() const {
  std::string out;
  for (const std::string* part : {&file, &jsonPath}) {
    if (!part->empty()) {
      out += *part;
      out += ": ";
    }
  }
  out += message;
  return out;
}

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Note:
      return "note";
    case Severity::Warning:
      return "warning";
    case Severity::Error:
      return "error";
  }
  return "error";
}

Diagnostic makeError(std::string code, std::string file, std::string jsonPath,
                     std::string message) {
  return Diagnostic{Severity::Error, std::move(code), std::move(file), std::move(jsonPath),
                    std::move(message)};
}

Diagnostic makeWarning(std::string code, std::string file, std::string jsonPath,
                       std::string message) {
  return Diagnostic{Severity::Warning, std::move(code), std::move(file), std::move(jsonPath),
                    std::move(message)};
}

bool hasErrors(const std::vector<Diagnostic>& diags) {
  return std::any_of(diags.begin(), diags.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

}  // namespace ukdpack
