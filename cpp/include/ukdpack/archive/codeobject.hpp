// Code objects as the runtime sees them: a bare AMDGPU ELF, a clang offload
// bundle holding one amdgcn entry, or an NVIDIA cubin (ELF). Bounded parsing of
// untrusted bytes; no input crashes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ukdpack/base/diagnostics.hpp"

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

// The descriptor of the first note with owner "AMDGPU" and type 32 in the
// SHT_NOTE sections of the ELF64 image `elf`, in section order, or nullopt when
// there is none or the section headers, their names or the notes before it do
// not hold together (the reader that words problems finds those).
std::optional<std::string_view> amdgpuMetadataNote(std::string_view elf);

// The processor an AMDGPU code object is built for, once its ELF header and its
// metadata note agree: the e_flags machine (EF_AMDGPU_MACH, which ROCm's loader
// picks the ISA by) must name the processor of the note's amdhsa.target, and
// with `arch` (a target ID: the shard's arch, or the archive entry's) the object
// must run there. CODEOBJECT_TARGET_MISMATCH names both sides. An object with no
// note or no amdhsa.target is left to the readers that word that, and a cubin
// (its e_flags is its target) passes with an empty processor.
Result<std::string> checkCodeObjectTarget(std::string_view bytes, std::string_view arch = {});

}  // namespace ukdpack
