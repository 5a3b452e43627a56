// A prebuilt kernel for a generic family: built once for gfx10-3-generic and shipped
// in the shard of each member arch the tree is packed for (gfx1030 here). It uses
// compiler builtins only (no ROCm device libraries), so clang-19 builds it with
// -nogpulib; regen.sh compiles it.
#include <stdint.h>

extern "C" __global__ void scale_generic(float* out, const float* in, float factor, uint32_t n) {
  const uint32_t i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
                     __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] * factor;
}
