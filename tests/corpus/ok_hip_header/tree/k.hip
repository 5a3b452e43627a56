#include "k.h"
extern "C" __global__ void ka(float* p) { p[0] = VAL; }
