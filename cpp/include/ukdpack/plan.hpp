// Execution plans (SPEC 9.1). A plan of a kept kernel runs its launches in the
// handler's order over one workspace. A *saved* plan names one code object, so
// saving is refused for a multi-launch kernel, for having several launches.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ukdpack/descriptors.hpp"
#include "ukdpack/diagnostics.hpp"
#include "ukdpack/loader.hpp"
#include "ukdpack/state_manager.hpp"

namespace ukdpack {

// What a saved plan records of a single-launch packed kernel.
struct SavedPlan {
  std::string kernelId;
  std::string kernelName;
  std::string tocKey;
  std::string symbol;
  std::string library;
  std::string sha256;

  // {"kernel_id", "kernel_name", "toc_key", "symbol", "library", "sha256"}
  Json toJson() const;
};

// Refusals: PLAN_MULTI_LAUNCH (names the kernel's launches), PLAN_NOT_PACKED
// (a single launch of another kind than kpack), KERNEL_UNKNOWN.
Result<SavedPlan> capturePlan(const Kernel& kernel);
Result<SavedPlan> capturePlan(const DescriptorSet& set, const std::string& kernelId);

// The launches of a kept kernel in run order: the handler's launchNames() for
// a multi-launch kernel, one launch named "" for a single-launch one, and the
// one workspace they share.
struct ExecutionPlan {
  const KernelDefinition* definition = nullptr;  // points into the state manager
  std::vector<std::string> launches;
  std::size_t workspaceSize = 0;
};

Result<ExecutionPlan> makeExecutionPlan(const StateManager& manager, const std::string& kernelId);

// Runs a plan: loads each launch's verified code (for `arch`, "" = the
// manager's) and hands it to the handler's launch(), in order, stopping at the
// first failure. Device execution lives in the handlers (a later issue).
Result<bool> runPlan(const StateManager& manager, const ExecutionPlan& plan, void* workspace,
                     void* stream, const void* arguments, const std::string& arch = "");

}  // namespace ukdpack
