// The whole-set rules that no single descriptor shows: launch sets
// per dispatch handler, toc keys shared only by one code object, and which
// generic descriptors a shard ships (reachability). One implementation, used
// by ukdpack-validate, by the packer and its shard tools through the
// extension, and by tests.
#pragma once

#include <string>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"

namespace ukdpack {

// Every whole-set problem of a loaded set, for the shards of `arches` (empty:
// every arch any pack or kernel names, and any other arch). Findings that hold
// on several arches are merged into one, naming the arches ("... on gfx90a,
// gfx942") unless they hold on every shard.
//  * One launch set per dispatch symbol per arch shard, whether the kernels sit
//    in one KDP, in KDPs sharing a UDD, or in UDDs naming one symbol; a KDP
//    whose dispatch is null is held to one set on its own; a UDD's declared
//    `launches` bind every kernel it serves; UDDs naming one symbol declare one set.
//  * Packed shards: two launches name one toc key of one archive only with one
//    sha256.
std::vector<Diagnostic> checkSetRules(const DescriptorSet& set, const std::vector<std::string>& arches = {});

// Every arch some pack or kernel of the set names, sorted.
std::vector<std::string> namedArches(const DescriptorSet& set);

// Whether a kernel of `pack` is in the shard of `arch`; an empty arch stands
// for an arch no descriptor names (it holds only kernels that name no arch).
bool inShard(const Pack& pack, const Kernel& kernel, const std::string& arch);

// What the shard of `arch` ships: the packs with a kernel on it, those kernels,
// and the generic descriptors those packs reach (KDP -> matchers, engine,
// dispatch; UED -> KMD and UHDs, its slots' included), each in load order. An
// empty arch: any shard.
struct ShardContents {
  std::vector<const Pack*> packs;
  std::vector<const PackMember*> kernels;  // the kernels of those packs in the shard
  std::vector<const DescriptorInfo*> generics;
};
ShardContents shardContents(const DescriptorSet& set, const std::string& arch);

// Generic descriptors no pack reaches on any arch (they ship in no shard).
std::vector<const DescriptorInfo*> unreachable(const DescriptorSet& set);
// The note that says so (UNREACHABLE), or nothing when every one is reached.
std::vector<Diagnostic> unreachableNote(const DescriptorSet& set);

}  // namespace ukdpack
