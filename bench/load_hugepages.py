"""The recorded load figure (`bench/run.py`'s ``LOAD``: ``load_shard`` and ``StateManager``
through the extension, 3 loads a process) with glibc's malloc on 4 KiB pages (the
default) and on transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``,
glibc 2.35 or later, where the kernel's THP mode is ``madvise`` or ``always``), side by
side: what a process that loads a big shard gains from the tunable.

    python bench/load_hugepages.py SMALL_SHARD LARGE_SHARD [--processes 16]
        [--output bench/results/load_hugepages.json]

The two settings alternate process by process (the order flipped every process) at each
size. Prints and writes, per setting and size, the median first load of a process (what
a library pays at start-up), the median of the later loads, the median of all (the
recorded figure's statistic) and the median peak RSS.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import run  # noqa: E402  (bench/run.py: the figure's own script)

SETTINGS = {"default": "", "hugetlb": "glibc.malloc.hugetlb=1"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shards", nargs=2, type=Path, metavar="SHARD")
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--arch", default=run.SCALE_ARCH)
    parser.add_argument("--output", type=Path, default=BENCH / "results" / "load_hugepages.json")
    args = parser.parse_args()
    result: dict[str, Any] = {"processes": args.processes, "settings": SETTINGS}
    for shard in args.shards:
        got: dict[str, dict[str, list[float]]] = {
            name: {"first_ms": [], "later_ms": [], "all_ms": [], "peak_mib": []}
            for name in SETTINGS}
        for i in range(args.processes):
            names = list(SETTINGS) if i % 2 == 0 else list(SETTINGS)[::-1]
            for name in names:
                environ = dict(run.env(), GLIBC_TUNABLES=SETTINGS[name])
                r = subprocess.run([sys.executable, "-c", run.PROBE, sys.executable, "-c",
                                    run.LOAD, str(shard), args.arch, "3"],
                                   capture_output=True, text=True, env=environ, check=True)
                probe = json.loads(r.stdout)
                if probe["rc"] != 0:
                    raise SystemExit(f"load of {shard} failed:\n{probe['err']}")
                times = [t * 1000 for t in json.loads(probe["out"])["times"]]
                got[name]["first_ms"].append(times[0])
                got[name]["later_ms"] += times[1:]
                got[name]["all_ms"] += times
                got[name]["peak_mib"].append(probe["kib"] / 1024)
        row = {name: {k: round(statistics.median(v), 2) for k, v in figures.items()}
               for name, figures in got.items()}
        result[str(shard)] = row
        for name, figures in row.items():
            print(f"{shard}: {name:8s} first {figures['first_ms']:.2f} ms, later "
                  f"{figures['later_ms']:.2f} ms, all {figures['all_ms']:.2f} ms, peak "
                  f"{figures['peak_mib']:.1f} MiB")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
