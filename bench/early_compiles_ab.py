"""Early compiles on and off, side by side: one-kernel edits of the hip tree repacked by
``python -m ukdpack pack`` with ``UKDPACK_EARLY_COMPILES=1`` and ``=0`` alternating.

    python bench/early_compiles_ab.py --tree T --out O --cache C [--edit source|build]
                                      [--arch A ...] [--edits 7]

``--edit source`` appends a comment to ``T/src/unit005.hip`` (a new one each repack: one
compile per arch); ``--edit build`` sets ``SCALE`` of the first kernel of
``T/engine0/single*.kdp.json`` (the edit of ``bench/run.py``'s one-edit figure). The tree,
out root and cache are used as given (copies of the bench's, say) and the source or
descriptor is put back at the end. Prints and writes (``--json``) each mode's repack
times, medians, and the compiles each repack ran and took early.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--edit", choices=("source", "build"), default="build")
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--edits", type=int, default=7, help="repacks per mode")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    arches = args.arch or ["gfx90a", "gfx940"]
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(args.tree),
            "--out-root", str(args.out), "--cache-dir", str(args.cache), "--plain",
            "--jobs", str(len(os.sched_getaffinity(0))), "--json"]
    for a in arches:
        argv += ["--arch", a]
    env = dict(os.environ, HIP_PLATFORM="amd")
    source = args.tree / "src" / "unit005.hip"
    kdp = sorted(args.tree.glob("engine0/single*.kdp.json"))[0]
    kept = {source: source.read_text(), kdp: kdp.read_text()}
    stamp = int(time.time()) % 100_000 * 100
    got: dict[str, dict[str, list[Any]]] = {m: {"s": [], "compiled": []} for m in "10"}
    try:
        subprocess.run(argv, capture_output=True, env=env, check=True)  # the record
        for i in range(2 * args.edits):
            mode = "10"[i % 2]
            if args.edit == "source":
                source.write_text(kept[source] + f"\n// edit {stamp + i}\n")
            else:
                doc = json.loads(kept[kdp])
                doc["kernelDescriptors"][0]["kernel_source"]["build"] = {
                    "defines": {"SCALE": stamp + i}}
                kdp.write_text(json.dumps(doc, indent=1) + "\n")
            start = time.perf_counter()
            r = subprocess.run(argv, capture_output=True, text=True, check=True,
                               env=dict(env, UKDPACK_EARLY_COMPILES=mode))
            got[mode]["s"].append(round(time.perf_counter() - start, 3))
            doc = json.loads(r.stdout)
            got[mode]["compiled"].append([doc["compiled"], doc["compiled_early"]])
    finally:
        for path, text in kept.items():
            path.write_text(text)
    out = {"edit": args.edit, "arches": arches, "load_average": os.getloadavg(),
           **{("on" if m == "1" else "off"): {"median_s": statistics.median(g["s"]), **g}
              for m, g in got.items()}}
    for name in ("off", "on"):
        g = out[name]
        print(f"early compiles {name}: median {g['median_s']:.3f} s, runs {g['s']}, "
              f"(compiled, early) {g['compiled'][0]}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
