// Shared by the example kernels; a header the compile cache and depfile track.
#pragma once
#include <hip/hip_runtime.h>

#ifndef BLOCK
#define BLOCK 256
#endif

__device__ inline unsigned global_index() { return blockIdx.x * BLOCK + threadIdx.x; }
