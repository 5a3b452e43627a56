// A two-launch kernel in one translation unit: partial writes one sum per block into the
// workspace, combine adds them up. Rename the entry points together with twostage.kdp.json.
#include <hip/hip_runtime.h>

#define BLOCK 256

extern "C" __global__ void __launch_bounds__(BLOCK)
twostage_partial(const float* in, float* workspace, unsigned n) {
  __shared__ float sum[BLOCK];
  const unsigned i = blockIdx.x * BLOCK + threadIdx.x;
  sum[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sum[threadIdx.x] += sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) workspace[blockIdx.x] = sum[0];
}

extern "C" __global__ void twostage_combine(const float* workspace, float* out,
                                            unsigned blocks) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float total = 0.0f;
  for (unsigned b = 0; b < blocks; ++b) total += workspace[b];
  out[0] = total;
}
