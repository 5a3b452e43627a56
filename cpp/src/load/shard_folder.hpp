// Whether a folder is a shard: the one judgement the loader (loadShard refuses an
// out root) and noShardReason (ukdpack-validate, the shard tools) share.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/load/loader.hpp"

namespace ukdpack::detail {

// Why `folder`, whose descriptor files walkRoot found as `files`, holds no
// shard: none lies under it, or every one lies in a folder below named like an
// arch that holds a kpack/ folder (an out root: OUT_ROOT, not OUT_ROOT/<arch>/).
// One sentence, with "did you mean <folder>/<arch>?" when a folder below is
// named like an arch; nullopt when it holds a shard.
std::optional<std::string> noShardIn(const std::filesystem::path& folder, const std::vector<WalkedFile>& files);

}  // namespace ukdpack::detail
