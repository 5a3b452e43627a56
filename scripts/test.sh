#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the lint and type checks, the Python
# tests and the C++ tests. Extra arguments go to pytest.
#   scripts/test.sh --device   the device tests (tests/device/) on a machine with a GPU
#   scripts/test.sh --sanitize the C++ tests built with UKDPACK_SANITIZE=address;undefined
#                              (build/asan), then every fuzz seed replayed under ASan+UBSan
#   scripts/test.sh --quick    a fast subset (under 2 minutes on a loaded 2-core machine):
#                              ruff, mypy, pytest without the tests marked heavy (HEAVY in
#                              tests/python/conftest.py) or slow, and the C++ tests (seconds)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
export HIP_PLATFORM=amd
# The CMake tests build ukdpack's C++ several times (a superbuild per generator, an
# installed copy) with the same flags as setup.sh's build, which fills the same ccache:
# each source is compiled once. Its cache lives in the build tree, never in the user's home.
export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR="$root/build/ccache"

if [ "${1:-}" = "--device" ]; then
  shift
  export UKDPACK_PLAN_OVERHEAD="$root/build/py/bin/ukdpack_plan_overhead"
  exec python -m pytest tests/device -v -s "$@"
fi

if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DUKDPACK_SANITIZE="address;undefined" -DUKDPACK_BUILD_PYTHON=OFF -DUKDPACK_BUILD_TESTS=ON
  cmake --build build/asan
  # Any sanitizer report fails the test that triggered it (UBSan does not recover).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan --output-on-failure -j 2
  exec tests/fuzz/run.sh 0
fi

quick=""
if [ "${1:-}" = "--quick" ]; then
  shift
  quick=1
fi

# The example tree's prebuilt objects come from its committed local DVC remote.
ukdpack dvc-pull descriptors

echo "== ruff"
ruff check python tests bench
echo "== clang-format"
# The C++ as .clang-format lays it out (clang-format 19, from setup.sh).
find cpp tests/cpp tests/fuzz tests/device tests/cmake examples bench -path bench/.work -prune -o \
  \( -name '*.cpp' -o -name '*.hpp' \) -print0 | xargs -0 clang-format-19 --dry-run --Werror
echo "== mypy --strict"
mypy --strict python/ukdpack
echo "== pytest"
# pytest-xdist: the test modules spread over the cores (up to 4 workers), each module's
# tests on one worker in their order, so a module's fixtures are made once and the tests
# that build on an earlier one's state (the superbuilds) keep it. On 2 cores: 868 -> 597 s.
workers=$(nproc)
((workers > 4)) && workers=4
xdist=(-n "$workers" --dist loadfile)
if [ -n "$quick" ]; then
  python -m pytest -q -m "not heavy and not slow" "${xdist[@]}" "$@"
else
  python -m pytest "${xdist[@]}" "$@"
fi
echo "== ctest"
ctest --test-dir build/py --output-on-failure ${quick:+-j 2}
