// Execution plans. A plan of a kept kernel runs its launches in the
// handler's order over one workspace. A *saved* plan names one code object, so
// saving is refused for a multi-launch kernel, for having several launches.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/device/execution.hpp"
#include "ukdpack/load/loader.hpp"
#include "ukdpack/model/descriptors.hpp"
#include "ukdpack/select/state_manager.hpp"

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
// (a single launch of another kind than kpack), KERNEL_UNKNOWN; by id also
// PLAN_SLOTTED (a kernel of a slotted engine runs only in slot programs, and
// slotted plans are not saved), SHARD_INDEX (Kernel::unreadable). The overload over a bare kernel cannot see
// its engine: callers with a set use the one by id.
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
Result<bool> runPlan(const StateManager& manager, const ExecutionPlan& plan, void* workspace, void* stream,
                     const void* arguments, const std::string& arch = "");

// --------------------------------------------------------------------------- device plans

// One launch of a device plan.
struct PlanLaunch {
  std::string name;    // "" for a single-launch kernel
  std::string symbol;  // the kernel entry it runs
  std::string tocKey;
  std::string sha256;
  std::size_t module = 0;  // index of its module: launches of one code object share it
  FunctionHandle function;
  const KernelSource* source = nullptr;  // points into the state manager's set
};

// A plan of a kept kernel bound to a backend: every launch's code loaded
// through the runtime's integrity checks (loadLaunchCode: containment,
// signature, toc entry, digest, symbol), one module per distinct code object,
// every symbol resolved. Running it asks the handler's prepareLaunch() for each
// launch, in the handler's order, launches them over one workspace, then
// synchronizes. It points into the state manager: valid while that lives.
class DevicePlan {
 public:
  // `arch` "" takes the backend's. Failures name the kernel and the launch:
  // KERNEL_UNKNOWN, ARCH_MISMATCH, the integrity codes of loadLaunchCode,
  // CODE_OBJECT_WRONG_BACKEND, DEVICE_ERROR (module load, symbol lookup).
  static Result<DevicePlan> create(const StateManager& manager, const std::string& kernelId,
                                   std::shared_ptr<DeviceBackend> backend, const std::string& arch = "");

  const KernelDefinition& definition() const { return *definition_; }
  const std::vector<PlanLaunch>& launches() const { return launches_; }
  std::vector<std::string> launchNames() const;
  std::size_t moduleCount() const { return modules_.size(); }
  std::size_t workspaceSize() const { return workspaceSize_; }
  const std::string& arch() const { return arch_; }
  const std::shared_ptr<DeviceBackend>& backend() const { return backend_; }

  // Runs over the plan's own workspace: allocated at the first run that needs
  // one and kept, so launch after launch reuse it.
  Result<bool> run(const void* arguments = nullptr);
  // Runs over a workspace the caller owns (WORKSPACE_TOO_SMALL when it holds
  // fewer than workspaceSize() bytes).
  Result<bool> run(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments);
  // The launches of run() without the synchronize, for callers that wait
  // themselves (or do something else meanwhile).
  Result<bool> enqueue(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments);
  // Waits for the launches; a failure names the kernel and its launches.
  Result<bool> synchronize();

 private:
  DevicePlan() = default;
  std::string label(const PlanLaunch& launch) const;

  std::shared_ptr<DeviceBackend> backend_;
  const KernelDefinition* definition_ = nullptr;
  std::string arch_;
  std::vector<DeviceModule> modules_;
  std::vector<PlanLaunch> launches_;
  std::size_t workspaceSize_ = 0;
  std::optional<DeviceBuffer> workspace_;
  std::vector<LaunchArgs> scratch_;  // one per launch, reused run after run
};

}  // namespace ukdpack
