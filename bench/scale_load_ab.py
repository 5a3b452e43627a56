"""The recorded load figure (`bench/run.py`'s ``LOAD``: ``load_shard`` and ``StateManager``
through the extension, 3 loads a process) for two builds of the extension side by side.

    python bench/scale_load_ab.py BEFORE_SO AFTER_SO SMALL_SHARD LARGE_SHARD
        [--processes 16] [--arch gfx90a] [--output bench/results/scale_load_ab.json]

Each build runs from a copy of the installed ``ukdpack`` package with its ``_runtime``
replaced by the one given, put first on ``PYTHONPATH``. The builds alternate process by
process (the order flipped every process) at each size, so a slow minute of the machine
falls on both. Prints and writes, per build, the median load at each size, their growth
(large / small) and each process's peak RSS (which includes the figure's own check,
``len(sm.kept())``, a Python object per kept kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import ukdpack

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import run  # noqa: E402  (bench/run.py: the figure's own script)


def overlay(folder: Path, so: Path) -> Path:
    """A copy of the installed package under ``folder`` with ``so`` as its extension."""
    package = folder / "ukdpack"
    shutil.copytree(Path(ukdpack.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "_runtime*.so"))
    shutil.copy2(so, package / so.name)
    return folder


def one(path: Path, shard: str, arch: str) -> tuple[list[float], float]:
    """One process of the figure's script: its loads' seconds and its peak RSS (MiB)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", run.LOAD, shard, arch, "3"],
                       env=dict(os.environ, PYTHONPATH=str(path)), capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)["times"], int(r.stderr.strip().splitlines()[-1]) / 1024


def main(argv: list[str] | None = None) -> int:
    """Alternate the two builds and report the figure and its growth for each."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("small")
    p.add_argument("large")
    p.add_argument("--processes", type=int, default=16)
    p.add_argument("--arch", default="gfx90a")
    p.add_argument("--output", type=Path, default=BENCH / "results" / "scale_load_ab.json")
    args = p.parse_args(argv)
    builds = {"before": args.before, "after": args.after}
    sizes = {"small": args.small, "large": args.large}
    times: dict[str, dict[str, list[float]]] = {b: {s: [] for s in sizes} for b in builds}
    rss: dict[str, dict[str, list[float]]] = {b: {s: [] for s in sizes} for b in builds}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {b: overlay(Path(tmp) / b, so.resolve()) for b, so in builds.items()}
        for i in range(args.processes):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            for s, shard in sizes.items():
                for b in order:
                    got, mib = one(paths[b], shard, args.arch)
                    times[b][s] += got
                    rss[b][s].append(mib)
    out: dict[str, object] = {"small": args.small, "large": args.large, "processes": args.processes,
                              "load_average_start": [round(x, 2) for x in load_start],
                              "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    for b in builds:
        small = statistics.median(times[b]["small"]) * 1000
        large = statistics.median(times[b]["large"]) * 1000
        out[b] = {"small_ms": round(small, 2), "large_ms": round(large, 2), "growth": round(large / small, 2),
                  "peak_rss_small_mib": round(max(rss[b]["small"]), 1),
                  "peak_rss_large_mib": round(max(rss[b]["large"]), 1)}
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
