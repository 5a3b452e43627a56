extern "C" __device__ void ka(float* p) { p[0] = 1.0f; }
extern "C" __global__ void kb(float* p) { ka(p); }
