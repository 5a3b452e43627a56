// A two-launch kernel of the generated engine: partial writes per-block sums of
// squares into the workspace, finish reduces them to the norm.
#include <hip/hip_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
norm_partial(const float* x, float* workspace, unsigned n) {
  __shared__ float sum[BLOCK];
  const unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  sum[threadIdx.x] = i < n ? x[i] * x[i] : 0.0f;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sum[threadIdx.x] += sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) workspace[blockIdx.x] = sum[0];
}

extern "C" __global__ void norm_finish(const float* workspace, float* out, unsigned blocks) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float total = 0.0f;
  for (unsigned b = 0; b < blocks; ++b) total += workspace[b];
  out[0] = sqrtf(total);
}
