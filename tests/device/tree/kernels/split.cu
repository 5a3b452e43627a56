// A two-launch kernel over one workspace. produce writes ws[i] = in[i] * scale + i;
// consume reads the workspace back to front: out[i] = ws[n - 1 - i] * p.a + p.b.
// The exact output is reachable only when produce ran first, over the workspace
// consume reads, and every element of it.
struct Affine {
  float a;
  float b;
  unsigned tag;
};

extern "C" __global__ void split_produce(const float* in, float* ws, unsigned n, float scale) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ws[i] = in[i] * scale + static_cast<float>(i);
}

extern "C" __global__ void split_consume(const float* ws, float* out, unsigned n, Affine p) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ws[n - 1 - i] * p.a + p.b + static_cast<float>(p.tag);
}
