// Split attention backward as a slotted engine: prep (dO.O row sums), then dK/dV
// (two tile variants of one computation), then dQ (partial products per block,
// then their reduction). Each slot's kernel reads what the slot before wrote in
// the one workspace the engine's slots share.
#include "../../attention/kernels/common.h"

struct BwdParams {
  unsigned n;       // rows
  unsigned blocks;  // blocks of dq_partial
  float scale;
};

// prep: workspace[i] = dO[i] * O[i] (the row term every later slot reads).
extern "C" __global__ void __launch_bounds__(BLOCK)
bwd_prep(const float* d_out, const float* out, float* workspace, BwdParams p) {
  const unsigned i = global_index();
  if (i < p.n) workspace[i] = d_out[i] * out[i];
}

// dK/dV, 256-thread tiles: workspace[n + i] = workspace[i] * scale.
extern "C" __global__ void __launch_bounds__(256)
bwd_dkdv_b256(float* workspace, float* dk, float* dv, BwdParams p) {
  const unsigned i = blockIdx.x * 256 + threadIdx.x;
  if (i >= p.n) return;
  workspace[p.n + i] = workspace[i] * p.scale;
  dk[i] = workspace[p.n + i];
  dv[i] = workspace[i];
}

// dK/dV, 128-thread tiles: the same result with smaller blocks.
extern "C" __global__ void __launch_bounds__(128)
bwd_dkdv_b128(float* workspace, float* dk, float* dv, BwdParams p) {
  const unsigned i = blockIdx.x * 128 + threadIdx.x;
  if (i >= p.n) return;
  workspace[p.n + i] = workspace[i] * p.scale;
  dk[i] = workspace[p.n + i];
  dv[i] = workspace[i];
}

// dQ, launch partial: per block, the sum of workspace[n + i] into workspace[2n + block].
extern "C" __global__ void __launch_bounds__(BLOCK)
bwd_dq_partial(float* workspace, BwdParams p) {
  __shared__ float sum[BLOCK];
  const unsigned i = global_index();
  sum[threadIdx.x] = i < p.n ? workspace[p.n + i] : 0.0f;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sum[threadIdx.x] += sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) workspace[2 * p.n + blockIdx.x] = sum[0];
}

// dQ, launch reduce: the partial sums into dq[0].
extern "C" __global__ void bwd_dq_reduce(const float* workspace, float* dq, BwdParams p) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float total = 0.0f;
  for (unsigned b = 0; b < p.blocks; ++b) total += workspace[2 * p.n + b];
  dq[0] = total;
}
