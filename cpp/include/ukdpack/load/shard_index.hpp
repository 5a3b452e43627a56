// A shard's index (index.ukdx): written by the packer beside the descriptors,
// bound to them by sha256, it lets a runtime load read each inline kernel from
// its own bytes instead of scanning every file. The JSON stays the source of
// truth: an index that does not bind is never used (the JSON load runs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack {

// The index's file name, at the shard's top (beside kpack/; the walk never reads it).
inline constexpr const char* kShardIndexFile = "index.ukdx";

// The index bytes for the shard at `root`, from its JSON load with default
// options; a SHARD_INDEX failure (nothing to write) when that load gives any
// diagnostic, or when the kernels read back through the index differ from it.
// The bytes depend only on the shard's descriptor files: byte-reproducible.
Result<std::string> buildShardIndex(const std::filesystem::path& root);

// What ukdpack-validate says of a shard's index: nothing when it has none;
// when it has one, whether it binds (`why` when not), and when it binds, the
// first difference between the load through it and the JSON load (empty: none).
struct ShardIndexCheck {
  bool present = false;
  bool binds = false;
  std::string why;         // why it does not bind
  std::string difference;  // the first difference from the JSON load, when it binds
};
ShardIndexCheck checkShardIndex(const std::filesystem::path& root);

}  // namespace ukdpack
