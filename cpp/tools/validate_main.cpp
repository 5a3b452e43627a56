// ukdpack-validate ROOT... [--json] [--expect-engine NAME]...: loads descriptor
// roots (or shards) as the runtime does, with stub handlers for every symbol
// they name, and verifies the code of every launch of every kept packed kernel.
// Exit 0 ok, 1 any error or drop (a ROOT holding no shard included), 2 usage, a
// ROOT that is no folder, or internal failure (docs/cli.md).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/check/validate.hpp"

#ifndef UKDPACK_VERSION
#error "UKDPACK_VERSION must be defined (CMakeLists.txt passes the project version)"
#endif

namespace {

constexpr const char* kUsage =
    "usage: ukdpack-validate ROOT... [--json] [--expect-engine NAME]... [--exclude-folder NAME]... [--authored]\n"
    "                        [--max-decompressed-bytes N] [--version]\n"
    "  ROOT               a descriptor root or packed shard (OUT_ROOT/<arch>/)\n"
    "  --json             print the verdict as JSON on stdout\n"
    "  --expect-engine N  fail unless engine N (UED name or id) loads with a kept kernel (repeatable)\n"
    "  --exclude-folder X leave out folders named X (repeatable)\n"
    "  --authored         the roots are authored trees, not shards: a packed source is refused and a\n"
    "                     version newer than this build is an error (what `ukdpack validate` applies)\n"
    "  --max-decompressed-bytes N\n"
    "                     bytes the run may decompress from archives in all (default 64 GiB);\n"
    "                     past it a launch fails DECOMPRESS_BUDGET\n"
    "  --version          print the version and exit\n"
    "Exit status: 0 ok, 1 a finding, 2 usage or a ROOT that is no folder.\n";

int usage(const std::string& why) {
  std::cerr << "ukdpack-validate: error: " << why << "\n" << kUsage;
  return 2;
}

// A byte count as given: decimal digits only, at most 2^64 - 1.
std::optional<std::uint64_t> byteCount(const std::string& text) {
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos) return {};
  errno = 0;
  const unsigned long long n = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return {};
  return static_cast<std::uint64_t>(n);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::filesystem::path> roots;
    ukdpack::ValidateOptions options;
    bool json = false;
    bool positionalOnly = false;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (!positionalOnly && arg == "--") {
        positionalOnly = true;
      } else if (!positionalOnly && (arg == "-h" || arg == "--help")) {
        std::cout << kUsage;
        return 0;
      } else if (!positionalOnly && arg == "--version") {
        std::cout << "ukdpack-validate " UKDPACK_VERSION "\n";
        return 0;
      } else if (!positionalOnly && arg == "--json") {
        json = true;
      } else if (!positionalOnly && arg == "--expect-engine") {
        if (i + 1 >= argc || std::string(argv[i + 1]).empty()) return usage("--expect-engine needs an engine name");
        options.expectEngines.emplace_back(argv[++i]);
      } else if (!positionalOnly && arg.rfind("--expect-engine=", 0) == 0) {
        if (arg.size() == 16) return usage("--expect-engine needs an engine name");
        options.expectEngines.push_back(arg.substr(16));
      } else if (!positionalOnly && arg == "--authored") {
        options.loader.authored = true;
      } else if (!positionalOnly &&
                 (arg == "--max-decompressed-bytes" || arg.rfind("--max-decompressed-bytes=", 0) == 0)) {
        std::string value;
        if (arg.size() > 24) {
          value = arg.substr(25);
        } else if (i + 1 < argc) {
          value = argv[++i];
        } else {
          return usage("--max-decompressed-bytes needs a byte count");
        }
        const auto n = byteCount(value);
        if (!n) return usage("--max-decompressed-bytes: expected a byte count, found '" + value + "'");
        options.loader.maxDecompressedBytes = *n;
      } else if (!positionalOnly && arg == "--exclude-folder") {
        if (i + 1 >= argc) return usage("--exclude-folder needs a folder name");
        options.loader.excludeFolders.emplace_back(argv[++i]);
      } else if (!positionalOnly && arg.size() > 1 && arg[0] == '-') {
        return usage("unknown option '" + arg + "'");
      } else {
        roots.emplace_back(arg);
      }
    }
    if (roots.empty()) return usage("name at least one ROOT");

    const ukdpack::ValidationReport report = ukdpack::validateRoots(roots, options);
    if (json) {
      // Strings are UTF-8 by now; should one not be, the report stays JSON all the same.
      std::cout << report.toJson().dump(2, ' ', false, ukdpack::Json::error_handler_t::replace) << "\n";
    } else {
      for (const ukdpack::Diagnostic& d : report.diagnostics) {
        // One line per finding, whatever a name holds (a newline, an escape, bytes not UTF-8).
        std::cerr << "ukdpack-validate: " << ukdpack::severityName(d.severity) << ": " << ukdpack::escapedText(d.str())
                  << "\n";
      }
      for (const std::string& line : report.slotLines())
        std::cout << "ukdpack-validate: " << ukdpack::escapedText(line) << "\n";
      std::cout << "ukdpack-validate: " << report.summary() << "\n";
    }
    // A ROOT that is not there is a command line to fix, not a finding about a tree.
    const bool noRoot =
        std::any_of(report.diagnostics.begin(), report.diagnostics.end(),
                    [](const ukdpack::Diagnostic& d) { return d.code == ukdpack::codes::ROOT_INVALID; });
    return noRoot ? 2 : report.exitCode();
  } catch (const std::exception& e) {
    std::cerr << "ukdpack-validate: internal error: " << e.what() << "\n";
    return 2;
  } catch (...) {
    std::cerr << "ukdpack-validate: internal error\n";
    return 2;
  }
}
