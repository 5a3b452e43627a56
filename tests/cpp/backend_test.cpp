// Device backends on a host without a GPU (they must fail cleanly, saying
// why), the argument lists they launch with, and cubin symbols read from the
// committed nvcc output in tests/data/objects (see tests/data/make_objects.sh).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime_support.hpp"
#include "ukdpack/archive/codeobject.hpp"
#include "ukdpack/device/execution.hpp"

namespace {

const std::vector<std::string> kCubinKernels = {"split_kv_consume", "split_kv_produce", "split_kv_unused"};

std::string readObject(const std::string& name) {
  const auto bytes = ukdtest::readBytes(ukdtest::testData("data/objects/" + name));
  EXPECT_FALSE(bytes.empty()) << "missing test object " << name;
  return std::string(bytes.begin(), bytes.end());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CudaBackend, OpeningSaysWhyItCannotRunNamingTheDriverLibrary) {
  auto backend = ukdpack::openCudaBackend();
  if (backend) {  // a machine with an NVIDIA driver and device
    EXPECT_EQ(backend.value()->name(), "cuda");
    EXPECT_EQ(backend.value()->arch().rfind("sm_", 0), 0u) << backend.value()->arch();
    return;
  }
  const ukdpack::Diagnostic& d = backend.error();
  EXPECT_EQ(d.code, "DEVICE_UNAVAILABLE");
  EXPECT_TRUE(contains(d.message, "libcuda.so.1")) << d.message;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    EXPECT_TRUE(contains(d.message, "cannot load the CUDA driver library libcuda.so.1")) << d.message;
    EXPECT_TRUE(contains(d.message, "an NVIDIA driver is needed")) << d.message;
  }
  // The same answer again: the driver is looked for once per process.
  auto again = ukdpack::openCudaBackend(1);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, d.message);
}

TEST(HipBackend, OpeningWithoutADeviceFailsCleanly) {
  auto backend = ukdpack::openHipBackend();
  if (backend) {  // a machine with a ROCm GPU
    EXPECT_EQ(backend.value()->name(), "hip");
    EXPECT_EQ(backend.value()->arch().rfind("gfx", 0), 0u) << backend.value()->arch();
    EXPECT_EQ(backend.value()->arch().find(':'), std::string::npos) << "the arch is bare";
    return;
  }
  const ukdpack::Diagnostic& d = backend.error();
  EXPECT_EQ(d.code, "DEVICE_UNAVAILABLE");
  if (!ukdpack::hipBackendCompiled()) {
    EXPECT_TRUE(contains(d.message, "has no HIP backend")) << d.message;
    EXPECT_TRUE(contains(d.message, "UKDPACK_WITH_HIP")) << d.message;
  } else {
    EXPECT_TRUE(contains(d.message, "no HIP device") || contains(d.message, "cannot load the HIP runtime") ||
                contains(d.message, "there is no HIP device"))
        << d.message;
  }
  auto again = ukdpack::openHipBackend(3);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, "DEVICE_UNAVAILABLE");
}

// --------------------------------------------------------------------------- argument lists

TEST(KernelArgs, KeepsEachArgumentsBytesAlignedAndInOrder) {
  ukdpack::KernelArgs args;
  struct Params {
    unsigned n;
    unsigned splits;
    float scale;
  } p{4096, 16, 0.5f};
  const char one = 7;
  args.addPointer(0x1234).addValue(p).add(&one, 1).addValue(3.0);
  ASSERT_EQ(args.count(), 4u);
  EXPECT_EQ(args.size(0), 8u);
  EXPECT_EQ(args.size(1), 12u);
  EXPECT_EQ(args.size(2), 1u);
  EXPECT_EQ(args.size(3), 8u);
  for (std::size_t i = 0; i < args.count(); ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(args.data(i)) % 8, 0u) << "argument " << i;
  }
  ukdpack::DevicePtr ptr = 0;
  std::memcpy(&ptr, args.data(0), 8);
  EXPECT_EQ(ptr, 0x1234u);
  Params back{};
  std::memcpy(&back, args.data(1), sizeof back);
  EXPECT_EQ(back.splits, 16u);
  EXPECT_EQ(*static_cast<const char*>(args.data(2)), 7);

  ukdpack::ArgPointers pointers(args);
  for (std::size_t i = 0; i < args.count(); ++i) EXPECT_EQ(pointers.data()[i], args.data(i));
  args.clear();
  EXPECT_EQ(args.count(), 0u);
}

TEST(KernelArgs, LongListsGetTheirPointersToo) {
  ukdpack::KernelArgs args;
  for (std::uint32_t i = 0; i < 100; ++i) args.addValue(i);
  ukdpack::ArgPointers pointers(args);
  for (std::uint32_t i = 0; i < 100; ++i) EXPECT_EQ(*static_cast<const std::uint32_t*>(pointers.data()[i]), i);
}

// --------------------------------------------------------------------------- cubins

TEST(Cubin, KernelsAreTheEntryFunctions) {
  const std::string cubin = readObject("split_kv.sm_90.cubin");
  auto view = ukdpack::inspectCodeObject(cubin);
  ASSERT_TRUE(view) << view.error().str();
  EXPECT_EQ(view.value().format, ukdpack::CodeObjectFormat::CudaElf);
  auto names = ukdpack::codeObjectKernels(cubin);
  ASSERT_TRUE(names) << names.error().str();
  EXPECT_EQ(names.value(), kCubinKernels);
  for (const std::string& k : kCubinKernels) {
    auto has = ukdpack::codeObjectHasKernel(cubin, k);
    ASSERT_TRUE(has) << has.error().str();
    EXPECT_TRUE(has.value()) << k;
  }
  // The device function is local here, and a section symbol is no kernel either.
  for (const char* other : {"scaled", "_Z6scaledfff", ".text.split_kv_produce", "split_kv"}) {
    EXPECT_FALSE(ukdpack::codeObjectHasKernel(cubin, other).value()) << other;
  }
}

TEST(Cubin, ARelocatableCubinsDeviceFunctionsAreNotKernels) {
  // -rdc exports the device function _Z6scaledfff as a global function, without STO_CUDA_ENTRY.
  const std::string cubin = readObject("split_kv.sm_90.rdc.cubin");
  auto names = ukdpack::codeObjectKernels(cubin);
  ASSERT_TRUE(names) << names.error().str();
  EXPECT_EQ(names.value(), kCubinKernels);
  EXPECT_FALSE(ukdpack::codeObjectHasKernel(cubin, "_Z6scaledfff").value());
}

TEST(Cubin, TruncatedOrDamagedCubinsAreRefusedNotRead) {
  const std::string cubin = readObject("split_kv.sm_90.cubin");
  // Every prefix: a clean refusal or (once the tables are whole) the full list.
  for (std::size_t n = 0; n < cubin.size(); n += 97) {
    auto names = ukdpack::codeObjectKernels(std::string_view(cubin).substr(0, n));
    if (names) continue;
    EXPECT_FALSE(names.error().code.empty());
  }
  // Section headers pointed past the end.
  std::string far = cubin;
  for (int i = 0; i < 8; ++i) far[0x28 + i] = static_cast<char>(0x7f);
  auto bad = ukdpack::codeObjectKernels(far);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "CODEOBJECT_MALFORMED");
  EXPECT_TRUE(contains(bad.error().message, "malformed ELF")) << bad.error().message;
}
