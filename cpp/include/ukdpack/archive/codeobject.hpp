// Code objects as the runtime sees them: a bare AMDGPU ELF, a clang offload
// bundle holding one amdgcn entry, or an NVIDIA cubin (ELF). Bounded parsing of
// untrusted bytes; no input crashes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// An integer of a metadata document as written: msgpack holds negative and
// unsigned 64-bit values alike (the packer keeps either; the shard's reader
// refuses a negative size).
struct MetadataInt {
  bool negative = false;
  std::uint64_t bits = 0;  // the value, or its two's complement when negative
};

// One explicit kernel argument as a code object's metadata records it.
struct MetadataArg {
  std::string kind;  // .value_kind; a cubin's are by_value
  MetadataInt size;
  MetadataInt offset;
  std::optional<std::string> name;
};

// What the packer reads from a code object: its target and each kernel's explicit
// arguments (hidden ones dropped), kernels in the metadata's order (a cubin's by name).
struct CodeObjectMetadata {
  std::optional<std::string> target;  // amdhsa.target, or nvptx64-nvidia-cuda--sm_<NN>
  std::vector<std::pair<std::string, std::vector<MetadataArg>>> kernels;
};

// The metadata an AMDGPU metadata note's descriptor (a msgpack document) holds;
// CODEOBJECT_MALFORMED names what is wrong with it ("bad AMDGPU metadata: ...").
Result<CodeObjectMetadata> amdgpuNoteMetadata(std::string_view note);

// The metadata of a code object: an AMDGPU object's from its metadata note, a cubin's
// from its .nv.info.<kernel> sections (EIATTR_KPARAM_INFO records) and its ELF header's
// SM number. Refuses what inspectCodeObject refuses, and sections, notes or records that
// do not hold together, by name.
Result<CodeObjectMetadata> codeObjectMetadata(std::string_view bytes);

}  // namespace ukdpack
