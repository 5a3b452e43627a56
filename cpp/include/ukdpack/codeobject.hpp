// Code objects as the runtime sees them: a bare AMDGPU ELF, a clang offload
// bundle holding one amdgcn entry, or an NVIDIA cubin (ELF). Bounded parsing of
// untrusted bytes; no input crashes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/diagnostics.hpp"

namespace ukdpack {

enum class CodeObjectFormat { AmdgpuElf, OffloadBundle, CudaElf };

struct CodeObjectView {
  CodeObjectFormat format = CodeObjectFormat::AmdgpuElf;
  std::string_view elf;  // the ELF image inside `bytes` (the bundle entry, or all of it)
};

// Finds the ELF image; refuses non-objects and bundles with no or several
// amdgcn entries, by name.
Result<CodeObjectView> inspectCodeObject(std::string_view bytes);

// Names of the defined function symbols of the ELF (kernels), sorted.
Result<std::vector<std::string>> codeObjectKernels(std::string_view bytes);

// Whether the object defines `symbol` as a function (a kernel entry).
Result<bool> codeObjectHasKernel(std::string_view bytes, const std::string& symbol);

}  // namespace ukdpack
