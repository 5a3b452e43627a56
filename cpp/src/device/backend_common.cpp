// The parts of execution.hpp every backend shares: argument lists and the RAII
// owners of device buffers and modules.
#include <cstring>
#include <utility>

#include "ukdpack/device/execution.hpp"

namespace ukdpack {

namespace {

// Each argument starts on a 16-byte boundary, so a driver reading it as its
// declared type (a float4 struct, a pointer) never reads misaligned.
constexpr std::size_t kArgAlign = 16;

Diagnostic noBackend(const char* what) {
  return makeError(codes::DEVICE_ERROR, "", "", std::string(what) + ": no device backend");
}

}  // namespace

KernelArgs& KernelArgs::add(const void* data, std::size_t size) {
  const std::size_t offset = (bytes_.size() + kArgAlign - 1) / kArgAlign * kArgAlign;
  bytes_.resize(offset + size);
  if (size > 0) std::memcpy(bytes_.data() + offset, data, size);
  offsets_.push_back(offset);
  sizes_.push_back(size);
  return *this;
}

ArgPointers::ArgPointers(const KernelArgs& args) {
  const std::size_t n = args.count();
  if (n <= small_.size()) {
    data_ = small_.data();
  } else {
    large_.resize(n);
    data_ = large_.data();
  }
  // The drivers read through these pointers and never write.
  for (std::size_t i = 0; i < n; ++i) data_[i] = const_cast<void*>(args.data(i));
}

// --------------------------------------------------------------------------- DeviceBuffer

Result<DeviceBuffer> DeviceBuffer::allocate(std::shared_ptr<DeviceBackend> backend, std::size_t bytes) {
  if (!backend) return Result<DeviceBuffer>::failure(noBackend("cannot allocate device memory"));
  DeviceBuffer out;
  out.backend_ = std::move(backend);
  if (bytes > 0) {
    auto ptr = out.backend_->allocate(bytes);
    if (!ptr) return Result<DeviceBuffer>::failure(ptr.error());
    out.ptr_ = ptr.value();
    out.size_ = bytes;
  }
  return Result<DeviceBuffer>::success(std::move(out));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(std::move(other.backend_)), ptr_(std::exchange(other.ptr_, 0)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = std::move(other.backend_);
    ptr_ = std::exchange(other.ptr_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

Result<bool> DeviceBuffer::reset() {
  Result<bool> out = Result<bool>::success(true);
  if (ptr_ != 0 && backend_) out = backend_->free(ptr_);
  ptr_ = 0;
  size_ = 0;
  return out;
}

namespace {

Result<bool> checkRange(std::size_t size, std::size_t offset, std::size_t bytes, const char* what) {
  if (offset > size || bytes > size - offset) {
    return Result<bool>::failure(makeError(codes::DEVICE_BOUNDS, "", "",
                                           std::string("cannot ") + what + " " + std::to_string(bytes) +
                                               " bytes at offset " + std::to_string(offset) +
                                               ": the device buffer holds " + std::to_string(size) + " bytes"));
  }
  return Result<bool>::success(true);
}

}  // namespace

Result<bool> DeviceBuffer::upload(const void* data, std::size_t bytes, std::size_t offset) {
  auto in = checkRange(size_, offset, bytes, "upload");
  if (!in || bytes == 0) return in;
  return backend_->copyToDevice(ptr_ + offset, data, bytes);
}

Result<bool> DeviceBuffer::download(void* data, std::size_t bytes, std::size_t offset) const {
  auto in = checkRange(size_, offset, bytes, "download");
  if (!in || bytes == 0) return in;
  return backend_->copyToHost(data, ptr_ + offset, bytes);
}

Result<bool> DeviceBuffer::zero() {
  if (size_ == 0) return Result<bool>::success(true);
  return backend_->fill(ptr_, 0, size_);
}

// --------------------------------------------------------------------------- DeviceModule

Result<DeviceModule> DeviceModule::load(std::shared_ptr<DeviceBackend> backend,
                                        const std::vector<std::uint8_t>& image) {
  if (!backend) return Result<DeviceModule>::failure(noBackend("cannot load a code object"));
  auto handle = backend->loadModule(image.data(), image.size());
  if (!handle) return Result<DeviceModule>::failure(handle.error());
  DeviceModule out;
  out.backend_ = std::move(backend);
  out.handle_ = handle.value();
  return Result<DeviceModule>::success(std::move(out));
}

DeviceModule::DeviceModule(DeviceModule&& other) noexcept
    : backend_(std::move(other.backend_)), handle_(std::exchange(other.handle_, ModuleHandle{})) {}

DeviceModule& DeviceModule::operator=(DeviceModule&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = std::move(other.backend_);
    handle_ = std::exchange(other.handle_, ModuleHandle{});
  }
  return *this;
}

DeviceModule::~DeviceModule() { release(); }

void DeviceModule::release() {
  // An unload failure at teardown has no one to report to; the driver frees
  // the module with its context anyway.
  if (handle_ && backend_) (void)backend_->unloadModule(handle_);
  handle_ = ModuleHandle{};
}

Result<FunctionHandle> DeviceModule::function(const std::string& symbol) const {
  if (!backend_ || !handle_) {
    return Result<FunctionHandle>::failure(noBackend(("cannot resolve '" + symbol + "'").c_str()));
  }
  return backend_->function(handle_, symbol);
}

}  // namespace ukdpack
