"""A no-change repack, a fresh process against the resident packer, side by side.

    python bench/resident_noop.py [--rounds 11]

Packs ``make_tree.make_hip_tree``'s 1,000-kernel tree (gfx90a + gfx940) in
``bench/.work/resident-noop`` once (compiles, cold), then repacks it unchanged
``--rounds`` times per mode, the modes alternating: ``ukdpack pack`` in a process of its
own, and with ``UKDPACK_RESIDENT=1`` (a server of its own, started by a first pack).
Nothing compiles, so each repack is the packer's own time: the interpreter's start and
imports, the tree, the plan, the cache's lookups and both shards. Printed: each mode's
median wall and CPU seconds (a resident repack's CPU: its client's plus its worker's,
from the server's reaped children), written to ``bench/results/resident_noop.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402
import run as bench_run  # noqa: E402

ARCHES = ["gfx90a", "gfx940"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    work = BENCH / ".work" / "resident-noop"
    tree, out, cache = work / "tree", work / "out", work / "cache"
    if not tree.exists():
        make_tree.make_hip_tree(tree, 1000, 4, 40, ARCHES)
    bench_run.run_pack(tree, out, ARCHES, cache)  # compiles what is missing
    resident = bench_run.Resident(work / "resident")
    resident.start(tree, out, ARCHES, cache)
    got: dict[str, list[tuple[float, float]]] = {m: [] for m in bench_run.EDIT_MODES}
    try:
        for i in range(args.rounds):
            for mode in bench_run.EDIT_MODES if i % 2 == 0 else bench_run.EDIT_MODES[::-1]:
                used, served = bench_run.children_cpu(), resident.workers_cpu()
                wall = bench_run.run_pack(tree, out, ARCHES, cache, environ=resident.env
                                          if mode == "resident" else None)
                cpu = bench_run.children_cpu() - used + (resident.workers_cpu() - served)
                got[mode].append((wall, cpu))
    finally:
        resident.stop()
    result = {m: {"wall_median_s": round(statistics.median(r[0] for r in runs), 3),
                  "cpu_median_s": round(statistics.median(r[1] for r in runs), 3),
                  "wall_s": [round(r[0], 3) for r in runs], "cpu_s": [round(r[1], 3) for r in runs]}
              for m, runs in got.items()}
    for m, r in result.items():
        print(f"{m}: wall {r['wall_median_s']:.3f} s, CPU {r['cpu_median_s']:.3f} s "
              f"(medians of {args.rounds})")
    (BENCH / "results").mkdir(exist_ok=True)
    (BENCH / "results" / "resident_noop.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
