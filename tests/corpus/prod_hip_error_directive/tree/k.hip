#if BAD
#error BAD is set
#endif
extern "C" __global__ void ka(float* p) { p[0] = 1.0f; }
