#!/usr/bin/env bash
# Builds, on this machine, what the device tests need on a GPU machine that has no
# network (as the lent H200 is): the extension for that machine's Python (3.12 by
# default) with zstd and libcrypto linked in, ukdpack_plan_overhead, and wheels of the
# Python packages its image lacks. Output: .device-carry/ and .whl/ (both git-ignored).
#   tests/device/make_carry.sh [PYTHON]   (default: pyenv's python3.12)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
py=${1:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 | head -1)}
ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
build=build/device-carry
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUKDPACK_BUILD_TESTS=ON \
  -DUKDPACK_PREFER_STATIC_DEPS=ON -DPython3_EXECUTABLE="$py" \
  -Dpybind11_DIR="$(.venv/bin/python -m pybind11 --cmakedir)" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_SHARED_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" -j"$(nproc)" --target ukdpack_python_runtime ukdpack_plan_overhead ukdpack-validate
rm -rf .device-carry && mkdir -p .device-carry/python/ukdpack .device-carry/bin
cp "$build"/python/ukdpack/_runtime*.so .device-carry/python/ukdpack/
cp "$build"/bin/ukdpack_plan_overhead "$build"/bin/ukdpack-validate .device-carry/bin/
mkdir -p .whl
for pkg in jsonschema==4.26.0 jsonschema-specifications referencing rpds-py zstandard pyelftools jsonschema-rs; do
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$ver" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl "$pkg"
done
ls -la .device-carry/* .whl
