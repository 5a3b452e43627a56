// A kernel built from compiler builtins only (no device libraries), so a plain clang
// (clang++-19 -nogpulib) builds it for generic targets and target IDs with features.
#include <stdint.h>

extern "C" __global__ void scale_generic(float* out, const float* in, float factor, uint32_t n) {
  const uint32_t i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
                     __builtin_amdgcn_workitem_id_x();
  if (i < n) out[i] = in[i] * factor;
}
