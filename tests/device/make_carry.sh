#!/usr/bin/env bash
# Builds, on this machine, what the device tests need on a GPU machine that has no
# network (as the lent H200 is): the extension for that machine's Python (3.12 by
# default), ukdpack_plan_overhead, the shared libraries they link (used there only
# where that machine lacks them) and wheels of the packer's dependencies for that
# Python. Output: .device-carry/ and .whl/ (both git-ignored).
#   tests/device/make_carry.sh [PYTHON]   (default: pyenv's python3.12)
# PYTHON must be an interpreter of the GPU machine's version with its headers.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
py=${1:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)}
if [ -z "$py" ] || ! "$py" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; then
  echo "make_carry.sh: name a Python of the GPU machine's version that has its headers (Python.h)" >&2
  exit 2
fi
ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
build=build/device-carry
# Linked dynamically: Debian's static libzstd.a is not position-independent, so it
# cannot go into the extension; the shared libraries travel instead (below).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUKDPACK_BUILD_TESTS=ON \
  -DUKDPACK_PREFER_STATIC_DEPS=OFF -DPython3_EXECUTABLE="$py" \
  -Dpybind11_DIR="$(.venv/bin/python -m pybind11 --cmakedir)" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
  -DCMAKE_SHARED_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" -j"$(nproc)" --target ukdpack_python_runtime ukdpack_plan_overhead ukdpack-validate
rm -rf .device-carry && mkdir -p .device-carry/python/ukdpack .device-carry/bin .device-carry/lib
cp "$build"/python/ukdpack/_runtime*.so .device-carry/python/ukdpack/
cp "$build"/bin/ukdpack_plan_overhead "$build"/bin/ukdpack-validate .device-carry/bin/
# The non-system libraries they need, by soname; run_offline.sh puts this folder on
# the loader's path only for those the GPU machine does not have.
for lib in $(ldd .device-carry/python/ukdpack/_runtime*.so .device-carry/bin/* |
  awk '/=> \// && !/libc\.so|libm\.so|ld-linux|libpthread|libdl\.so|librt\.so/ {print $3}' | sort -u); do
  cp -L "$lib" .device-carry/lib/
done
# Wheels: the packer's runtime dependencies from pyproject.toml, resolved for that
# Python (pip resolves transitive needs when only binary wheels are allowed).
mapfile -t deps < <(.venv/bin/python -c '
import tomllib
for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    print(d)')
rm -rf .whl && mkdir -p .whl
.venv/bin/python -m pip download -q --only-binary=:all: --python-version "$ver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl "${deps[@]}"
du -sh .device-carry .whl
ls .device-carry/* .whl
