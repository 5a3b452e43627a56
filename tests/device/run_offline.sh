#!/usr/bin/env bash
# Runs the device tests on a GPU machine without network, from what
# tests/device/make_carry.sh built elsewhere (.device-carry/, .whl/). Results go to
# ${OUT:-tests/device}: the pytest log, the plan-overhead figure and the machine.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
out=${OUT:-tests/device}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/ukd-site .whl/*.whl
export PYTHONPATH="/tmp/ukd-site:$root/python:$root/.device-carry/python"
# Carried shared libraries only for sonames this machine lacks (its own win otherwise).
mkdir -p /tmp/ukd-lib
for lib in .device-carry/lib/*; do
  ldconfig -p | grep -q " $(basename "$lib") " || cp "$lib" /tmp/ukd-lib/
done
export LD_LIBRARY_PATH="/tmp/ukd-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UKDPACK_PLAN_OVERHEAD="$root/.device-carry/bin/ukdpack_plan_overhead" UKDPACK_DEVICE_RESULTS="$out"
export PYTHONUNBUFFERED=1
{ date -u; echo "carried libraries used: $(ls /tmp/ukd-lib | tr '\n' ' ')"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1;
  python3 --version; } > "$out/machine.txt" 2>&1
python3 -m pytest tests/device -v -s -p no:cacheprovider 2>&1 | tee "$out/pytest.log"
exit "${PIPESTATUS[0]}"
