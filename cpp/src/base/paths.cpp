#include "base/paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <system_error>

namespace ukdpack::detail {

namespace fs = std::filesystem;

RealFolders::~RealFolders() {
  for (auto& entry : byPath)
    if (entry.second.fd >= 0) ::close(entry.second.fd);
}

std::string relativeTo(const fs::path& root, const fs::path& p) {
  const fs::path rel = p.lexically_relative(root);
  std::string out = rel.generic_string();
  return out == "." ? "" : out;
}

namespace {

// Components none of which is empty, '.' or '..', nor holds a backslash or a NUL: what
// lexically_normal leaves as it is, and what no Windows spelling hides in.
bool plainComponents(std::string_view s) {
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : '/';
    if (c == '\\' || c == '\0') return false;
    if (c != '/') continue;
    const std::size_t len = i - start;
    if (len == 0 || (s[start] == '.' && (len == 1 || (len == 2 && s[start + 1] == '.')))) return false;
    start = i + 1;
  }
  return true;
}

// An absolute path lexically_normal leaves as it is, other than "/" itself.
bool cleanAbsolute(const std::string& p) {
  return p.size() > 1 && p.front() == '/' && plainComponents(std::string_view(p).substr(1));
}

// `p` is `root` or lies below it (both clean).
bool isUnder(const std::string& p, const std::string& root) {
  return p.size() >= root.size() && p.compare(0, root.size(), root) == 0 &&
         (p.size() == root.size() || p[root.size()] == '/');
}

// The folder `key` of `folders`, resolved (weakly_canonical) when first asked; null when
// it cannot be (`ec` says why).
RealFolder* folderOf(RealFolders& folders, const std::string& key, const fs::path& resolvedRoot, std::error_code& ec) {
  auto it = folders.byPath.find(key);
  if (it == folders.byPath.end()) {
    fs::path real = fs::weakly_canonical(fs::path(key), ec);
    if (ec) return nullptr;
    // A clean folder inside the clean root: each plain name in it lies inside too.
    const bool inside = cleanAbsolute(real.native()) && cleanAbsolute(resolvedRoot.native()) &&
                        isUnder(real.native(), resolvedRoot.native());
    it = folders.byPath.emplace(key, RealFolder{std::move(real), inside}).first;
  }
  return &it->second;
}

// weakly_canonical(joined), its folder resolved once per `folders`: a last component
// that is no link resolves to itself, so only the folder's links need resolving.
fs::path realPath(const fs::path& joined, const fs::path& resolvedRoot, RealFolders* folders, bool& regularFile,
                  std::error_code& ec) {
  if (folders == nullptr || !joined.has_parent_path() || !joined.has_filename()) {
    return fs::weakly_canonical(joined, ec);
  }
  std::error_code statEc;
  const fs::file_status st = fs::symlink_status(joined, statEc);
  regularFile = fs::is_regular_file(st);
  const bool absent = st.type() == fs::file_type::not_found;
  if (fs::is_symlink(st) || (statEc && !absent)) return fs::weakly_canonical(joined, ec);
  const RealFolder* folder = folderOf(*folders, joined.parent_path().native(), resolvedRoot, ec);
  if (folder == nullptr) return {};
  return folder->real / joined.filename();
}

}  // namespace

bool containedRegularFile(const fs::path& root, const fs::path& realRoot, const fs::path& baseDir,
                          const std::string& name, RealFolders& folders) {
  const std::string& r = root.native();
  const std::string& b = baseDir.native();
  // A drive ("c:...") is an absolute name to checkContained.
  if (name.empty() || name.front() == '/' || (name.size() > 1 && name[1] == ':') || !plainComponents(name)) {
    return false;
  }
  if (!cleanAbsolute(r) || !cleanAbsolute(b) || !isUnder(b, r)) return false;
  // baseDir/name, lexically normal as it stands, and inside the root by its spelling.
  std::string& joined = folders.joined;
  joined.assign(b).append(1, '/').append(name);
  const std::size_t slash = joined.rfind('/');
  RealFolder* folder = folders.last;
  if (folder == nullptr || folders.lastKey->size() != slash || joined.compare(0, slash, *folders.lastKey) != 0) {
    const std::string key = joined.substr(0, slash);
    std::error_code ec;
    folder = folderOf(folders, key, realRoot, ec);
    if (folder == nullptr) return false;
    folders.last = folder;
    folders.lastKey = &folders.byPath.find(key)->first;
  }
  if (!folder->inside) return false;
  // A folder of one file is not worth an open and a close; one that will not open is tried once.
  if (folder->fd < 0 && ++folder->checked == 2 && folders.open < RealFolders::kMaxOpen) {
#ifdef O_PATH
    folder->fd = ::open(folders.lastKey->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
#else
    folder->fd = ::open(folders.lastKey->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
#endif
    if (folder->fd >= 0) ++folders.open;
  }
  struct stat st{};
  const int rc = folder->fd >= 0 ? ::fstatat(folder->fd, joined.c_str() + slash + 1, &st, AT_SYMLINK_NOFOLLOW)
                                 : ::lstat(joined.c_str(), &st);
  return rc == 0 && S_ISREG(st.st_mode);
}

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
  const fs::path real = realPath(v.joined, resolvedRoot, folders, v.regularFile, ec);
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
