__global__ void ka(float* p) { p[0] = 1.0f; }
