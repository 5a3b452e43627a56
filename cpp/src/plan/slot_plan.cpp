#include "ukdpack/plan/slot_plan.hpp"

#include <algorithm>
#include <utility>

namespace ukdpack {

namespace {

// A failure of one slot's plan or run, reworded to name the slot and its engine.
Diagnostic inSlot(Diagnostic d, const Engine& engine, const std::string& slot) {
  d.message = "slot '" + slot + "' of engine '" + engine.name + "': " + d.message;
  return d;
}

}  // namespace

Result<DeviceSlotProgram> DeviceSlotProgram::create(const StateManager& manager, const SlotProgram& program,
                                                    std::shared_ptr<DeviceBackend> backend, const std::string& arch) {
  using R = Result<DeviceSlotProgram>;
  if (program.engine == nullptr || program.picks.empty()) {
    return R::failure(makeError(codes::PLAN_EMPTY, "", "", "the slot program names no engine or no pick"));
  }
  const Engine& engine = *program.engine;
  DeviceSlotProgram out;
  out.backend_ = backend;
  out.engine_ = &engine;
  for (const SlotPick& pick : program.picks) {
    if (pick.definition == nullptr) {
      return R::failure(
          inSlot(makeError(codes::PLAN_EMPTY, engine.file, "", "the pick names no kernel"), engine, pick.slot));
    }
    // Planned by id through the manager, so each pick gets every check a plan of its own gets.
    auto plan = DevicePlan::create(manager, pick.definition->kernel()->id, backend, arch);
    if (!plan) return R::failure(inSlot(plan.error(), engine, pick.slot));
    out.workspaceSize_ = std::max(out.workspaceSize_, plan.value().workspaceSize());
    out.slots_.push_back(pick.slot);
    out.plans_.push_back(std::move(plan).value());
  }
  return R::success(std::move(out));
}

Result<bool> DeviceSlotProgram::run(const void* arguments) {
  if (workspaceSize_ > 0 && !workspace_) {
    auto buffer = DeviceBuffer::allocate(backend_, workspaceSize_);
    if (!buffer) {
      Diagnostic d = buffer.error();
      d.message = "engine '" + engine_->name + "': cannot allocate its slot program's workspace of " +
                  std::to_string(workspaceSize_) + " bytes: " + d.message;
      if (d.file.empty()) d.file = engine_->file;
      return Result<bool>::failure(std::move(d));
    }
    workspace_ = std::move(buffer).value();
  }
  return run(workspace_ ? workspace_->ptr() : 0, workspace_ ? workspace_->size() : 0, arguments);
}

Result<bool> DeviceSlotProgram::run(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments) {
  auto launched = enqueue(workspace, workspaceBytes, arguments);
  if (!launched) return launched;
  return synchronize();
}

Result<bool> DeviceSlotProgram::enqueue(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments) {
  if (workspaceBytes < workspaceSize_ || (workspaceSize_ > 0 && workspace == 0)) {
    std::string needs;
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      needs += (needs.empty() ? "" : ", ") + slots_[i] + " " + std::to_string(plans_[i].workspaceSize());
    }
    return Result<bool>::failure(makeError(
        codes::WORKSPACE_TOO_SMALL, engine_->file, "",
        "the slot program of engine '" + engine_->name + "' needs a workspace of " + std::to_string(workspaceSize_) +
            " bytes (the largest of its slots': " + needs + "), the run was given " +
            (workspace == 0 ? std::string("none") : std::to_string(workspaceBytes) + " bytes")));
  }
  for (std::size_t i = 0; i < plans_.size(); ++i) {
    auto launched = plans_[i].enqueue(workspace, workspaceBytes, arguments);
    if (!launched) return Result<bool>::failure(inSlot(launched.error(), *engine_, slots_[i]));
  }
  return Result<bool>::success(true);
}

Result<bool> DeviceSlotProgram::synchronize() {
  auto done = backend_->synchronize();
  if (done) return done;
  std::string names;
  for (const std::string& s : slots_) names += (names.empty() ? "'" : ", '") + s + "'";
  Diagnostic d = done.error();
  d.message =
      "engine '" + engine_->name + "': waiting for the launches of its slots " + names + " failed: " + d.message;
  if (d.file.empty()) d.file = engine_->file;
  return Result<bool>::failure(std::move(d));
}

}  // namespace ukdpack
