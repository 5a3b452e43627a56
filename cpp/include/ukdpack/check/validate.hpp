// ukdpack-validate as a library: load roots, register stubs for
// every symbol they name, build a state manager and load the code of every
// launch of every kept packed kernel. The tool prints what this returns.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace ukdpack {

struct ValidateOptions {
  LoaderOptions loader;
  // Engines (UED name or id) that must each load with at least one kept kernel.
  std::vector<std::string> expectEngines;
};

// One engine's verdict in the report. Upstream hipDNN's validator drops an
// engine from its validated sets when two of its kernels collide on their
// completed metadata tuple; ukdpack's loader keeps the engine and reports
// METADATA_NOT_UNIQUE per kernel, so the report carries the engine-level
// verdict a harness reading upstream's fields expects.
struct EngineVerdict {
  std::string id;    // UED id; empty when only the name is known (a loader drop)
  std::string name;  // UED name
  bool dropped = false;
  std::string reason;  // why it is dropped; empty when it is not
  // Kernel id pairs whose completed metadata collide under this engine.
  std::vector<std::pair<std::string, std::string>> collidingKernels;
};

// One slotted engine as one arch pass's state manager sees it.
struct SlottedEngineReport {
  std::string arch;  // the pass: "" when the set names no arch
  std::string id;
  std::string name;
  std::string droppedReason;  // why a slot empty on the arch drops the engine; "" when it is not dropped
  struct Slot {
    std::string name;
    std::vector<std::string> kernels;  // every kernel of the slot on the arch: the kept ones, then the dropped
    std::vector<std::string> kept;     // in the slot's catalog order
    std::vector<DroppedKernel> dropped;
    std::string ranker;  // SlotCatalog::ranker
  };
  std::vector<Slot> slots;  // in run order
};

struct ValidationReport {
  std::vector<std::filesystem::path> roots;
  std::vector<Diagnostic> diagnostics;              // loader, stubs, state manager, integrity: in that order
  std::size_t packs = 0;                            // packs loaded
  std::size_t kernels = 0;                          // kernels loaded
  std::size_t kept = 0;                             // kernels the state manager keeps
  std::size_t launchesChecked = 0;                  // launch code objects loaded and verified
  std::size_t packsDropped = 0;                     // packs the loader dropped (PACK_DROPPED), engines not counted
  std::size_t enginesDropped = 0;                   // engines dropped: by the loader, or for colliding metadata
  std::vector<DroppedKernel> dropped;               // kernels the state manager dropped
  std::vector<std::string> log;                     // its drop lines
  std::vector<std::string> engines;                 // names of engines with a kept kernel and not dropped, sorted
  std::vector<EngineVerdict> engineVerdicts;        // every engine loaded or dropped, by name
  std::vector<std::string> expectedEnginesMissing;  // the expected engines that did not load
  std::vector<SlottedEngineReport> slottedEngines;  // per arch pass, each slotted engine that ships for it
  bool ok = false;                                  // no error, no drop, and every expected engine loaded

  int exitCode() const { return ok ? 0 : 1; }
  std::string summary() const;                 // one line
  std::vector<std::string> slotLines() const;  // one line per slot of slottedEngines, for the text output
  Json toJson() const;                         // the --json verdict (docs/shards.md, "ukdpack-validate --json")
};

// Every root must hold a shard or descriptor root: one that holds none (an
// empty folder, an out root instead of OUT_ROOT/<arch>/) is refused with one
// NO_SHARD error per such root, before anything is loaded.
ValidationReport validateRoots(const std::vector<std::filesystem::path>& roots, const ValidateOptions& options = {});

// Why `folder` holds no shard, or nullopt when it holds one (or is no folder:
// the loader says so). It holds none when no descriptor file lies under it
// (walked as the loader walks, leaving out `excludeFolders`), or when all of
// them lie in folders named like arches that hold a kpack/ folder (an out
// root). The reason is one sentence, with "did you mean <folder>/<arch>?" when
// a folder below is named like an arch. The shard tools share this judgement.
std::optional<std::string> noShardReason(const std::filesystem::path& folder,
                                         const std::vector<std::string>& excludeFolders = {});

}  // namespace ukdpack
