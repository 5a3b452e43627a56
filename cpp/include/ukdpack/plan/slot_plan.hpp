// Device slot programs: a slot program's picks planned on one backend and run
// in slot order over one workspace.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"
#include "ukdpack/device/execution.hpp"
#include "ukdpack/plan/plan.hpp"
#include "ukdpack/select/slots.hpp"
#include "ukdpack/select/state_manager.hpp"

namespace ukdpack {

// Every pick of a slot program planned through DevicePlan::create (its
// integrity checks, multi-launch picks and generic-target objects included).
// Running it enqueues each pick's launches in slot order over one workspace,
// which every slot sees whole (sized to the largest need of the picks), hands
// the same `arguments` to every pick's handler, then synchronizes once. It
// points into the state manager: valid while that lives.
class DeviceSlotProgram {
 public:
  // `arch` "" takes the backend's. Nothing is planned unless every pick is:
  // the first failure is returned, naming its slot (DevicePlan's codes), and
  // PLAN_EMPTY for a program without picks.
  static Result<DeviceSlotProgram> create(const StateManager& manager, const SlotProgram& program,
                                          std::shared_ptr<DeviceBackend> backend, const std::string& arch = "");

  const Engine& engine() const { return *engine_; }
  // Slot names in run order, one per plan.
  const std::vector<std::string>& slots() const { return slots_; }
  const std::vector<DevicePlan>& plans() const { return plans_; }
  // The largest workspace a pick needs.
  std::size_t workspaceSize() const { return workspaceSize_; }
  const std::shared_ptr<DeviceBackend>& backend() const { return backend_; }

  // Runs over the program's own workspace (allocated at the first run that
  // needs one, then kept).
  Result<bool> run(const void* arguments = nullptr);
  // Runs over a workspace the caller owns (WORKSPACE_TOO_SMALL, before
  // anything launches, when it holds fewer than workspaceSize() bytes).
  Result<bool> run(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments);
  // Every pick's launches without the synchronize.
  Result<bool> enqueue(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments);
  // Waits for the launches; a failure names the engine and its slots.
  Result<bool> synchronize();

 private:
  DeviceSlotProgram() = default;

  std::shared_ptr<DeviceBackend> backend_;
  const Engine* engine_ = nullptr;
  std::vector<std::string> slots_;
  std::vector<DevicePlan> plans_;
  std::size_t workspaceSize_ = 0;
  std::optional<DeviceBuffer> workspace_;
};

}  // namespace ukdpack
