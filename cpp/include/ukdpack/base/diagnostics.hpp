// Diagnostics and results: the runtime never throws through its public API;
// every failure is a Diagnostic naming file, JSON path and finding.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ukdpack {

enum class Severity { Note, Warning, Error };

// Every diagnostic code, as a constant of its own name: codes::DUPLICATE_ID is
// "DUPLICATE_ID". The one list is diagnostic_codes.def; code is emitted only
// through these names, so a code no list holds does not compile.
namespace codes {
#define UKD_DIAGNOSTIC(name, meaning) inline constexpr char name[] = #name;
#include "ukdpack/base/diagnostic_codes.def"
#undef UKD_DIAGNOSTIC
}  // namespace codes

// One row of the list: the code and what it means, in one line.
struct DiagnosticCodeInfo {
  const char* name;
  const char* meaning;
};
// Every code of diagnostic_codes.def, in its (name) order.
const std::vector<DiagnosticCodeInfo>& diagnosticCodes();

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string code;      // stable machine-readable code, e.g. "DIGEST_MISMATCH"
  std::string file;      // the file it concerns (as given to the loader)
  std::string jsonPath;  // "$.kernelDescriptors[0].sources.produce", or empty
  std::string message;   // a sentence: what was expected, what was found

  // "<file>: <json path>: <message>", leaving out empty parts.
  std::string str() const;
};

const char* severityName(Severity s);

Diagnostic makeError(std::string code, std::string file, std::string jsonPath, std::string message);
Diagnostic makeWarning(std::string code, std::string file, std::string jsonPath, std::string message);

bool hasErrors(const std::vector<Diagnostic>& diags);

// The candidate closest to `word` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours, letters compared ignoring case) when it is
// close enough to be a slip of the keyboard: at most a third of the candidate's
// length, at least one edit. Empty when none is, or when `word` is a candidate.
std::string closestMatch(std::string_view word, const std::vector<std::string>& candidates);
// "; did you mean 'x'?" for the closest match of `word`, or "" when there is none:
// appended to a refusal of an unknown name (key, kind, id).
std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates);

// `s` as a message may quote it: UTF-8 text on one line that drives no terminal.
// Each byte that is not UTF-8 and each control character is written as Python
// writes it in a string literal (\xff, \n, \x1b, \u2028), as the packer words names.
std::string escapedText(std::string_view s);
// `s` as it is when it is UTF-8 text, else escapedText(s): what a JSON string or a
// Python str can hold, whatever bytes a name or a parser's message brought in.
std::string utf8Text(std::string s);

// A value or the diagnostic that explains why there is none.
template <class T>
class Result {
 public:
  static Result success(T value) { return Result(std::move(value)); }
  static Result failure(Diagnostic d) { return Result(std::move(d)); }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const Diagnostic& error() const { return std::get<Diagnostic>(state_); }

 private:
  explicit Result(T v) : state_(std::move(v)) {}
  explicit Result(Diagnostic d) : state_(std::move(d)) {}
  std::variant<T, Diagnostic> state_;
};

}  // namespace ukdpack
