// Paths named by descriptors: joined onto the descriptor's folder, never
// leaving the root, lexically or through a symbolic link.
#pragma once

#include <filesystem>
#include <string>
#include <unordered_map>

namespace ukdpack::detail {

enum class PathProblem { None, Absolute, Escapes, SymlinkHop, LinkEscapes };

struct PathVerdict {
  PathProblem problem = PathProblem::None;
  std::filesystem::path joined;  // baseDir / name, normalized
  std::string rootRel;           // joined relative to the root, '/'-separated
  std::string hop;               // SymlinkHop: the root-relative component that is a link
  bool regularFile = false;      // seen to be a regular file (not a link) while checking
};

// A folder of checked paths, its links resolved once (`real`). `inside`: `real` lies
// inside the resolved root. `fd`: the folder opened once a second file of it is checked,
// so that each file's lstat looks up one name, not its whole path from '/'.
struct RealFolder {
  std::filesystem::path real;
  bool inside = false;
  int fd = -1;
  unsigned checked = 0;
};

// Folders with their links resolved, by their joined path: a caller checking many
// paths that share folders (a pack's kernels and their objects) resolves each once.
// Closes the folders it opened.
class RealFolders {
 public:
  RealFolders() = default;
  RealFolders(const RealFolders&) = delete;
  RealFolders& operator=(const RealFolders&) = delete;
  ~RealFolders();

  std::unordered_map<std::string, RealFolder> byPath;
  RealFolder* last = nullptr;  // the folder of the last file checked, and its key
  const std::string* lastKey = nullptr;
  std::string joined;  // containedRegularFile's buffer: no allocation per file
  unsigned open = 0;   // folders opened (at most kMaxOpen)
  static constexpr unsigned kMaxOpen = 32;
};

// `root` and `baseDir` are absolute and normalized. With `noSymlinkHop`, every
// existing component below the root is lstat'ed and none may be a link (the
// runtime's `library` rule); otherwise links are allowed while the resolved
// path stays inside the resolved root (the packer's rule for shipped files).
// `realRoot`, when given, is the root with its links resolved (a caller checking many
// paths of one root resolves it once); `folders`, when given, caches the resolved
// folders of the paths checked.
PathVerdict checkContained(const std::filesystem::path& root, const std::filesystem::path& baseDir,
                           const std::string& name, bool noSymlinkHop, const std::filesystem::path* realRoot = nullptr,
                           RealFolders* folders = nullptr);

// Whether checkContained(root, baseDir, name, false, &realRoot, &folders) finds `name` a
// regular file inside the root, answered without std::filesystem for the common case: a
// plain relative name (no '.', '..' or empty component, no backslash, no drive), a
// normalized root and baseDir, a folder whose resolved path lies inside the resolved root
// and one lstat (fstatat on the opened folder) that sees a regular file. False means
// "not shown": checkContained and describeFileProblem say what it is (a missing file,
// a link, an escape), so every message stays theirs.
bool containedRegularFile(const std::filesystem::path& root, const std::filesystem::path& realRoot,
                          const std::filesystem::path& baseDir, const std::string& name, RealFolders& folders);

// What a directory entry is, without opening it ("a FIFO", "a socket", ...): a FIFO
// named like a descriptor or a source must not block (opening one waits for a writer).
const char* fileKindName(std::filesystem::file_type t);

// Why a descriptor's path to a file (`what`: "source", "artifact", ...) is refused,
// in one sentence every judge reports; empty when the file is there. `descriptorFile`
// is the root-relative descriptor that names it.
std::string describeFileProblem(const PathVerdict& verdict, const std::string& name, const std::string& what,
                                const std::string& descriptorFile);

// A '/'-separated root-relative rendering of `p` (which lies inside `root`).
std::string relativeTo(const std::filesystem::path& root, const std::filesystem::path& p);

}  // namespace ukdpack::detail
