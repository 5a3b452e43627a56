// A shard's index (index.ukdx): written by the packer beside the descriptors,
// bound to them by a digest (XXH3-128), it lets a runtime load read each pack from
// its skeleton in the index and each inline kernel from its own bytes instead of
// scanning every file; a KDP unchanged since the index (by its size and time) is
// not read at load. The JSON stays the source of truth: an index that does not
// bind is never used (the JSON load runs), and a kernel whose file is not the one
// it records is refused when first built (Kernel::unreadable).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack {

// The index's file name, at the shard's top (beside kpack/; the walk never reads it).
inline constexpr const char* kShardIndexFile = "index.ukdx";

// The index bytes for the shard at `root`, from its JSON load with default
// options; a SHARD_INDEX failure (nothing to write) when that load gives any
// diagnostic, or when the kernels read back through the index differ from it.
// The bytes depend only on the shard's descriptor files: byte-reproducible.
Result<std::string> buildShardIndex(const std::filesystem::path& root);

// buildShardIndex in two steps, so that a caller which loads the shard's JSON anyway
// (the packer's runtime check) writes the index from that load and frees it before
// the load through the index: `bytes` from the set, and what each kernel read back
// must be (per pack: its id and its own fields' digest, and each member's digest;
// "" for a member not read back, see PreviousIndex).
struct ShardIndexDraft {
  std::string bytes;
  std::vector<std::pair<std::string, std::vector<std::string>>> expected;
  // The files whose inline kernels the confirmation does not read back (PreviousIndex).
  std::vector<std::string> unchanged;
};
// The index of the shard a pack replaces, when the packer knows it was confirmed by
// this same code and took `files` from that shard unchanged: a file of them whose
// records in it are the draft's own (same bytes, same spans, same ids) has its
// inline kernels read back already, by that confirmation, and is not read again.
struct PreviousIndex {
  std::filesystem::path root;      // the previous shard; empty: none
  std::vector<std::string> files;  // shard-relative paths
};
// The draft from `set`, the JSON load (default options, useIndex false) of the shard
// at its first root; the same failure as buildShardIndex when the set has diagnostics.
Result<ShardIndexDraft> draftShardIndex(const DescriptorSet& set, const PreviousIndex& previous = {});
// The draft's bytes when the load through them of the shard at `root` is the JSON
// load the draft was made from, kernel by kernel; else SHARD_INDEX failure.
Result<std::string> confirmShardIndex(const std::filesystem::path& root, ShardIndexDraft draft);

// What ukdpack-validate says of a shard's index: nothing when it has none;
// when it has one, whether it binds (every file read and compared, whatever its
// time; `why` when not), and when it binds, the first difference between the load
// through it and the JSON load (empty: none).
struct ShardIndexCheck {
  bool present = false;
  bool binds = false;
  std::string why;         // why it does not bind
  std::string difference;  // the first difference from the JSON load, when it binds
};
ShardIndexCheck checkShardIndex(const std::filesystem::path& root);

}  // namespace ukdpack
