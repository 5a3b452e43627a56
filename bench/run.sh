#!/usr/bin/env bash
# Runs every benchmark (bench/run.py) after the README set-up; --quick for small trees.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ -x .venv/bin/python ] || scripts/setup.sh
export PATH="$root/.venv/bin:$PATH" HIP_PLATFORM=amd
exec python bench/run.py "$@"
