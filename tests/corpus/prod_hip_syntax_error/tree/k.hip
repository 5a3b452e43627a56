extern "C" __global__ void ka(float* p) { p[0] = ; }
