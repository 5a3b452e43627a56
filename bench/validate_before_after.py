"""``ukdpack validate`` of the scale trees, before and after, side by side.

    python bench/validate_before_after.py --before /path/to/baseline/venv/bin/python \
        [--after .venv/bin/python] [--sizes 10000 100000] [--runs 5]

Each version is a Python environment with ukdpack installed (the baseline: e.g. a copy of
a checkout's ``.venv`` made before the change, or ``bench/before_after.py``'s baseline
venv). The trees are ``run.py``'s scale trees (``make_tree.make_scale_tree``: half
prebuilt hsaco, half embedded_source kernels, 100 to a KDP), made in
``bench/.work/full/scale-<n>k`` when missing. Runs alternate between the versions
(before, after, then after, before, ...), so a busy machine slows both alike; each run
is a fresh process whose wall time, CPU time (user + sys, from ``wait4``) and peak RSS
are kept. Writes ``bench/results/validate_before_after.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402
import run as bench_run  # noqa: E402


def _run(python: str, tree: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one ``ukdpack validate`` of ``tree`` run by
    ``python`` (its output dropped; a failure stops the benchmark)."""
    start = time.perf_counter()
    pid = os.posix_spawn(python, [python, "-m", "ukdpack", "validate", str(tree)],
                         bench_run.env(), file_actions=[
                             (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                             (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"validate of {tree} by {python} exited {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _tree(n: int) -> Path:
    work = BENCH / ".work" / "full"
    tree = work / f"scale-{n // 1000}k"
    if not tree.is_dir():
        objects = make_tree.compile_objects(work / "objects", make_tree.SCALE_DISTINCT_OBJECTS,
                                            "gfx90a", bench_run.jobs(),
                                            make_tree.SCALE_OBJECT_KIB)
        make_tree.make_scale_tree(tree, n, "gfx90a", objects)
    return tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="Python of the baseline environment")
    ap.add_argument("--after", default=str(BENCH.parent / ".venv" / "bin" / "python"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--output", type=Path,
                    default=BENCH / "results" / "validate_before_after.json")
    args = ap.parse_args()
    versions = {"before": args.before, "after": args.after}
    trees = {n: _tree(n) for n in args.sizes}
    load = os.getloadavg()
    got: dict[int, dict[str, list[tuple[float, float, float]]]] = {
        n: {v: [] for v in versions} for n in args.sizes}
    for i in range(args.runs):
        for n in args.sizes:
            for v in (("before", "after") if i % 2 == 0 else ("after", "before")):
                os.sync()
                got[n][v].append(_run(versions[v], trees[n]))
    doc: dict[str, object] = {}
    for n in args.sizes:
        entry: dict[str, object] = {}
        for v, runs in got[n].items():
            entry[v] = {"wall_median_s": round(statistics.median(r[0] for r in runs), 3),
                        "cpu_median_s": round(statistics.median(r[1] for r in runs), 3),
                        "peak_rss_mib": round(max(r[2] for r in runs), 1),
                        "wall_s": [round(r[0], 3) for r in runs],
                        "cpu_s": [round(r[1], 3) for r in runs]}
        b, a = entry["before"], entry["after"]
        assert isinstance(b, dict) and isinstance(a, dict)
        entry["wall_ratio_after_before"] = round(a["wall_median_s"] / b["wall_median_s"], 3)
        entry["cpu_ratio_after_before"] = round(a["cpu_median_s"] / b["cpu_median_s"], 3)
        doc[f"validate_{n // 1000}k"] = entry
        print(f"validate {n:,} kernels: before {b['wall_median_s']} s wall, {b['cpu_median_s']} s "
              f"CPU; after {a['wall_median_s']} s wall, {a['cpu_median_s']} s CPU "
              f"(runs {a['wall_s']}; ratio {entry['wall_ratio_after_before']})")
    doc["machine"] = {"nproc": bench_run.jobs(), "load_start": [round(x, 2) for x in load],
                      "load_end": [round(x, 2) for x in os.getloadavg()]}
    doc["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"-> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
