// Walking a root: the descriptor files under it, sorted, and what is skipped
// or refused on the way; and whether a folder is a shard at all.
#include <algorithm>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/files.hpp"
#include "base/utf8.hpp"
#include "load/loader_impl.hpp"
#include "load/shard_folder.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace fs = std::filesystem;

namespace {

std::string typeListText() {
  std::string out;
  for (const char* t : detail::kDescriptorTypes) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

}  // namespace

std::optional<std::string> descriptorType(std::string_view name) {
  // name.<type>.json with a non-empty first part.
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 3 || parts.back() != "json" || parts.front().empty()) return std::nullopt;
  const std::string_view t = parts[parts.size() - 2];
  for (const char* known : detail::kDescriptorTypes)
    if (t == known) return std::string(t);
  return std::nullopt;
}

namespace {

// Whether a folder holds a file named like a descriptor, at any depth.
bool holdsDescriptors(const fs::path& folder) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && descriptorType(it->path().filename().string())) return true;
  }
  return false;
}

struct WalkContext {
  fs::path realRoot;  // the root with every link resolved
  std::set<std::string> excluded;
  std::vector<std::string>* folders;  // each folder walked below the root, when asked for
};

// What an entry is, links followed: from the folder's listing where it says (no stat
// per file: a tree's folders of objects hold tens of thousands), else from a stat.
fs::file_type entryType(const fs::directory_entry& e, bool isLink, std::error_code& ec) {
  if (!isLink) {
    if (e.is_regular_file(ec)) return fs::file_type::regular;
    if (e.is_directory(ec)) return fs::file_type::directory;
  }
  return e.status(ec).type();
}

void walkFolder(const fs::path& folder, const std::string& relFolder, const WalkContext& ctx,
                std::vector<WalkedFile>& out, std::vector<Diagnostic>& diags) {
  std::error_code ec;
  if (ctx.folders != nullptr && !relFolder.empty()) ctx.folders->push_back(relFolder);
  std::vector<std::pair<std::string, fs::directory_entry>> entries;  // by name
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    entries.emplace_back(it->path().filename().string(), *it);
  if (ec) {
    diags.push_back(
        makeError(codes::READ_FAILED, relFolder.empty() ? "." : relFolder, "", "cannot list folder: " + ec.message()));
    return;
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto note = [&](const std::string& rel, const std::string& why) {
    diags.push_back(Diagnostic{Severity::Note, codes::SKIPPED, "", "", "skipping " + escapedText(rel) + ": " + why});
  };
  for (const auto& [name, e] : entries) {
    const std::string rel = relFolder.empty() ? name : relFolder + "/" + name;
    const bool isLink = e.is_symlink(ec);
    const fs::file_type type = entryType(e, isLink, ec);
    const bool isDir = type == fs::file_type::directory;
    const bool realDir = isDir && !isLink;
    const bool isJson = detail::isJsonName(name);
    if (name.front() == '.') {
      if (realDir || isJson) note(rel, "dot-prefixed path");
      continue;
    }
    // A name that is no UTF-8 text cannot be a file field, an id's origin or a JSON
    // report's string: refused, named with its bytes escaped, and not read (a folder
    // only when descriptors lie in it; any other is no business of the walk). The
    // name is looked at first: a folder's subtree is searched only when it is no UTF-8.
    if ((isJson || realDir) && !detail::validUtf8(name) && (isJson || holdsDescriptors(e.path()))) {
      diags.push_back(makeError(codes::NAME_NOT_UTF8, escapedText(rel), "",
                                std::string("the ") + (isDir ? "folder" : "file") +
                                    " name is not UTF-8 text; it was not " + (isDir ? "walked" : "read") +
                                    ": rename it (descriptor files and their folders are named in UTF-8)"));
      continue;
    }
    if (isLink && isDir) {
      note(rel, "symbolic link to a folder (not followed)");
      continue;
    }
    if (realDir) {
      // The archive folder of a shard is not walked; descriptors in it are a
      // mistake (an authored root may not use the name).
      if (detail::isArchiveFolder(relFolder.empty(), name, realDir)) {
        if (holdsDescriptors(e.path())) {
          diags.push_back(makeError(codes::KPACK_FOLDER, rel, "",
                                    "a top-level folder named 'kpack' would collide with the archive folder "
                                    "of a shard; rename it"));
        }
        continue;
      }
      if (ctx.excluded.count(name) != 0) {
        note(rel, "excluded folder (--exclude-folder)");
        continue;
      }
      walkFolder(e.path(), rel, ctx, out, diags);
      continue;
    }
    if (!isJson) continue;
    const auto dtype = descriptorType(name);
    if (!dtype) {
      note(rel, "no descriptor type token; name it <name>.<type>.json with type one of " + typeListText());
      continue;
    }
    if (type != fs::file_type::regular) {
      diags.push_back(makeError(codes::NOT_A_FILE, rel, "",
                                std::string("expected a regular file, found ") + detail::fileKindName(type) +
                                    (isLink ? " behind a symbolic link" : "") + "; it was not opened"));
      continue;
    }
    if (isLink) {
      // A linked descriptor is read only when it stays inside the root.
      const fs::path target = fs::canonical(e.path(), ec);
      const fs::path inside = ec ? fs::path() : target.lexically_relative(ctx.realRoot);
      if (ec || inside.empty() || *inside.begin() == "..") {
        diags.push_back(makeError(codes::LINK_ESCAPES, rel, "",
                                  "a symbolic link that leaves the descriptor root (to " + target.string() +
                                      "); descriptors are read from inside the root only, so it was not opened"));
        continue;
      }
    }
    out.push_back(WalkedFile{rel, e.path(), *dtype});
  }
}

}  // namespace

std::vector<WalkedFile> walkRoot(const fs::path& root, std::vector<Diagnostic>& diags,
                                 const std::vector<std::string>& excludeFolders, std::vector<std::string>* folders) {
  std::vector<WalkedFile> out;
  std::error_code ec;
  WalkContext ctx{fs::canonical(root, ec), std::set<std::string>(excludeFolders.begin(), excludeFolders.end()),
                  folders};
  if (ec) ctx.realRoot = root;
  if (folders != nullptr) folders->clear();
  walkFolder(root, "", ctx, out, diags);
  std::sort(out.begin(), out.end(), [](const WalkedFile& a, const WalkedFile& b) { return a.rel < b.rel; });
  if (folders != nullptr) std::sort(folders->begin(), folders->end());
  return out;
}

bool detail::isJsonName(std::string_view name) {
  return name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

bool detail::isArchiveFolder(bool atRoot, std::string_view name, bool realFolder) {
  return atRoot && realFolder && name == kArchiveFolder;
}

std::optional<std::string> detail::noShardIn(const fs::path& folder, const std::vector<WalkedFile>& files) {
  std::error_code ec;
  // Folders below named like arches, links not followed (the walk follows none);
  // those holding kpack/ are shards as pack writes them.
  std::set<std::string> archFolders, shards;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (it->is_symlink(e2) || !it->is_directory(e2) || !isArchName(name)) continue;
    archFolders.insert(name);
    if (fs::is_directory(fs::symlink_status(it->path() / kArchiveFolder, e2))) shards.insert(name);
  }
  const std::string guess = !shards.empty() ? *shards.begin() : archFolders.empty() ? "" : *archFolders.begin();
  const std::string hint = guess.empty() ? "" : "; did you mean " + (folder / guess).string() + "?";
  if (files.empty()) return "holds no shard: no descriptor file (<name>.<type>.json) lies under it" + hint;
  if (shards.empty()) return std::nullopt;
  for (const WalkedFile& f : files)
    if (shards.count(f.rel.substr(0, f.rel.find('/'))) == 0) return std::nullopt;
  std::string listed;
  for (const std::string& s : shards) listed += (listed.empty() ? "" : ", ") + s;
  return "holds no shard: its descriptors lie in the shard folder" + std::string(shards.size() == 1 ? " " : "s ") +
         listed + " below it (it is an out root; a shard is OUT_ROOT/<arch>/)" + hint;
}

}  // namespace ukdpack
