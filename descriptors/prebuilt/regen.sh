#!/usr/bin/env bash
# Rebuilds the prebuilt objects of this folder with hipcc and records them in DVC:
# objects/<arch>/reduce.hsaco for each arch, tracked by objects/<arch>.dvc, pushed to
# the repository's local remote (dvc-remote/); and, with clang-19 (hipcc cannot build
# generic targets), objects/gfx10-3-generic/scale.hsaco. Run from anywhere; needs
# hipcc, clang++-19 and dvc.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dvc=${DVC:-"$repo/.venv/bin/dvc"}
export HIP_PLATFORM=amd
cd "$here"
for arch in gfx90a gfx940 gfx1030; do
  mkdir -p "objects/$arch"
  hipcc --genco --offload-arch="$arch" -O3 -fuse-cuid=none src/reduce.hip \
    -o "objects/$arch/reduce.hsaco"
done
mkdir -p objects/gfx10-3-generic
"${CLANG:-clang++-19}" -c -x hip --cuda-device-only --no-gpu-bundle-output -nogpulib \
  -mcode-object-version=6 --offload-arch=gfx10-3-generic -O3 -fuse-cuid=none \
  src/scale_generic.hip -o objects/gfx10-3-generic/scale.hsaco
cd "$repo"
for arch in gfx90a gfx940 gfx1030 gfx10-3-generic; do
  "$dvc" add -q "descriptors/prebuilt/objects/$arch"
done
"$dvc" push -q
