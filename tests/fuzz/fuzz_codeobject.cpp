// libFuzzer target for the code object parser: the input is a code object
// (AMDGPU ELF, clang offload bundle or cubin).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ukdpack/archive/codeobject.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ukdpack::inspectCodeObject(bytes);
  auto kernels = ukdpack::codeObjectKernels(bytes);
  if (kernels && !kernels.value().empty()) (void)ukdpack::codeObjectHasKernel(bytes, kernels.value().front());
  (void)ukdpack::codeObjectHasKernel(bytes, "main");
  // The header-against-note check reads the metadata note's msgpack too.
  (void)ukdpack::checkCodeObjectTarget(bytes, "gfx90a");
  return 0;
}
