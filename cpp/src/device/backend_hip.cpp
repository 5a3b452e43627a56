// The HIP runtime backend. libamdhip64 is opened with dlopen, so consumers of
// ukdpack::runtime need no ROCm installed to build, link or start; the HIP
// headers are used for types only. Built only when UKDPACK_WITH_HIP found
// them (UKDPACK_HAVE_HIP); otherwise openHipBackend says so.
#include "ukdpack/device/execution.hpp"

#if defined(UKDPACK_HAVE_HIP)

#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ukdpack/model/arch.hpp"

namespace ukdpack {

namespace {

// The development name first (ROCm installs it), then the runtime sonames.
constexpr const char* kLibraries[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"};

struct Runtime {
  std::string library;
  decltype(&::hipInit) init = nullptr;
  decltype(&::hipGetDeviceCount) getDeviceCount = nullptr;
  decltype(&::hipGetDevice) getDevice = nullptr;
  decltype(&::hipSetDevice) setDevice = nullptr;
  decltype(&::hipGetDeviceProperties) getDeviceProperties = nullptr;
  decltype(&::hipDeviceSynchronize) deviceSynchronize = nullptr;
  decltype(&::hipModuleLoadData) moduleLoadData = nullptr;
  decltype(&::hipModuleUnload) moduleUnload = nullptr;
  decltype(&::hipModuleGetFunction) moduleGetFunction = nullptr;
  hipError_t (*malloc)(void**, std::size_t) = nullptr;  // hipMalloc: the header overloads it for C++
  decltype(&::hipFree) free = nullptr;
  decltype(&::hipMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::hipMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::hipMemsetD8) memsetD8 = nullptr;
  decltype(&::hipModuleLaunchKernel) moduleLaunchKernel = nullptr;
  decltype(&::hipGetErrorName) getErrorName = nullptr;
  decltype(&::hipGetErrorString) getErrorString = nullptr;

  // "hipErrorNoDevice (no ROCm-capable device is detected)".
  std::string error(hipError_t e) const {
    const char* name = getErrorName != nullptr ? getErrorName(e) : nullptr;
    const char* text = getErrorString != nullptr ? getErrorString(e) : nullptr;
    std::string out = name != nullptr ? std::string(name) : "HIP error " + std::to_string(static_cast<int>(e));
    if (text != nullptr && (name == nullptr || std::string(text) != name)) out += std::string(" (") + text + ")";
    return out;
  }
};

Diagnostic unavailable(const std::string& library, const std::string& message) {
  return makeError(codes::DEVICE_UNAVAILABLE, "", "",
                   "hip (" + (library.empty() ? std::string(kLibraries[0]) : library) + "): " + message);
}

// Opened once per process and never closed, like any GPU runtime.
Result<const Runtime*> loadRuntime() {
  using R = Result<const Runtime*>;
  void* lib = nullptr;
  static Runtime rt;
  std::string tried;
  for (const char* name : kLibraries) {
    lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      rt.library = name;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + std::string(name);
  }
  if (lib == nullptr) {
    return R::failure(unavailable(
        "", "cannot load the HIP runtime (tried " + tried + "); ROCm's HIP runtime is needed to run AMD code objects"));
  }
  std::string missing;
  auto resolve = [&](auto& slot, std::initializer_list<const char*> names) {
    void* p = nullptr;
    for (const char* n : names) {
      if ((p = ::dlsym(lib, n)) != nullptr) break;
    }
    if (p == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(*names.begin());
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  resolve(rt.getErrorName, {"hipGetErrorName"});
  resolve(rt.getErrorString, {"hipGetErrorString"});
  resolve(rt.init, {"hipInit"});
  resolve(rt.getDeviceCount, {"hipGetDeviceCount"});
  resolve(rt.getDevice, {"hipGetDevice"});
  resolve(rt.setDevice, {"hipSetDevice"});
  // hipDeviceProp_t changed layout in ROCm 6: ask for the layout these headers
  // declare (ROCm 6 runtimes keep the old one as R0000).
#if HIP_VERSION_MAJOR >= 6
  resolve(rt.getDeviceProperties, {"hipGetDevicePropertiesR0600"});
#else
  resolve(rt.getDeviceProperties, {"hipGetDevicePropertiesR0000", "hipGetDeviceProperties"});
#endif
  resolve(rt.deviceSynchronize, {"hipDeviceSynchronize"});
  resolve(rt.moduleLoadData, {"hipModuleLoadData"});
  resolve(rt.moduleUnload, {"hipModuleUnload"});
  resolve(rt.moduleGetFunction, {"hipModuleGetFunction"});
  resolve(rt.malloc, {"hipMalloc"});
  resolve(rt.free, {"hipFree"});
  resolve(rt.memcpyHtoD, {"hipMemcpyHtoD"});
  resolve(rt.memcpyDtoH, {"hipMemcpyDtoH"});
  resolve(rt.memsetD8, {"hipMemsetD8"});
  resolve(rt.moduleLaunchKernel, {"hipModuleLaunchKernel"});
  if (!missing.empty()) {
    return R::failure(unavailable(rt.library, "the HIP runtime lacks " + missing +
                                                  "; it is older or newer than this build reads (headers of HIP " +
                                                  std::to_string(HIP_VERSION_MAJOR) + "." +
                                                  std::to_string(HIP_VERSION_MINOR) + ")"));
  }
  return R::success(&rt);
}

const Result<const Runtime*>& runtime() {
  static const Result<const Runtime*> loaded = loadRuntime();
  return loaded;
}

// Room past the struct, so a runtime that writes a longer one writes into it.
struct PropsBuffer {
  hipDeviceProp_t props;
  unsigned char spare[4096];
};

class HipBackend final : public DeviceBackend {
 public:
  HipBackend(const Runtime& rt, int device, std::string arch) : rt_(rt), device_(device), arch_(std::move(arch)) {}

  const std::string& name() const override { return name_; }
  const std::string& arch() const override { return arch_; }
  int device() const override { return device_; }

  Result<ModuleHandle> loadModule(const std::uint8_t* image, std::size_t size) override {
    using R = Result<ModuleHandle>;
    if (image == nullptr || size == 0) return R::failure(error("hipModuleLoadData", "the code object is empty"));
    if (auto bad = makeCurrent()) return R::failure(*bad);
    hipModule_t m = nullptr;
    if (const hipError_t e = rt_.moduleLoadData(&m, image); e != hipSuccess) {
      return R::failure(error("hipModuleLoadData", rt_.error(e)));
    }
    return R::success(ModuleHandle{reinterpret_cast<std::uintptr_t>(m)});
  }

  Result<bool> unloadModule(ModuleHandle module) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("hipModuleUnload", rt_.moduleUnload(reinterpret_cast<hipModule_t>(module.value)));
  }

  Result<FunctionHandle> function(ModuleHandle module, const std::string& symbol) override {
    using R = Result<FunctionHandle>;
    if (auto bad = makeCurrent()) return R::failure(*bad);
    hipFunction_t f = nullptr;
    const hipError_t e = rt_.moduleGetFunction(&f, reinterpret_cast<hipModule_t>(module.value), symbol.c_str());
    if (e != hipSuccess) return R::failure(error("hipModuleGetFunction('" + symbol + "')", rt_.error(e)));
    return R::success(FunctionHandle{reinterpret_cast<std::uintptr_t>(f)});
  }

  Result<DevicePtr> allocate(std::size_t bytes) override {
    using R = Result<DevicePtr>;
    if (auto bad = makeCurrent()) return R::failure(*bad);
    void* p = nullptr;
    if (const hipError_t e = rt_.malloc(&p, bytes); e != hipSuccess) {
      return R::failure(error("hipMalloc(" + std::to_string(bytes) + " bytes)", rt_.error(e)));
    }
    return R::success(static_cast<DevicePtr>(reinterpret_cast<std::uintptr_t>(p)));
  }

  Result<bool> free(DevicePtr ptr) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("hipFree", rt_.free(pointer(ptr)));
  }

  Result<bool> copyToDevice(DevicePtr dst, const void* src, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    // Older headers declare the source non-const; the runtime only reads it.
    return check("hipMemcpyHtoD", rt_.memcpyHtoD(pointer(dst), const_cast<void*>(src), bytes));
  }

  Result<bool> copyToHost(void* dst, DevicePtr src, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("hipMemcpyDtoH", rt_.memcpyDtoH(dst, pointer(src), bytes));
  }

  Result<bool> fill(DevicePtr dst, std::uint8_t value, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("hipMemsetD8", rt_.memsetD8(pointer(dst), value, bytes));
  }

  Result<bool> launch(FunctionHandle function, const LaunchGeometry& g, const KernelArgs& args) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    ArgPointers params(args);
    return check(
        "hipModuleLaunchKernel",
        rt_.moduleLaunchKernel(reinterpret_cast<hipFunction_t>(function.value), g.grid.x, g.grid.y, g.grid.z, g.block.x,
                               g.block.y, g.block.z, g.sharedBytes, nullptr, params.data(), nullptr));
  }

  Result<bool> synchronize() override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("hipDeviceSynchronize", rt_.deviceSynchronize());
  }

 private:
  static void* pointer(DevicePtr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }
  Diagnostic error(const std::string& call, const std::string& what) const {
    return makeError(codes::DEVICE_ERROR, "", "",
                     "hip device " + std::to_string(device_) + " (" + arch_ + "): " + call + " failed: " + what);
  }
  Result<bool> check(const char* call, hipError_t e) const {
    if (e == hipSuccess) return Result<bool>::success(true);
    return Result<bool>::failure(error(call, rt_.error(e)));
  }
  // The current device is per thread: set it only when the caller's thread has another.
  std::optional<Diagnostic> makeCurrent() const {
    int cur = -1;
    if (rt_.getDevice(&cur) == hipSuccess && cur == device_) return std::nullopt;
    if (const hipError_t e = rt_.setDevice(device_); e != hipSuccess) return error("hipSetDevice", rt_.error(e));
    return std::nullopt;
  }

  const Runtime& rt_;
  int device_;
  std::string arch_;
  std::string name_ = "hip";
};

}  // namespace

bool hipBackendCompiled() { return true; }

Result<std::shared_ptr<DeviceBackend>> openHipBackend(int device) {
  using R = Result<std::shared_ptr<DeviceBackend>>;
  const auto& loaded = runtime();
  if (!loaded) return R::failure(loaded.error());
  const Runtime& rt = *loaded.value();
  // hipInit fails on a machine without a GPU: the device count says why.
  const hipError_t init = rt.init(0);
  int count = 0;
  const hipError_t counted = rt.getDeviceCount(&count);
  if (counted != hipSuccess || count == 0) {
    std::string why = "no HIP device: hipGetDeviceCount reports " + std::to_string(count) +
                      (counted != hipSuccess ? " (" + rt.error(counted) + ")" : std::string());
    if (init != hipSuccess) why += "; hipInit failed with " + rt.error(init);
    return R::failure(unavailable(rt.library, why));
  }
  if (init != hipSuccess) return R::failure(unavailable(rt.library, "hipInit failed: " + rt.error(init)));
  if (device < 0 || device >= count) {
    return R::failure(unavailable(rt.library, "there is no HIP device " + std::to_string(device) +
                                                  " (the runtime reports " + std::to_string(count) + ")"));
  }
  if (const hipError_t e = rt.setDevice(device); e != hipSuccess) {
    return R::failure(unavailable(rt.library, "hipSetDevice(" + std::to_string(device) + ") failed: " + rt.error(e)));
  }
  auto buffer = std::make_unique<PropsBuffer>();
  if (const hipError_t e = rt.getDeviceProperties(&buffer->props, device); e != hipSuccess) {
    return R::failure(
        unavailable(rt.library, "hipGetDeviceProperties(" + std::to_string(device) + ") failed: " + rt.error(e)));
  }
  const char* name = buffer->props.gcnArchName;
  // The full target ID (gfx90a:sramecc+:xnack-): it picks among an archive's feature variants.
  const std::string arch(name, ::strnlen(name, sizeof buffer->props.gcnArchName));
  if (!isArchName(bareArch(arch))) {
    return R::failure(unavailable(rt.library, "HIP device " + std::to_string(device) + " reports arch '" + arch +
                                                  "', not a gfx target; the runtime and these headers disagree"));
  }
  return R::success(std::make_shared<HipBackend>(rt, device, arch));
}

}  // namespace ukdpack

#else  // !UKDPACK_HAVE_HIP

namespace ukdpack {

bool hipBackendCompiled() { return false; }

Result<std::shared_ptr<DeviceBackend>> openHipBackend(int device) {
  (void)device;
  return Result<std::shared_ptr<DeviceBackend>>::failure(
      makeError(codes::DEVICE_UNAVAILABLE, "", "",
                "hip: this build of ukdpack has no HIP backend: the HIP runtime headers (hip/hip_runtime_api.h) "
                "were not found when it was configured; install them (Debian: libamdhip64-dev, or ROCm) and "
                "reconfigure with UKDPACK_WITH_HIP=AUTO or ON"));
}

}  // namespace ukdpack

#endif
