#!/usr/bin/env bash
# `ukdpack validate` and a warm no-change `ukdpack pack` of the 10,000-kernel tree,
# the baseline at BASE_REF against this working tree, alternated side by side in one
# run (bench/before_after.py; see bench/README.md, "Before/after: validate and warm pack").
#
#   bench/before_after.sh [BASE_REF] [--quick] [--runs N] [--output FILE] [--no-refresh]
#
# BASE_REF defaults to ecb0284 (DEFAULT_BASE in bench/before_after.py): the last commit
# before the descriptor rules moved into the C++ runtime. The baseline is built once into
# bench/.work/baseline-<sha>/ (a git worktree and a venv); "after" is this tree's .venv.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ -x .venv/bin/python ] || scripts/setup.sh
export HIP_PLATFORM=amd
exec .venv/bin/python bench/before_after.py "$@"
