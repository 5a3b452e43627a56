"""Before/after of the prebuilt pack and the one-edit repack, side by side.

    python bench/prebuilt_before_after.py --before /path/to/baseline/.venv/bin/python \
        [--after .venv/bin/python] [--runs 7] [--edits 5] [--skip-edit | --skip-prebuilt]

Each version is a Python environment with ukdpack installed (the baseline: any
checkout's ``.venv``, e.g. one of the main branch). Runs alternate between the
versions (before, after, then after, before, ...), so a busy machine slows both
alike; each run's wall time and CPU time (user + sys of the pack and its children)
are printed with the medians.

* prebuilt: a cold pack (fresh cache and out root) of ``bench/.work/prebuilt`` (made
  by ``bench/run.py``'s prebuilt figure, or by this script when missing), beside the
  read+sha256+zstd-3 bound of ``run.py``;
* one edit: ``make_tree.make_hip_tree`` (1,000 kernels, 40 units, gfx90a + gfx940) in
  ``bench/.work/ab-edit``, one cold pack whose cache each version gets a copy of, then
  ``--edits`` edits of one kernel's ``build.defines`` (each a value not compiled
  before), each repacked by both versions and its compiles (the command lines the
  after-version ran, from its cache's records) run alone between them:
  ``overhead_s`` is a version's median repack minus the median of those compiles
  (``one_edit_overhead_s`` of ``run.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402
import run as bench_run  # noqa: E402


def _pack(python: str, tree: Path, out: Path, cache: Path, arches: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``ukdpack pack`` run by ``python``."""
    argv = [python, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root", str(out),
            "--cache-dir", str(cache), "--plain", "--jobs", str(bench_run.jobs())]
    for a in arches:
        argv += ["--arch", a]
    wall, cpu, _ = bench_run.timed_child(argv)
    return wall, cpu


def _turns(i: int) -> tuple[str, str]:
    return ("before", "after") if i % 2 == 0 else ("after", "before")


def prebuilt(work: Path, versions: dict[str, str], runs: int) -> dict[str, object]:
    tree = work / "prebuilt"
    if not tree.exists():
        objects = make_tree.compile_objects(work / "objects", 24, "gfx90a", bench_run.jobs(), 104)
        make_tree.make_prebuilt_tree(tree, 2048, "gfx90a", objects)
    files = sorted(tree.rglob("*.hsaco"))
    bench_run.raw_bound(files)
    bound = min(bench_run.raw_bound(files) for _ in range(2))
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in versions}
    for i in range(runs):
        for v in _turns(i):
            out, cache = work / f"ab-out-{v}", work / f"ab-cache-{v}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            got[v].append(_pack(versions[v], tree, out, cache, ["gfx90a"]))
    result: dict[str, object] = {"raw_bound_s": round(bound, 3)}
    for v, r in got.items():
        s = bench_run.summary(r)
        s["ratio_to_bound"] = round(float(s["wall_median_s"]) / bound, 2)  # type: ignore[arg-type]
        result[v] = s
        print(f"prebuilt {v}: wall {s['wall_median_s']} s (runs {s['wall_s']}), CPU "
              f"{s['cpu_median_s']} s -> {s['ratio_to_bound']}x the bound {bound:.3f} s")
    return result


def one_edit(work: Path, versions: dict[str, str], edits: int) -> dict[str, object]:
    base = work / "ab-edit"
    arches = ["gfx90a", "gfx940"]
    tree = base / "hip"
    shutil.rmtree(tree, ignore_errors=True)
    make_tree.make_hip_tree(tree, 1000, 4, 40, arches)
    # One cold pack fills a cache, copied for each version: each then compiles only its
    # edits (the cache layout is the same at both commits).
    first = next(iter(versions))
    warm = base / "cache-warm"
    shutil.rmtree(warm, ignore_errors=True)
    cold = _pack(versions[first], tree, base / "out-warm", warm, arches)
    for v in versions:
        out, cache = base / f"out-{v}", base / f"cache-{v}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(warm, cache)
        _pack(versions[v], tree, out, cache, arches)  # its out root; nothing compiled
    kdp = sorted(tree.glob("engine0/single*.kdp.json"))[0]
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in versions}
    alone: list[float] = []
    alone_cpu: list[float] = []
    for i in range(edits):
        doc = json.loads(kdp.read_text())
        doc["kernelDescriptors"][0]["kernel_source"]["build"] = {"defines": {"SCALE": i + 2}}
        kdp.write_text(json.dumps(doc, indent=1) + "\n")
        for v in _turns(i):
            since = time.time()
            got[v].append(_pack(versions[v], tree, base / f"out-{v}", base / f"cache-{v}",
                                arches))
            if v == "after":  # the compiles this edit needs, as the pack ran them
                argvs = bench_run.edit_compiles(base / f"cache-{v}", since)
        # ... and the same compiles alone, between the versions' repacks.
        used = bench_run.children_cpu()
        alone.append(bench_run.compiles_alone(argvs))
        alone_cpu.append(bench_run.children_cpu() - used)
    compiles = statistics.median(alone)
    result: dict[str, object] = {"compiles_alone_s": round(compiles, 3),
                                 "compiles_alone_runs_s": [round(a, 3) for a in alone],
                                 "compiles_alone_cpu_s": round(statistics.median(alone_cpu), 3),
                                 "compiles": len(argvs)}
    for v, r in got.items():
        s = bench_run.summary(r)
        s["cold_s"] = round(cold[0], 3)
        s["ratio_to_cold"] = round(float(s["wall_median_s"]) / cold[0], 4)  # type: ignore[arg-type]
        s["overhead_s"] = round(float(s["wall_median_s"]) - compiles, 3)  # type: ignore[arg-type]
        s["overhead_cpu_s"] = round(float(s["cpu_median_s"])  # type: ignore[arg-type]
                                    - statistics.median(alone_cpu), 3)
        result[v] = s
        print(f"one edit {v}: repack wall {s['wall_median_s']} s (runs {s['wall_s']}), CPU "
              f"{s['cpu_median_s']} s; cold {s['cold_s']} s -> {s['ratio_to_cold']}; minus "
              f"the compiles alone ({compiles:.3f} s) -> overhead {s['overhead_s']} s "
              f"({s['overhead_cpu_s']} s of CPU)")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="Python of the baseline environment")
    ap.add_argument("--after", default=str(BENCH.parent / ".venv" / "bin" / "python"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--skip-edit", action="store_true")
    ap.add_argument("--skip-prebuilt", action="store_true")
    ap.add_argument("--output", type=Path, default=BENCH / "results" / "prebuilt_before_after.json")
    args = ap.parse_args()
    work = BENCH / ".work"
    work.mkdir(exist_ok=True)
    versions = {"before": args.before, "after": args.after}
    load = os.getloadavg()
    doc: dict[str, object] = {}
    if not args.skip_prebuilt:
        doc["prebuilt"] = prebuilt(work, versions, args.runs)
    if not args.skip_edit:
        doc["one_edit"] = one_edit(work, versions, args.edits)
    doc["machine"] = {"nproc": bench_run.jobs(), "load_start": [round(x, 2) for x in load],
                      "load_end": [round(x, 2) for x in os.getloadavg()]}
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"-> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
