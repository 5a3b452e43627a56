// The slotted engine "test:slots": three slots run in order over one workspace of
// 2n floats that every slot sees whole. prep fills the first half; main (two
// candidates) reads it and fills the second half; finish (two launches) folds the
// second half back into the first, then writes out. Each step reads what the one
// before wrote, so the exact output needs every pick, in slot order, over one
// workspace; the two main candidates give different outputs.

// prep: ws[i] = in[i] * 2 + i
extern "C" __global__ void slot_prep(const float* in, float* ws, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ws[i] = in[i] * 2.0f + static_cast<float>(i);
}

// main, candidate a: ws[n + i] = ws[n - 1 - i] * 0.5 + 3
extern "C" __global__ void slot_main_reverse(float* ws, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ws[n + i] = ws[n - 1 - i] * 0.5f + 3.0f;
}

// main, candidate b: ws[n + i] = ws[i] * 0.25 + 1
extern "C" __global__ void slot_main_forward(float* ws, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ws[n + i] = ws[i] * 0.25f + 1.0f;
}

// finish, launch shift: ws[i] = ws[n + i] + tag
extern "C" __global__ void slot_finish_shift(float* ws, unsigned n, unsigned tag) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ws[i] = ws[n + i] + static_cast<float>(tag);
}

// finish, launch store: out[i] = ws[n - 1 - i] * 2
extern "C" __global__ void slot_finish_store(const float* ws, float* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ws[n - 1 - i] * 2.0f;
}
