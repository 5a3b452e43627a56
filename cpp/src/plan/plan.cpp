#include "ukdpack/plan/plan.hpp"

#include <map>
#include <string_view>
#include <utility>

#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/model/arch.hpp"

namespace ukdpack {

Json SavedPlan::toJson() const {
  return {{"kernel_id", kernelId}, {"kernel_name", kernelName}, {"toc_key", tocKey},
          {"symbol", symbol},      {"library", library},        {"sha256", sha256}};
}

Result<SavedPlan> capturePlan(const Kernel& kernel) {
  // Decided by the launch helper: a multi-launch kernel's default `source`
  // would read as some other kind.
  if (!kernel.unreadable.empty()) {
    return Result<SavedPlan>::failure(
        makeError(codes::SHARD_INDEX, kernel.file, kernel.jsonPath,
                  "cannot save a plan of kernel (id " + kernel.id + "): " + kernel.unreadable));
  }
  const KernelSource* src = singleLaunchSource(kernel);
  if (src == nullptr) {
    return Result<SavedPlan>::failure(
        makeError(codes::PLAN_MULTI_LAUNCH, kernel.file, kernel.jsonPath,
                  "cannot save a plan of " + kernelLabel(kernel) + ": the kernel has several launches " +
                      describeLaunchSet(launchNamesOf(kernel)) + ", and a saved plan holds one launch"));
  }
  if (!isPackedSource(*src)) {
    return Result<SavedPlan>::failure(
        makeError(codes::PLAN_NOT_PACKED, kernel.file, jsonPathKey(kernel.jsonPath, "kernel_source"),
                  "cannot save a plan of " + kernelLabel(kernel) + ": its source is kind '" + src->kind +
                      "', not the packed kind '" + packedKind().name + "'; plans are saved from packed shards"));
  }
  return Result<SavedPlan>::success(
      SavedPlan{kernel.id, kernel.name, src->tocKey, src->symbol, src->library, src->sha256});
}

Result<SavedPlan> capturePlan(const DescriptorSet& set, const std::string& kernelId) {
  const Pack* pack = nullptr;
  const PackMember* m = set.findKernel(kernelId, &pack);
  if (m == nullptr) {
    return Result<SavedPlan>::failure(
        makeError(codes::KERNEL_UNKNOWN, "", "", "no loaded kernel has id '" + kernelId + "'"));
  }
  // A slotted engine's kernel runs only in its slot programs, whose picks a saved plan cannot hold.
  const Engine* engine = set.engineOf(*pack);
  if (pack->slot || (engine != nullptr && engine->slotted())) {
    const Kernel& k = m->kernel();
    return Result<SavedPlan>::failure(
        makeError(codes::PLAN_SLOTTED, k.file, k.jsonPath,
                  "cannot save a plan of " + kernelLabel(k) + ": it fills slot '" + pack->slot.value_or("") +
                      "' of engine '" + (engine != nullptr ? engine->name : pack->engine.value_or("")) +
                      "', whose kernels run only in slot programs, and slotted plans are not saved"));
  }
  return capturePlan(m->kernel());
}

Result<ExecutionPlan> makeExecutionPlan(const StateManager& manager, const std::string& kernelId) {
  const KernelDefinition* def = manager.find(kernelId);
  if (def == nullptr) {
    return Result<ExecutionPlan>::failure(
        makeError(codes::KERNEL_UNKNOWN, "", "", "no kept kernel has id '" + kernelId + "'"));
  }
  ExecutionPlan plan;
  plan.definition = def;
  if (singleLaunchSource(*def->kernel()) != nullptr) {
    plan.launches = {""};
  } else {
    plan.launches = def->handler->launchNames();  // the kernel's set equals it: the manager kept it
  }
  plan.workspaceSize = def->handler->workspaceSize(*def->kernel());
  return Result<ExecutionPlan>::success(std::move(plan));
}

Result<bool> runPlan(const StateManager& manager, const ExecutionPlan& plan, void* workspace, void* stream,
                     const void* arguments, const std::string& arch) {
  if (plan.definition == nullptr) {
    return Result<bool>::failure(makeError(codes::PLAN_EMPTY, "", "", "the plan names no kernel"));
  }
  const KernelDefinition& def = *plan.definition;
  for (const std::string& launch : plan.launches) {
    auto code = manager.loadLaunchCode(def.kernel()->id,
                                       launch.empty() ? std::nullopt : std::optional<std::string>(launch), arch);
    if (!code) return Result<bool>::failure(code.error());
    LaunchRequest request;
    request.kernel = def.kernel();
    request.launch = launch;
    request.code = &code.value();
    request.source = launch.empty() ? singleLaunchSource(*def.kernel()) : &def.kernel()->sources.at(launch);
    request.workspace = workspace;
    request.workspaceSize = plan.workspaceSize;
    request.stream = stream;
    request.arguments = arguments;
    auto ran = def.handler->launch(request);
    if (!ran) return ran;
  }
  return Result<bool>::success(true);
}

// --------------------------------------------------------------------------- device plans

namespace {

// A failure from below (backend, handler), reworded to say where it happened.
Diagnostic within(Diagnostic d, const Kernel& k, const std::string& where, const std::string& what) {
  d.message = where + ": " + what + ": " + d.message;
  if (d.file.empty()) d.file = k.file;
  if (d.jsonPath.empty()) d.jsonPath = k.jsonPath;
  return d;
}

std::string sizesText(const std::vector<std::size_t>& sizes) {
  std::string out;
  for (std::size_t s : sizes) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out.empty() ? std::string() : " (" + out + " bytes)";
}

// The driver copies each argument by the size the kernel declares: arguments
// of another size would be read past their end or cut short.
std::optional<std::string> argumentMismatch(const Signature& signature, const KernelArgs& args) {
  bool same = signature.size() == args.count();
  for (std::size_t i = 0; same && i < args.count(); ++i) same = signature[i].size == args.size(i);
  if (same) return std::nullopt;
  std::vector<std::size_t> passed;
  std::vector<std::size_t> takes;
  for (std::size_t i = 0; i < args.count(); ++i) passed.push_back(args.size(i));
  for (const SignatureArg& a : signature) takes.push_back(a.size);
  return "the handler passes " + std::to_string(passed.size()) + " argument" + (passed.size() == 1 ? "" : "s") +
         sizesText(passed) + ", the kernel's packed signature " + describeSignature(signature) + " takes " +
         std::to_string(takes.size()) + sizesText(takes);
}

bool emptyDim(const Dim3& d) { return d.x == 0 || d.y == 0 || d.z == 0; }

std::string dimText(const Dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

}  // namespace

Result<DevicePlan> DevicePlan::create(const StateManager& manager, const std::string& kernelId,
                                      std::shared_ptr<DeviceBackend> backend, const std::string& arch) {
  using R = Result<DevicePlan>;
  if (manager.find(kernelId) == nullptr) {
    // The manager's own refusal says why: dropped (with its reason), filtered out, or unknown.
    auto why = manager.loadLaunchCode(kernelId, std::nullopt);
    if (!why) return R::failure(why.error());
  }
  auto base = makeExecutionPlan(manager, kernelId);
  if (!base) return R::failure(base.error());
  const KernelDefinition& def = *base.value().definition;
  const Kernel& k = *def.kernel();
  if (!backend) {
    return R::failure(
        makeError(codes::PLAN_NO_BACKEND, k.file, k.jsonPath, kernelLabel(k) + ": no device backend given"));
  }
  // The device's full target ID (gfx90a:sramecc+:xnack-) picks among feature variants;
  // whether the kernel runs at all is a matter of the bare arch.
  const std::string device = arch.empty() ? backend->arch() : arch;
  const std::string useArch = bareArch(device);
  if (!kernelRunsOn(*def.pack, k, useArch)) {
    std::string built;
    for (const std::string& a : kernelArches(*def.pack, k)) built += (built.empty() ? "" : ", ") + a;
    return R::failure(makeError(codes::ARCH_MISMATCH, k.file, k.jsonPath,
                                kernelLabel(k) + " does not run on " + useArch + " (the " + backend->name() +
                                    " device): it is built for " + built));
  }

  DevicePlan plan;
  plan.backend_ = backend;
  plan.definition_ = &def;
  plan.arch_ = useArch;
  plan.workspaceSize_ = base.value().workspaceSize;
  std::map<std::string, std::size_t> moduleOf;  // verified sha256 -> module
  for (const std::string& name : base.value().launches) {
    PlanLaunch l;
    l.name = name;
    // The manager kept the kernel: its launch set equals the handler's.
    l.source = name.empty() ? singleLaunchSource(k) : &k.sources.at(name);
    l.symbol = l.source->symbol;
    l.tocKey = l.source->tocKey;
    l.sha256 = l.source->sha256;
    const std::string where = launchLabel(k, name);
    auto code = manager.loadLaunchCode(k.id, name.empty() ? std::nullopt : std::optional<std::string>(name), device);
    if (!code) return R::failure(code.error());
    auto known = moduleOf.find(l.sha256);
    if (known == moduleOf.end()) {
      const std::string_view bytes(reinterpret_cast<const char*>(code.value().data()), code.value().size());
      const auto view = inspectCodeObject(bytes);  // readable: the integrity check listed its symbols
      const bool cubin = view && view.value().format == CodeObjectFormat::CudaElf;
      if ((backend->name() == "cuda" && !cubin) || (backend->name() == "hip" && cubin)) {
        return R::failure(makeError(codes::CODE_OBJECT_WRONG_BACKEND, k.file, k.jsonPath,
                                    where + ": its code object (toc key '" + l.tocKey + "') is " +
                                        (cubin ? "an NVIDIA cubin" : "an AMDGPU code object") + ", which the " +
                                        backend->name() + " backend cannot load"));
      }
      auto module = DeviceModule::load(backend, code.value());
      if (!module) {
        return R::failure(within(module.error(), k, where, "cannot load its code object (toc key '" + l.tocKey + "')"));
      }
      known = moduleOf.emplace(l.sha256, plan.modules_.size()).first;
      plan.modules_.push_back(std::move(module).value());
    }
    l.module = known->second;
    auto function = plan.modules_[l.module].function(l.symbol);
    if (!function) {
      return R::failure(within(function.error(), k, where, "cannot resolve symbol '" + l.symbol + "'"));
    }
    l.function = function.value();
    plan.launches_.push_back(std::move(l));
  }
  plan.scratch_.resize(plan.launches_.size());
  return R::success(std::move(plan));
}

std::vector<std::string> DevicePlan::launchNames() const {
  std::vector<std::string> out;
  for (const PlanLaunch& l : launches_) out.push_back(l.name);
  return out;
}

std::string DevicePlan::label(const PlanLaunch& launch) const {
  return launchLabel(*definition_->kernel(), launch.name);
}

Result<bool> DevicePlan::run(const void* arguments) {
  if (workspaceSize_ > 0 && !workspace_) {
    auto buffer = DeviceBuffer::allocate(backend_, workspaceSize_);
    if (!buffer) {
      const Kernel& k = *definition_->kernel();
      return Result<bool>::failure(
          within(buffer.error(), k, kernelLabel(k),
                 "cannot allocate its workspace of " + std::to_string(workspaceSize_) + " bytes"));
    }
    workspace_ = std::move(buffer).value();
  }
  return run(workspace_ ? workspace_->ptr() : 0, workspace_ ? workspace_->size() : 0, arguments);
}

Result<bool> DevicePlan::run(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments) {
  auto launched = enqueue(workspace, workspaceBytes, arguments);
  if (!launched) return launched;
  return synchronize();
}

Result<bool> DevicePlan::enqueue(DevicePtr workspace, std::size_t workspaceBytes, const void* arguments) {
  using R = Result<bool>;
  const Kernel& k = *definition_->kernel();
  if (workspaceBytes < workspaceSize_ || (workspaceSize_ > 0 && workspace == 0)) {
    return R::failure(makeError(
        codes::WORKSPACE_TOO_SMALL, k.file, k.jsonPath,
        kernelLabel(k) + " needs a workspace of " + std::to_string(workspaceSize_) + " bytes, the run was given " +
            (workspace == 0 ? std::string("none") : std::to_string(workspaceBytes) + " bytes")));
  }
  const DispatchHandler& handler = *definition_->handler;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    const PlanLaunch& l = launches_[i];
    LaunchArgs& out = scratch_[i];
    out.geometry = LaunchGeometry{};
    out.args.clear();
    LaunchContext context;
    context.kernel = &k;
    context.launch = l.name;
    context.workspace = workspace;
    context.workspaceSize = workspaceBytes;
    context.arguments = arguments;
    auto prepared = handler.prepareLaunch(context, out);
    if (!prepared) {
      return R::failure(within(prepared.error(), k, label(l),
                               "dispatch symbol '" + definition_->dispatchSymbol() + "' did not prepare the launch"));
    }
    if (auto why = argumentMismatch(l.source->signature, out.args)) {
      return R::failure(makeError(codes::LAUNCH_ARGUMENTS, k.file, k.jsonPath, label(l) + ": " + *why));
    }
    if (emptyDim(out.geometry.grid) || emptyDim(out.geometry.block)) {
      return R::failure(makeError(codes::LAUNCH_GEOMETRY, k.file, k.jsonPath,
                                  label(l) + ": grid " + dimText(out.geometry.grid) + " and block " +
                                      dimText(out.geometry.block) + " must be at least 1 in every dimension"));
    }
    auto launched = backend_->launch(l.function, out.geometry, out.args);
    if (!launched) return R::failure(within(launched.error(), k, label(l), "launching '" + l.symbol + "' failed"));
  }
  return R::success(true);
}

Result<bool> DevicePlan::synchronize() {
  auto done = backend_->synchronize();
  if (done) return done;
  const Kernel& k = *definition_->kernel();
  std::set<std::string> names;
  for (const PlanLaunch& l : launches_) names.insert(l.name);
  const std::string what = launches_.size() == 1 && launches_[0].name.empty()
                               ? std::string("waiting for its launch failed")
                               : "waiting for its launches " + describeLaunchSet(names) + " failed";
  return Result<bool>::failure(within(done.error(), k, kernelLabel(k), what));
}

}  // namespace ukdpack
