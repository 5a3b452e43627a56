#include "ukdpack/base/diagnostics.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

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

const std::vector<DiagnosticCodeInfo>& diagnosticCodes() {
  static const std::vector<DiagnosticCodeInfo> list = {
#define UKD_DIAGNOSTIC(name, meaning) {codes::name, meaning},
#include "ukdpack/base/diagnostic_codes.def"
#undef UKD_DIAGNOSTIC
  };
  return list;
}

Diagnostic makeError(std::string code, std::string file, std::string jsonPath, std::string message) {
  return Diagnostic{Severity::Error, std::move(code), std::move(file), std::move(jsonPath), std::move(message)};
}

Diagnostic makeWarning(std::string code, std::string file, std::string jsonPath, std::string message) {
  return Diagnostic{Severity::Warning, std::move(code), std::move(file), std::move(jsonPath), std::move(message)};
}

bool hasErrors(const std::vector<Diagnostic>& diags) {
  return std::any_of(diags.begin(), diags.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

namespace {

char folded(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance (Levenshtein plus swapped neighbours), ignoring case.
std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = folded(a[i - 1]) == folded(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && folded(a[i - 1]) == folded(b[j - 2]) && folded(a[i - 2]) == folded(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t bestDistance = 0;
  for (const std::string& c : candidates) {
    if (c == word) return "";
    const std::size_t limit = std::max<std::size_t>(1, c.size() / 3);
    // Lengths further apart than the limit cannot match: skipped before the quadratic
    // work, so a hostile megabyte-long key costs nothing here.
    const std::size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap > limit) continue;
    const std::size_t distance = editDistance(word, c);
    if (distance <= limit && (best.empty() || distance < bestDistance)) {
      best = c;
      bestDistance = distance;
    }
  }
  return best;
}

std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string best = closestMatch(word, candidates);
  return best.empty() ? std::string() : "; did you mean '" + best + "'?";
}

}  // namespace ukdpack
