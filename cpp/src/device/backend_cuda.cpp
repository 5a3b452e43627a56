// The CUDA driver backend. libcuda.so.1 is opened with dlopen and the few entry
// points it needs are resolved with dlsym; the types are declared here, so no
// CUDA header or library is needed to build or to link the runtime.
#include <dlfcn.h>

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ukdpack/device/execution.hpp"

namespace ukdpack {

namespace {

// The driver API's own types, as cuda.h declares them (ABI-stable since CUDA 4).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNoDevice = 100;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

constexpr const char* kLibrary = "libcuda.so.1";

struct Driver {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, std::size_t) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;

  // "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)".
  std::string error(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName == nullptr || cuGetErrorName(r, &name) != kCudaSuccess || name == nullptr) {
      return "CUDA error " + std::to_string(r);
    }
    std::string out = name;
    if (cuGetErrorString != nullptr && cuGetErrorString(r, &text) == kCudaSuccess && text != nullptr) {
      out += std::string(" (") + text + ")";
    }
    return out;
  }
};

Diagnostic unavailable(const std::string& message) {
  return makeError(codes::DEVICE_UNAVAILABLE, "", "", std::string("cuda (") + kLibrary + "): " + message);
}

// The driver, opened and initialised once per process and never closed:
// unloading a GPU driver while its threads may still run is not safe.
Result<const Driver*> loadDriver() {
  using R = Result<const Driver*>;
  void* lib = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    return R::failure(unavailable(std::string("cannot load the CUDA driver library ") + kLibrary + " (" +
                                  (why != nullptr ? why : "not found") +
                                  "); an NVIDIA driver is needed to run CUDA code objects"));
  }
  static Driver d;
  std::string missing;
  auto resolve = [&](auto& slot, const char* name, const char* fallback = nullptr) {
    void* p = ::dlsym(lib, name);
    if (p == nullptr && fallback != nullptr) p = ::dlsym(lib, fallback);
    if (p == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  resolve(d.cuGetErrorName, "cuGetErrorName");
  resolve(d.cuGetErrorString, "cuGetErrorString");
  resolve(d.cuInit, "cuInit");
  resolve(d.cuDeviceGetCount, "cuDeviceGetCount");
  resolve(d.cuDeviceGet, "cuDeviceGet");
  resolve(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
  resolve(d.cuCtxGetCurrent, "cuCtxGetCurrent");
  resolve(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(d.cuCtxSynchronize, "cuCtxSynchronize");
  resolve(d.cuModuleLoadData, "cuModuleLoadData");
  resolve(d.cuModuleUnload, "cuModuleUnload");
  resolve(d.cuModuleGetFunction, "cuModuleGetFunction");
  resolve(d.cuMemAlloc, "cuMemAlloc_v2");
  resolve(d.cuMemFree, "cuMemFree_v2");
  resolve(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  resolve(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(d.cuMemsetD8, "cuMemsetD8_v2");
  resolve(d.cuLaunchKernel, "cuLaunchKernel");
  if (!missing.empty()) {
    return R::failure(
        unavailable("the driver library lacks " + missing + "; the NVIDIA driver is too old or not a CUDA driver"));
  }
  const CUresult r = d.cuInit(0);
  if (r == kCudaErrorNoDevice) {
    return R::failure(unavailable("no CUDA device: cuInit failed with " + d.error(r)));
  }
  if (r != kCudaSuccess) return R::failure(unavailable("cuInit failed: " + d.error(r)));
  return R::success(&d);
}

const Result<const Driver*>& driver() {
  static const Result<const Driver*> loaded = loadDriver();
  return loaded;
}

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(const Driver& d, int device, CUdevice dev, CUcontext ctx, std::string arch)
      : d_(d), device_(device), dev_(dev), ctx_(ctx), arch_(std::move(arch)) {}
  ~CudaBackend() override { d_.cuDevicePrimaryCtxRelease(dev_); }

  const std::string& name() const override { return name_; }
  const std::string& arch() const override { return arch_; }
  int device() const override { return device_; }

  Result<ModuleHandle> loadModule(const std::uint8_t* image, std::size_t size) override {
    using R = Result<ModuleHandle>;
    if (image == nullptr || size == 0) return R::failure(error("cuModuleLoadData", "the code object is empty"));
    if (auto bad = makeCurrent()) return R::failure(*bad);
    CUmodule m = nullptr;
    if (const CUresult r = d_.cuModuleLoadData(&m, image); r != kCudaSuccess) {
      return R::failure(error("cuModuleLoadData", d_.error(r)));
    }
    return R::success(ModuleHandle{reinterpret_cast<std::uintptr_t>(m)});
  }

  Result<bool> unloadModule(ModuleHandle module) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuModuleUnload", d_.cuModuleUnload(reinterpret_cast<CUmodule>(module.value)));
  }

  Result<FunctionHandle> function(ModuleHandle module, const std::string& symbol) override {
    using R = Result<FunctionHandle>;
    if (auto bad = makeCurrent()) return R::failure(*bad);
    CUfunction f = nullptr;
    const CUresult r = d_.cuModuleGetFunction(&f, reinterpret_cast<CUmodule>(module.value), symbol.c_str());
    if (r != kCudaSuccess) return R::failure(error("cuModuleGetFunction('" + symbol + "')", d_.error(r)));
    return R::success(FunctionHandle{reinterpret_cast<std::uintptr_t>(f)});
  }

  Result<DevicePtr> allocate(std::size_t bytes) override {
    using R = Result<DevicePtr>;
    if (auto bad = makeCurrent()) return R::failure(*bad);
    CUdeviceptr p = 0;
    if (const CUresult r = d_.cuMemAlloc(&p, bytes); r != kCudaSuccess) {
      return R::failure(error("cuMemAlloc(" + std::to_string(bytes) + " bytes)", d_.error(r)));
    }
    return R::success(static_cast<DevicePtr>(p));
  }

  Result<bool> free(DevicePtr ptr) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuMemFree", d_.cuMemFree(static_cast<CUdeviceptr>(ptr)));
  }

  Result<bool> copyToDevice(DevicePtr dst, const void* src, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuMemcpyHtoD", d_.cuMemcpyHtoD(static_cast<CUdeviceptr>(dst), src, bytes));
  }

  Result<bool> copyToHost(void* dst, DevicePtr src, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuMemcpyDtoH", d_.cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), bytes));
  }

  Result<bool> fill(DevicePtr dst, std::uint8_t value, std::size_t bytes) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuMemsetD8", d_.cuMemsetD8(static_cast<CUdeviceptr>(dst), value, bytes));
  }

  Result<bool> launch(FunctionHandle function, const LaunchGeometry& g, const KernelArgs& args) override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    ArgPointers params(args);
    return check("cuLaunchKernel",
                 d_.cuLaunchKernel(reinterpret_cast<CUfunction>(function.value), g.grid.x, g.grid.y, g.grid.z,
                                   g.block.x, g.block.y, g.block.z, g.sharedBytes, nullptr, params.data(), nullptr));
  }

  Result<bool> synchronize() override {
    if (auto bad = makeCurrent()) return Result<bool>::failure(*bad);
    return check("cuCtxSynchronize", d_.cuCtxSynchronize());
  }

 private:
  Diagnostic error(const std::string& call, const std::string& what) const {
    return makeError(codes::DEVICE_ERROR, "", "",
                     "cuda device " + std::to_string(device_) + " (" + arch_ + "): " + call + " failed: " + what);
  }
  Result<bool> check(const char* call, CUresult r) const {
    if (r == kCudaSuccess) return Result<bool>::success(true);
    return Result<bool>::failure(error(call, d_.error(r)));
  }
  // The context is current per thread: a caller's thread may not have it yet,
  // or may have another library's. Asking first keeps the common case cheap.
  std::optional<Diagnostic> makeCurrent() const {
    CUcontext cur = nullptr;
    if (d_.cuCtxGetCurrent(&cur) == kCudaSuccess && cur == ctx_) return std::nullopt;
    if (const CUresult r = d_.cuCtxSetCurrent(ctx_); r != kCudaSuccess) return error("cuCtxSetCurrent", d_.error(r));
    return std::nullopt;
  }

  const Driver& d_;
  int device_;
  CUdevice dev_;
  CUcontext ctx_;
  std::string arch_;
  std::string name_ = "cuda";
};

}  // namespace

Result<std::shared_ptr<DeviceBackend>> openCudaBackend(int device) {
  using R = Result<std::shared_ptr<DeviceBackend>>;
  const auto& loaded = driver();
  if (!loaded) return R::failure(loaded.error());
  const Driver& d = *loaded.value();
  int count = 0;
  if (const CUresult r = d.cuDeviceGetCount(&count); r != kCudaSuccess) {
    return R::failure(unavailable("cuDeviceGetCount failed: " + d.error(r)));
  }
  if (count == 0) return R::failure(unavailable("no CUDA device: the driver reports none"));
  if (device < 0 || device >= count) {
    return R::failure(unavailable("there is no CUDA device " + std::to_string(device) + " (the driver reports " +
                                  std::to_string(count) + ")"));
  }
  CUdevice dev = 0;
  if (const CUresult r = d.cuDeviceGet(&dev, device); r != kCudaSuccess) {
    return R::failure(unavailable("cuDeviceGet(" + std::to_string(device) + ") failed: " + d.error(r)));
  }
  int major = 0;
  int minor = 0;
  for (auto [attr, slot] :
       {std::pair{kAttrComputeCapabilityMajor, &major}, std::pair{kAttrComputeCapabilityMinor, &minor}}) {
    if (const CUresult r = d.cuDeviceGetAttribute(slot, attr, dev); r != kCudaSuccess) {
      return R::failure(unavailable("cuDeviceGetAttribute(compute capability) failed: " + d.error(r)));
    }
  }
  CUcontext ctx = nullptr;
  if (const CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, dev); r != kCudaSuccess) {
    return R::failure(unavailable("cuDevicePrimaryCtxRetain(" + std::to_string(device) + ") failed: " + d.error(r)));
  }
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  return R::success(std::make_shared<CudaBackend>(d, device, dev, ctx, arch));
}

}  // namespace ukdpack
