#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the lint and type checks, the Python
# tests and the C++ tests. Extra arguments go to pytest.
#   scripts/test.sh --device   the device tests (tests/device/) on a machine with a GPU
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
export HIP_PLATFORM=amd

if [ "${1:-}" = "--device" ]; then
  shift
  export UKDPACK_PLAN_OVERHEAD="$root/build/py/bin/ukdpack_plan_overhead"
  exec python -m pytest tests/device -v -s "$@"
fi

# The example tree's prebuilt objects come from its committed local DVC remote.
ukdpack dvc-pull descriptors

echo "== ruff"
ruff check python tests bench
echo "== mypy --strict"
mypy --strict python/ukdpack
echo "== pytest"
python -m pytest "$@"
echo "== ctest"
ctest --test-dir build/py --output-on-failure
