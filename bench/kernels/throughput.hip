// Kernels for bench/kpack_throughput.py. UNROLL, ROUNDS and VARIANT change the
// generated code (not just constants), so each define set gives a distinct object
// of realistic size and entropy.
#include <hip/hip_runtime.h>

#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef ROUNDS
#define ROUNDS 8
#endif
#ifndef VARIANT
#define VARIANT 1
#endif
#define BLOCK 256

extern "C" __global__ void __launch_bounds__(BLOCK)
bench_fma(const float* __restrict__ in, float* __restrict__ out, int n) {
  float acc[UNROLL];
#pragma unroll
  for (int i = 0; i < UNROLL; ++i) acc[i] = in[(blockIdx.x * BLOCK + threadIdx.x + i * 97) % n];
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r)
#pragma unroll
    for (int i = 0; i < UNROLL; ++i)
      acc[i] = fmaf(acc[i], acc[(i + r + VARIANT) % UNROLL], float(r * VARIANT + i) * 0.5f);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < UNROLL; ++i) s += acc[i];
  out[blockIdx.x * BLOCK + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
bench_transcendental(const float* __restrict__ in, float* __restrict__ out, int n) {
  float x = in[(blockIdx.x * BLOCK + threadIdx.x) % n];
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    x = (r + VARIANT) % 3 == 0 ? __sinf(x) * 1.5f : (r % 3 == 1 ? __expf(-x * x) : sqrtf(fabsf(x) + 1.f));
  }
  out[blockIdx.x * BLOCK + threadIdx.x] = x;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
bench_hash(const unsigned* __restrict__ in, unsigned* __restrict__ out, int n) {
  unsigned h[UNROLL];
#pragma unroll
  for (int i = 0; i < UNROLL; ++i) h[i] = in[(threadIdx.x * UNROLL + i) % n] ^ (0x9e3779b9u * (i + VARIANT));
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r)
#pragma unroll
    for (int i = 0; i < UNROLL; ++i) {
      h[i] ^= h[(i + 1) % UNROLL] >> ((r + i + VARIANT) % 31 + 1);
      h[i] *= 0x85ebca6bu + 2u * (r ^ VARIANT);
    }
  unsigned s = 0;
#pragma unroll
  for (int i = 0; i < UNROLL; ++i) s += h[i];
  out[blockIdx.x * BLOCK + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
bench_reduce(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[BLOCK * (VARIANT % 2 + 1)];
  const int t = threadIdx.x;
  float v = 0.f;
  for (int i = blockIdx.x * BLOCK + t; i < n; i += gridDim.x * BLOCK) v += in[i] * float(VARIANT);
  tile[t] = v;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}
