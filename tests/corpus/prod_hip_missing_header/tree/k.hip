#include "nowhere.h"
extern "C" __global__ void ka(float* p) { p[0] = 1.0f; }
