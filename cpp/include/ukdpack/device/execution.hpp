// Device execution (issue "Device end to end"): the backend a plan
// runs through, the raw argument lists kernels take, and RAII owners for
// modules and device buffers. Backends load their driver at run time, so the
// library builds and links where no GPU runtime is installed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"

namespace ukdpack {

// A device address (CUdeviceptr / hipDeviceptr_t as an integer); 0 is none.
using DevicePtr = std::uint64_t;

// Opaque handles a backend gives out: its driver's pointers as integers,
// meaningful only to the backend that made them.
struct ModuleHandle {
  std::uintptr_t value = 0;
  explicit operator bool() const { return value != 0; }
};
struct FunctionHandle {
  std::uintptr_t value = 0;
  explicit operator bool() const { return value != 0; }
};

struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
};

struct LaunchGeometry {
  Dim3 grid;
  Dim3 block;
  std::uint32_t sharedBytes = 0;  // dynamic shared memory
};

// A kernel's argument list: each argument its raw bytes, in order, as the
// kernel's parameter buffer holds it (a device pointer is 8 bytes; scalars and
// structs by value). One buffer for all of them, so a list reused launch after
// launch stops allocating once it has grown.
class KernelArgs {
 public:
  void clear() {
    bytes_.clear();
    offsets_.clear();
    sizes_.clear();
  }
  KernelArgs& add(const void* data, std::size_t size);
  KernelArgs& addPointer(DevicePtr ptr) { return add(&ptr, sizeof ptr); }
  template <class T>
  KernelArgs& addValue(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied as raw bytes");
    return add(&value, sizeof value);
  }

  std::size_t count() const { return sizes_.size(); }
  std::size_t size(std::size_t i) const { return sizes_[i]; }
  const void* data(std::size_t i) const { return bytes_.data() + offsets_[i]; }

 private:
  std::vector<std::uint8_t> bytes_;
  std::vector<std::size_t> offsets_;
  std::vector<std::size_t> sizes_;
};

// What one launch runs with: geometry and arguments.
struct LaunchArgs {
  LaunchGeometry geometry;
  KernelArgs args;
};

// The `void** kernelParams` array cuLaunchKernel / hipModuleLaunchKernel take,
// pointing into `args`; short lists need no allocation.
class ArgPointers {
 public:
  explicit ArgPointers(const KernelArgs& args);
  void** data() { return data_; }

 private:
  std::array<void*, 32> small_{};
  std::vector<void*> large_;
  void** data_ = nullptr;
};

// One GPU, as a plan sees it. Every call returns a result naming the failing
// driver call and the driver's own error; none throws. Handles are only valid
// with the backend that made them.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const std::string& name() const = 0;  // "cuda" or "hip"
  virtual const std::string& arch() const = 0;  // bare: "sm_90", "gfx90a"
  virtual int device() const = 0;               // the ordinal it was opened on

  virtual Result<ModuleHandle> loadModule(const std::uint8_t* image, std::size_t size) = 0;
  virtual Result<bool> unloadModule(ModuleHandle module) = 0;
  virtual Result<FunctionHandle> function(ModuleHandle module, const std::string& symbol) = 0;

  virtual Result<DevicePtr> allocate(std::size_t bytes) = 0;  // bytes > 0
  virtual Result<bool> free(DevicePtr ptr) = 0;
  virtual Result<bool> copyToDevice(DevicePtr dst, const void* src, std::size_t bytes) = 0;
  virtual Result<bool> copyToHost(void* dst, DevicePtr src, std::size_t bytes) = 0;
  virtual Result<bool> fill(DevicePtr dst, std::uint8_t value, std::size_t bytes) = 0;

  // Enqueues one launch on the default stream; synchronize() waits for all.
  virtual Result<bool> launch(FunctionHandle function, const LaunchGeometry& geometry, const KernelArgs& args) = 0;
  virtual Result<bool> synchronize() = 0;
};

// Device memory owned by one object, freed when it goes. Zero bytes is a
// valid, empty buffer (pointer 0) that needs no driver call.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(std::shared_ptr<DeviceBackend> backend, std::size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  DevicePtr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }
  const std::shared_ptr<DeviceBackend>& backend() const { return backend_; }

  // Bounds-checked against size(): DEVICE_BOUNDS when `offset + bytes` passes the end.
  Result<bool> upload(const void* data, std::size_t bytes, std::size_t offset = 0);
  Result<bool> download(void* data, std::size_t bytes, std::size_t offset = 0) const;
  Result<bool> zero();

  // Frees now; a failure to free is returned (the destructor cannot report it).
  Result<bool> reset();

 private:
  std::shared_ptr<DeviceBackend> backend_;
  DevicePtr ptr_ = 0;
  std::size_t size_ = 0;
};

// A loaded code object, unloaded when it goes.
class DeviceModule {
 public:
  static Result<DeviceModule> load(std::shared_ptr<DeviceBackend> backend, const std::vector<std::uint8_t>& image);

  DeviceModule() = default;
  DeviceModule(DeviceModule&& other) noexcept;
  DeviceModule& operator=(DeviceModule&& other) noexcept;
  DeviceModule(const DeviceModule&) = delete;
  DeviceModule& operator=(const DeviceModule&) = delete;
  ~DeviceModule();

  ModuleHandle handle() const { return handle_; }
  Result<FunctionHandle> function(const std::string& symbol) const;

 private:
  void release();
  std::shared_ptr<DeviceBackend> backend_;
  ModuleHandle handle_;
};

// The NVIDIA driver backend: libcuda.so.1 loaded with dlopen, the primary
// context of `device`. Fails with DEVICE_UNAVAILABLE (naming libcuda.so.1)
// when there is no driver or no such device, DEVICE_ERROR for other failures.
Result<std::shared_ptr<DeviceBackend>> openCudaBackend(int device = 0);

// The HIP runtime backend: libamdhip64.so loaded with dlopen. Fails with
// DEVICE_UNAVAILABLE when the runtime or a device is missing, or when this
// build has no HIP backend (hipBackendCompiled() is false).
Result<std::shared_ptr<DeviceBackend>> openHipBackend(int device = 0);

// Whether the HIP backend was compiled in (UKDPACK_WITH_HIP found the headers).
bool hipBackendCompiled();

}  // namespace ukdpack
