// Whether a folder is a shard: the one judgement the loader (loadShard refuses an
// out root) and noShardReason (ukdpack-validate, the shard tools) share.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/load/loader.hpp"

namespace ukdpack::detail {

// Why `folder`, whose descriptor files walkRoot found as `files`, holds no
// shard: none lies under it, or every one lies in a folder below named like an
// arch that holds a kpack/ folder (an out root: OUT_ROOT, not OUT_ROOT/<arch>/).
// One sentence, with "did you mean <folder>/<arch>?" when a folder below is
// named like an arch; nullopt when it holds a shard.
std::optional<std::string> noShardIn(const std::filesystem::path& folder, const std::vector<WalkedFile>& files);

// What of a folder's listing the walk looks at, one rule for walkRoot and for a load
// that takes a shard's files from its index (listingUnchanged): a name ending ".json"
// (a descriptor, or a file it reports), and any folder but the root's archive folder
// (kArchiveFolder, a real folder: never entered). Everything else it passes over unread.
bool isJsonName(std::string_view name);
bool isArchiveFolder(bool atRoot, std::string_view name, bool realFolder);

}  // namespace ukdpack::detail
