"""`runtime_load_10k_ms` of one shard, alone: run.py's loop (load_shard + StateManager
through the extension, the set freed apart) with CPU time beside wall time, since a
busy shared machine stretches the latter. See bench/README.md, "Loader".

    python bench/loader_figure.py OUT_ROOT/gfx90a [--runs 9] [--arch gfx90a]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from ukdpack import _runtime


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line: median wall and CPU ms of the load and of the free."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("shard")
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--arch", default="gfx90a")
    args = p.parse_args(argv)
    load: list[float] = []
    load_cpu: list[float] = []
    free: list[float] = []
    free_cpu: list[float] = []
    kept = 0
    for _ in range(args.runs):
        wall, cpu = time.perf_counter(), time.process_time()
        dset = _runtime.load_shard(args.shard)
        sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=args.arch)
        load.append((time.perf_counter() - wall) * 1000)
        load_cpu.append((time.process_time() - cpu) * 1000)
        kept = len(sm.kept())
        wall, cpu = time.perf_counter(), time.process_time()
        del sm, dset
        free.append((time.perf_counter() - wall) * 1000)
        free_cpu.append((time.process_time() - cpu) * 1000)
    print(json.dumps({"kept": kept, "runs": args.runs,
                      "load_ms": round(statistics.median(load), 2),
                      "load_cpu_ms": round(statistics.median(load_cpu), 2),
                      "free_ms": round(statistics.median(free), 2),
                      "free_cpu_ms": round(statistics.median(free_cpu), 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
