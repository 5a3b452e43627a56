"""The prebuilt figure (`bench/run.py`'s ``prebuilt_figure``) with and without the resident
packer, side by side: what a pack started without the interpreter's start-up and imports
leaves of the gap to the raw bound.

    python bench/prebuilt_resident.py [--rounds 7] [--output bench/results/prebuilt_resident.json]

Each round runs the raw bound (read, sha256 and zstd-3 of the same bytes, one thread),
then a cold pack in its own process and a cold pack handed to the resident packer
(``UKDPACK_RESIDENT=1``), in an order flipped every round; each pack starts with an empty
cache and a fresh out root, as ``run.py``'s does. The tree is the one a full ``run.py``
left (``bench/.work/full/prebuilt``: 2,048 objects, 225 MiB), or one made as it makes it
under ``bench/.work/prebuilt-resident``. The resident server
is started before the first round (its first pack is not timed) and stopped at the end.
Prints and writes each side's best and median and their ratios to the bound's best.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402
import run  # noqa: E402  (bench/run.py: the figure's own functions)


def resident(command: str, environ: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ukdpack", "resident", command], env=environ,
                   capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--output", type=Path,
                        default=BENCH / "results" / "prebuilt_resident.json")
    args = parser.parse_args()
    work = BENCH / ".work" / "prebuilt-resident"
    work.mkdir(parents=True, exist_ok=True)
    tree = BENCH / ".work" / "full" / "prebuilt"
    if not tree.is_dir():
        tree = work / "prebuilt"
        objects = make_tree.compile_objects(work / "objects", 24, "gfx90a", run.jobs(), 104)
        make_tree.make_prebuilt_tree(tree, 2048, "gfx90a", objects)
    files = sorted(tree.rglob("*.hsaco"))
    fresh_env = dict(run.env(), UKDPACK_RESIDENT="0")
    resident_env = dict(run.env(), UKDPACK_RESIDENT="1")
    cache, out = work / "cache", work / "out"

    def pack(environ: dict[str, str]) -> float:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        return run.run_pack(tree, out, ["gfx90a"], cache, environ=environ)

    run.raw_bound(files)  # the page cache warm for every side alike
    pack(resident_env)  # starts the server: its first pack imports what the others reuse
    times: dict[str, list[float]] = {"bound": [], "fresh": [], "resident": []}
    try:
        for i in range(args.rounds):
            times["bound"].append(run.raw_bound(files))
            order = [("fresh", fresh_env), ("resident", resident_env)]
            for name, environ in order if i % 2 == 0 else order[::-1]:
                times[name].append(pack(environ))
    finally:
        resident("stop", resident_env)
    bound = min(times["bound"])
    result: dict[str, Any] = {
        "rounds": args.rounds, "objects": len(files), "load_average": os.getloadavg(),
        "bound_best_s": round(bound, 3),
        "runs_s": {k: [round(t, 3) for t in v] for k, v in times.items()}}
    for name in ("fresh", "resident"):
        best, median = min(times[name]), statistics.median(times[name])
        result[name] = {"best_s": round(best, 3), "median_s": round(median, 3),
                        "best_vs_bound": round(best / bound, 3)}
        print(f"{name:9s} best {best:.3f} s, median {median:.3f} s: {best / bound:.2f} x the "
              f"bound's best {bound:.3f} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
