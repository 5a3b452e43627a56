// Prebuilt kernels (their objects are compiled by regen.sh and live in DVC).
// reduce_sum: one launch. twostage_partial + twostage_combine: two launches over
// one workspace, exported by one translation unit.
#include <hip/hip_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_sum(const float* in, float* out, unsigned n) {
  __shared__ float acc[BLOCK];
  const unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  acc[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, acc[0]);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
twostage_partial(const float* in, float* workspace, unsigned n) {
  const unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) workspace[i] = in[i] * in[i];
}

extern "C" __global__ void twostage_combine(const float* workspace, float* out, unsigned n,
                                            double scale) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double total = 0.0;
  for (unsigned i = 0; i < n; ++i) total += workspace[i];
  out[0] = static_cast<float>(total * scale);
}
