#include "ukdpack/plan.hpp"

#include <utility>

namespace ukdpack {

Json SavedPlan::toJson() const {
  return {{"kernel_id", kernelId}, {"kernel_name", kernelName}, {"toc_key", tocKey},
          {"symbol", symbol},      {"library", library},        {"sha256", sha256}};
}

Result<SavedPlan> capturePlan(const Kernel& kernel) {
  // Decided by the launch helper: a multi-launch kernel's default `source`
  // would read as some other kind.
  const KernelSource* src = singleLaunchSource(kernel);
  if (src == nullptr) {
    return Result<SavedPlan>::failure(makeError(
        "PLAN_MULTI_LAUNCH", kernel.file, kernel.jsonPath,
        "cannot save a plan of kernel '" + kernel.name + "': the kernel has several launches " +
            describeLaunchSet(launchNamesOf(kernel)) + ", and a saved plan holds one launch"));
  }
  if (src->kind != "kpack") {
    return Result<SavedPlan>::failure(makeError(
        "PLAN_NOT_PACKED", kernel.file, jsonPathKey(kernel.jsonPath, "kernel_source"),
        "cannot save a plan of kernel '" + kernel.name + "': its source is kind '" + src->kind +
            "', not the packed kind 'kpack'; plans are saved from packed shards"));
  }
  return Result<SavedPlan>::success(
      SavedPlan{kernel.id, kernel.name, src->tocKey, src->symbol, src->library, src->sha256});
}

Result<SavedPlan> capturePlan(const DescriptorSet& set, const std::string& kernelId) {
  const PackMember* m = set.findKernel(kernelId);
  if (m == nullptr) {
    return Result<SavedPlan>::failure(
        makeError("KERNEL_UNKNOWN", "", "", "no loaded kernel has id '" + kernelId + "'"));
  }
  return capturePlan(m->kernel);
}

Result<ExecutionPlan> makeExecutionPlan(const StateManager& manager, const std::string& kernelId) {
  const KernelDefinition* def = manager.find(kernelId);
  if (def == nullptr) {
    return Result<ExecutionPlan>::failure(
        makeError("KERNEL_UNKNOWN", "", "", "no kept kernel has id '" + kernelId + "'"));
  }
  ExecutionPlan plan;
  plan.definition = def;
  if (singleLaunchSource(*def->kernel) != nullptr) {
    plan.launches = {""};
  } else {
    plan.launches = def->handler->launchNames();  // the kernel's set equals it: the manager kept it
  }
  plan.workspaceSize = def->handler->workspaceSize(*def->kernel);
  return Result<ExecutionPlan>::success(std::move(plan));
}

Result<bool> runPlan(const StateManager& manager, const ExecutionPlan& plan, void* workspace,
                     void* stream, const void* arguments, const std::string& arch) {
  if (plan.definition == nullptr) {
    return Result<bool>::failure(makeError("PLAN_EMPTY", "", "", "the plan names no kernel"));
  }
  const KernelDefinition& def = *plan.definition;
  for (const std::string& launch : plan.launches) {
    auto code = manager.loadLaunchCode(def.kernel->id,
                                       launch.empty() ? std::nullopt : std::optional<std::string>(launch), arch);
    if (!code) return Result<bool>::failure(code.error());
    LaunchRequest request;
    request.kernel = def.kernel;
    request.launch = launch;
    request.code = &code.value();
    request.source = launch.empty() ? singleLaunchSource(*def.kernel) : &def.kernel->sources.at(launch);
    request.workspace = workspace;
    request.workspaceSize = plan.workspaceSize;
    request.stream = stream;
    request.arguments = arguments;
    auto ran = def.handler->launch(request);
    if (!ran) return ran;
  }
  return Result<bool>::success(true);
}

}  // namespace ukdpack
