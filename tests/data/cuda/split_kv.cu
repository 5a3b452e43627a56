// The CUDA twin of hip/split_kv.hip, for the cubin tests: a two-launch kernel
// over one workspace (produce writes per-block maxima of q.k, consume reduces
// them), an exported kernel no launch names, and a device function that is not
// a kernel.
#define BLOCK 256

struct SplitParams {
  unsigned n;       // keys
  unsigned splits;  // blocks of produce
  float scale;
};

__device__ __noinline__ float scaled(float a, float b, float s) { return a * b * s; }

extern "C" __global__ void __launch_bounds__(BLOCK)
split_kv_produce(const float* q, const float* k, float* workspace, SplitParams p) {
  __shared__ float best[BLOCK];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  best[threadIdx.x] = i < p.n ? scaled(q[0], k[i], p.scale) : -3.0e38f;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) best[threadIdx.x] = fmaxf(best[threadIdx.x], best[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) workspace[blockIdx.x] = best[0];
}

extern "C" __global__ void __launch_bounds__(BLOCK)
split_kv_consume(const float* workspace, float* out, SplitParams p) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float m = -3.0e38f;
  for (unsigned b = 0; b < p.splits; ++b) m = fmaxf(m, workspace[b] + static_cast<float>(b));
  out[0] = m;
}

// Exported but named by no launch: a translation unit may hold more kernels.
extern "C" __global__ void split_kv_unused() {}
