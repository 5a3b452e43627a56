// Paths and folders as the runtime judges them, for the shard tools (inspect,
// verify, desk-check, diff): they call the runtime's own rules, so a shard they
// pass is one the runtime loads, and a folder they refuse is one it refuses.
#include <pybind11/stl.h>

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "modules.hpp"
#include "ukdpack/check/validate.hpp"
#include "ukdpack/select/integrity.hpp"

namespace ukdpack::bindings {

namespace py = pybind11;

namespace {

namespace fs = std::filesystem;

// A shard root as the loader holds it: absolute, normalized, no trailing
// separator (so the runtime's messages name the same root).
fs::path loaderRoot(const std::string& given) {
  std::error_code ec;
  fs::path root = fs::absolute(given, ec).lexically_normal();
  if (ec) root = fs::path(given).lexically_normal();
  if (!root.has_filename() && root.has_parent_path() && root != root.root_path()) root = root.parent_path();
  return root;
}

using Resolved = std::pair<std::optional<std::string>, std::optional<std::string>>;

}  // namespace

void bindPaths(py::module_& m) {
  m.def(
      "resolve_library",
      [](const std::string& shardRoot, const std::string& folder, const std::string& library) -> Resolved {
        const fs::path root = loaderRoot(shardRoot);
        // The loader's base folder of a descriptor: the root for a top-level file.
        const fs::path base = folder.empty() || folder == "." ? root : (root / folder).lexically_normal();
        auto located = locateLibrary(root, base, library);
        if (!located) return {std::nullopt, located.error().message};
        if (auto missing = libraryFileMissing(located.value(), library)) return {std::nullopt, missing->message};
        return {located.value().rootRel, std::nullopt};
      },
      py::arg("shard_root"), py::arg("folder"), py::arg("library"),
      "The archive a packed source's `library` names, as the runtime's loadLaunchCode finds it: "
      "(shard-relative path, None), or (None, the runtime's refusal) when it leaves the shard, "
      "goes through a symbolic link or names no file. `folder` is the descriptor's folder, "
      "shard-relative.");
  m.def(
      "no_shard_reason",
      [](const std::string& folder, const std::vector<std::string>& excludeFolders) {
        return noShardReason(folder, excludeFolders);
      },
      py::arg("folder"), py::arg("exclude_folders") = std::vector<std::string>{},
      "Why `folder` holds no shard (empty, or an out root), as ukdpack-validate refuses it; "
      "None when it holds one or is no folder.");
}

}  // namespace ukdpack::bindings
