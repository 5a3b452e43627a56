#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the lint and type checks, the Python
# tests and the C++ tests. Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
export HIP_PLATFORM=amd

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
