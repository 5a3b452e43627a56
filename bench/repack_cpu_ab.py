"""Two packers side by side on a repack that compiles nothing (bench/README.md, "Twentieth
pass").

    python bench/repack_cpu_ab.py --tree T --cache C [--rounds 30] [--output F] PYTHON...

Each round edits ``SCALE`` of the first kernel of ``T/engine0/single*.kdp.json`` (the tree
of ``make_tree.make_hip_tree``) to 3 or 4 by turns, values ``C`` holds the compiles of, and
repacks it with each PYTHON in turn (an environment with ukdpack installed; the order
turns every round), early compiles off (``UKDPACK_EARLY_COMPILES=0``), each PYTHON into an
out root of its own (``C``'s folder, ``out-ab-<i>``), so each takes its own parts and hits
records. A repack's CPU is its process's user + system seconds (``RUSAGE_CHILDREN``): with
nothing compiled, all of it is the packer's. Round 0 makes each out root and is not
counted. Prints and writes (default ``bench/results/repack_cpu_ab.json``) each PYTHON's
median and minimum CPU and wall milliseconds and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def edit(kdp: Path, scale: int) -> None:
    """Set the first kernel's ``SCALE`` define."""
    doc = json.loads(kdp.read_text())
    doc["kernelDescriptors"][0]["kernel_source"]["build"] = {"defines": {"SCALE": scale}}
    kdp.write_text(json.dumps(doc, indent=1) + "\n")


def repack(python: str, tree: Path, out: Path, cache: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one pack by ``python``."""
    env = dict(os.environ, UKDPACK_EARLY_COMPILES="0", HIP_PLATFORM="amd")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([python, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
                    str(out), "--cache-dir", str(cache), "--plain", "--jobs", "2",
                    "--arch", "gfx90a", "--arch", "gfx940"],
                   env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--output", type=Path, default=BENCH / "results" / "repack_cpu_ab.json")
    ap.add_argument("pythons", nargs="+")
    args = ap.parse_args()
    kdp = sorted(args.tree.glob("engine0/single*.kdp.json"))[0]
    load_before = os.getloadavg()[0]
    got: dict[str, dict[str, list[float]]] = {p: {"cpu": [], "wall": []} for p in args.pythons}
    for r in range(args.rounds + 1):
        order = list(enumerate(args.pythons))
        for i, python in order if r % 2 == 0 else order[::-1]:
            edit(kdp, 3 + (r + i) % 2)
            cpu, wall = repack(python, args.tree, args.cache.parent / f"out-ab-{i}", args.cache)
            if r:
                got[python]["cpu"].append(cpu)
                got[python]["wall"].append(wall)
    result = {"rounds": args.rounds, "load_before": load_before,
              "load_after": os.getloadavg()[0], "pythons": {}}
    for python, g in got.items():
        summary = {"cpu_ms": round(1e3 * statistics.median(g["cpu"]), 1),
                   "cpu_min_ms": round(1e3 * min(g["cpu"]), 1),
                   "wall_ms": round(1e3 * statistics.median(g["wall"]), 1),
                   "cpu_runs_ms": [round(1e3 * c, 1) for c in g["cpu"]]}
        result["pythons"][python] = summary
        print(f"{python}: CPU median {summary['cpu_ms']} ms (min {summary['cpu_min_ms']}), "
              f"wall median {summary['wall_ms']} ms")
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
