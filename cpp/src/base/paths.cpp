#include "base/paths.hpp"

#include <system_error>

namespace ukdpack::detail {

namespace fs = std::filesystem;

std::string relativeTo(const fs::path& root, const fs::path& p) {
  const fs::path rel = p.lexically_relative(root);
  std::string out = rel.generic_string();
  return out == "." ? "" : out;
}

namespace {

// weakly_canonical(joined), its folder resolved once per `folders`: a last component
// that is no link resolves to itself, so only the folder's links need resolving.
fs::path realPath(const fs::path& joined, RealFolders* folders, bool& regularFile, std::error_code& ec) {
  if (folders == nullptr || !joined.has_parent_path() || !joined.has_filename()) {
    return fs::weakly_canonical(joined, ec);
  }
  std::error_code statEc;
  const fs::file_status st = fs::symlink_status(joined, statEc);
  regularFile = fs::is_regular_file(st);
  const bool absent = st.type() == fs::file_type::not_found;
  if (fs::is_symlink(st) || (statEc && !absent)) return fs::weakly_canonical(joined, ec);
  const fs::path parent = joined.parent_path();
  auto it = folders->find(parent.native());
  if (it == folders->end()) {
    fs::path real = fs::weakly_canonical(parent, ec);
    if (ec) return {};
    it = folders->emplace(parent.native(), std::move(real)).first;
  }
  return it->second / joined.filename();
}

}  // namespace

PathVerdict checkContained(const fs::path& root, const fs::path& baseDir, const std::string& name, bool noSymlinkHop,
                           const fs::path* realRoot, RealFolders* folders) {
  PathVerdict v;
  std::string n = name;
  for (char& c : n)
    if (c == '\\') c = '/';
  if (n.empty() || n.front() == '/' || (n.size() > 1 && n[1] == ':')) {
    v.problem = PathProblem::Absolute;
    return v;
  }
  const fs::path normRoot = root.lexically_normal();
  v.joined = (baseDir / fs::path(n)).lexically_normal();
  const fs::path rel = v.joined.lexically_relative(normRoot);
  if (rel.empty() || *rel.begin() == "..") {
    v.problem = PathProblem::Escapes;
    return v;
  }
  v.rootRel = relativeTo(normRoot, v.joined);
  std::error_code ec;
  if (noSymlinkHop) {
    // Each component below the root, outermost first: a link anywhere is a hop.
    fs::path at = normRoot;
    for (const fs::path& part : rel) {
      if (part == ".") continue;
      at /= part;
      const fs::file_status st = fs::symlink_status(at, ec);
      if (ec || !fs::exists(st)) break;  // a missing component fails later, when opened
      if (fs::is_symlink(st)) {
        v.problem = PathProblem::SymlinkHop;
        v.hop = relativeTo(normRoot, at);
        return v;
      }
    }
    return v;
  }
  const fs::path resolvedRoot = realRoot != nullptr ? *realRoot : fs::weakly_canonical(normRoot, ec);
  if (ec) return v;
  const fs::path real = realPath(v.joined, folders, v.regularFile, ec);
  if (ec) return v;
  const fs::path realRel = real.lexically_relative(resolvedRoot);
  if (realRel.empty() || *realRel.begin() == "..") v.problem = PathProblem::LinkEscapes;
  return v;
}

const char* fileKindName(std::filesystem::file_type t) {
  switch (t) {
    case std::filesystem::file_type::fifo:
      return "a FIFO";
    case std::filesystem::file_type::socket:
      return "a socket";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::not_found:
      return "nothing (a dangling symbolic link)";
    default:
      return "not a regular file";
  }
}

std::string describeFileProblem(const PathVerdict& v, const std::string& name, const std::string& what,
                                const std::string& descriptorFile) {
  switch (v.problem) {
    case PathProblem::Absolute:
      return "expected a path relative to the descriptor's folder, found an absolute path '" + name + "'";
    case PathProblem::Escapes:
      return "path '" + name + "' leaves the descriptor root";
    case PathProblem::SymlinkHop:
    case PathProblem::LinkEscapes:
      return "path '" + name + "' leaves the descriptor root through a symbolic link";
    case PathProblem::None:
      break;
  }
  std::error_code ec;
  if (v.regularFile || std::filesystem::is_regular_file(v.joined, ec)) return {};
  // Something that is there but no regular file is named for what it is, not "not found".
  const std::filesystem::file_type there = std::filesystem::status(v.joined, ec).type();
  if (there == std::filesystem::file_type::fifo || there == std::filesystem::file_type::socket ||
      there == std::filesystem::file_type::block || there == std::filesystem::file_type::character) {
    return what + " '" + name + "' is not a regular file: expected a file at " + v.rootRel + ", found " +
           fileKindName(there) + "; it was not opened";
  }
  const std::string folder = std::filesystem::path(descriptorFile).parent_path().generic_string();
  return what + " '" + name + "' not found: expected " + v.rootRel +
         " (paths are relative to the descriptor's folder, " +
         (folder.empty() ? std::string("the root") : "'" + folder + "'") + "), found " +
         (std::filesystem::is_directory(v.joined, ec) ? "a folder" : "nothing") + " there";
}

}  // namespace ukdpack::detail
