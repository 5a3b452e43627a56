// A single-launch kernel: out[i] = in[i] * alpha. Replace the body with yours; "entry" in
// scale.kdp.json names the extern "C" function, "build.defines" sets BLOCK.
#include <hip/hip_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
scale_f32(const float* in, float* out, float alpha, unsigned n) {
  const unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) out[i] = in[i] * alpha;
}
