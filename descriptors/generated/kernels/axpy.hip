// Single-launch kernels of the generated engine: y[i] += a * x[i]. BLOCK and
// WIDTH (elements per thread) come from the variant set's build defines.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef WIDTH
#define WIDTH 1
#endif

template <class T>
__device__ void axpy(const T* x, T* y, float a, unsigned n) {
  const unsigned first = (blockIdx.x * BLOCK + threadIdx.x) * WIDTH;
  for (unsigned k = 0; k < WIDTH; ++k) {
    const unsigned i = first + k;
    if (i < n) y[i] = static_cast<T>(static_cast<float>(y[i]) + a * static_cast<float>(x[i]));
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
axpy_f32(const float* x, float* y, float a, unsigned n) { axpy(x, y, a, n); }

extern "C" __global__ void __launch_bounds__(BLOCK)
axpy_f16(const __half* x, __half* y, float a, unsigned n) { axpy(x, y, a, n); }
