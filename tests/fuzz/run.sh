#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-15, ASan + UBSan) into build/fuzz and runs each
# for SECONDS, two at a time (one per core of a 2-core machine), seeded from the
# conformance corpus. Exit 1 when any target finds a crash, leak or timeout; the input
# that did it is kept under build/fuzz/crashes/<target>/.
#   tests/fuzz/run.sh SECONDS [TARGET ...]     targets: fuzz_loader fuzz_kpack fuzz_codeobject
#   tests/fuzz/run.sh 0                         replay the seeds once each, no fuzzing
# The working corpora under build/fuzz/corpus/ grow across runs; the summary of the last
# run (executions, coverage, features, corpus size per target) is build/fuzz/summary.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET ...]}
shift
targets=("$@")
((${#targets[@]})) || targets=(fuzz_loader fuzz_kpack fuzz_codeobject)
python=${UKDPACK_PYTHON:-python3}
[ -x .venv/bin/python ] && python=.venv/bin/python
build=build/fuzz

mkdir -p "$build"
CC=clang-15 CXX=clang++-15 cmake -S tests/fuzz -B "$build" -G Ninja >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target "${targets[@]}" >"$build/build.log" 2>&1 \
  || { tail -50 "$build/build.log"; exit 1; }
rm -rf "$build/seeds"
"$python" tests/fuzz/seeds.py "$build/seeds"

jobs=$(nproc)
((jobs > 2)) && jobs=2
export UKDPACK_FUZZ_TMP="$build/tmp"
mkdir -p "$UKDPACK_FUZZ_TMP"
run_one() {
  local t=$1
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  if ((seconds == 0)); then
    "$build/$t" -runs=0 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t/" "$build/seeds/$t" >"$build/$t.log" 2>&1
    return
  fi
  # -rss_limit_mb: the loader reads whole shards; the kpack target caps entries itself.
  # -entropic=0 for the loader: its inputs have tens of thousands of features, and the
  # entropic schedule's bookkeeping of them (UpdateFeatureFrequency) took 44 % of its time:
  # 15 s without it ran 1,888 inputs (cov 9,686) against 1,023 (cov 9,589).
  local schedule=()
  [ "$t" = fuzz_loader ] && schedule=(-entropic=0)
  "$build/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    "${schedule[@]}" -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" "$build/seeds/$t" \
    >"$build/$t.log" 2>&1
}
pids=() status=0
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || status=1; done
  echo "fuzz: $t for ${seconds}s"
  run_one "$t" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done

: >"$build/summary.txt"
for t in "${targets[@]}"; do
  log=$build/$t.log
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(ls "$build/corpus/$t" | wc -l)
  # Edges libFuzzer instrumented in this target (the runtime code it links).
  edges=$(sed -n 's/.*(\([0-9]*\) inline 8-bit counters).*/\1/p' "$log" | head -1)
  line="$t: ${runs:-0} executions in ${seconds}s, cov ${cov:-?} of ${edges:-?} edges, ft ${ft:-?}, corpus $corp"
  echo "$line" | tee -a "$build/summary.txt"
  if ls "$build/crashes/$t" | grep -q .; then
    echo "fuzz: $t FOUND: $(ls "$build/crashes/$t")" | tee -a "$build/summary.txt"
    grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -20
    status=1
  fi
done
exit $status
