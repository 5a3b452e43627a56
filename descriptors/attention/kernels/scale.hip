// Single-launch kernels: out[i] = in[i] * alpha.
#include "common.h"
#include <hip/hip_fp16.h>

extern "C" __global__ void __launch_bounds__(BLOCK)
scale_f32(const float* in, float* out, float alpha, unsigned n) {
  const unsigned i = global_index();
  if (i < n) out[i] = in[i] * alpha;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
scale_f16(const __half* in, __half* out, float alpha, unsigned n) {
  const unsigned i = global_index();
  if (i < n) out[i] = __float2half(__half2float(in[i]) * alpha);
}
