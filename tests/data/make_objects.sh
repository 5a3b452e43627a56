#!/usr/bin/env bash
# Regenerates the committed code objects under objects/ from hip/ with hipcc and
# from cuda/ with nvcc.
# They are real compiler output, committed so the C++ tests need no compiler.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export HIP_PLATFORM=amd
for arch in gfx90a gfx1030; do
  hipcc --genco --offload-arch="$arch" -O3 -fuse-cuid=none hip/split_kv.hip \
    -o "objects/split_kv.$arch.bundle.hsaco"
  # The archive stores the bare ELF inside the bundle.
  clang-offload-bundler-15 --type=o --unbundle \
    --targets="hipv4-amdgcn-amd-amdhsa--$arch" \
    --input="objects/split_kv.$arch.bundle.hsaco" --output="objects/split_kv.$arch.hsaco"
done
# The CUDA twin as a cubin (nvcc, CUDA 12 or later), and a relocatable (-rdc)
# one whose device function is a global symbol but not an entry.
nvcc -cubin -arch=sm_90 -O3 cuda/split_kv.cu -o objects/split_kv.sm_90.cubin
nvcc -cubin -rdc=true -arch=sm_90 -O3 cuda/split_kv.cu -o objects/split_kv.sm_90.rdc.cubin
