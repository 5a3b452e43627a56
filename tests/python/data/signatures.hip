// Kernels whose parameter lists the signature tests spell out by hand
// (tests/python/test_codeobject.py). Each body uses its arguments so none is
// dropped; the layout follows the AMDGPU kernarg ABI (natural alignment).
#include <hip/hip_runtime.h>

struct Params {
  int a;     // 0
  float b;   // 4
  double c;  // 8, sizeof 16, alignof 8
};

// A non-inlined device function: a defined function symbol that is no kernel.
__device__ __attribute__((noinline)) float helper(float x) { return x * 3.0f + 1.0f; }

extern "C" __global__ void sig_pointers(const float* a, float* b, int* c) {
  b[threadIdx.x] = helper(a[threadIdx.x]) + static_cast<float>(c[0]);
}

extern "C" __global__ void sig_scalars(char c, short s, int i, long l, double d, double* out) {
  out[0] = c + s + i + static_cast<double>(l) + d;
}

extern "C" __global__ void sig_struct(Params p, float* out) {
  out[threadIdx.x + blockDim.x * blockIdx.x] = static_cast<float>(p.a + p.b + p.c);
}

extern "C" __global__ void sig_empty() {}

// Reads the implicit arguments, so the metadata lists hidden_* entries after n and out.
extern "C" __global__ void sig_hidden(int n, float* out) {
  const auto* implicit = static_cast<const unsigned*>(__builtin_amdgcn_implicitarg_ptr());
  out[0] = static_cast<float>(n + implicit[0]);
}

// C++ linkage: the symbol is the mangled name _Z11sig_mangledtPf.
__global__ void sig_mangled(unsigned short n, float* out) { out[0] = n + gridDim.x; }
