extern "C" __global__ void ka(float* p) { p[0] = 1.0f; }
extern "C" __global__ void kb(float* p) { p[0] = 2.0f; }
