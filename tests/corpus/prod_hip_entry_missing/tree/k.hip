extern "C" __global__ void kb(float* p) { p[0] = 1.0f; }
