"""Where a shard's start-up goes, at two sizes side by side (bench/README.md, "Fourth round").

    python bench/startup_profile.py SHARD_10K SHARD_100K [--rounds 3] [--runs 3]

For each round and each shard, alternating: the C++ load + state manager
(`ukdpack_loader_bench`, 1 thread, CPU ms: the machine is shared, so wall time says
little) through the JSON (`--index off`, the path of a shard without index.ukdx) and
through the shard's index (`--index on`, the default), then the index path with the
default threads (wall and CPU ms: what a library's start-up waits for); the same through
the extension (`bench/loader_figure.py`: what Python adds), and the floor of binding the
index (every descriptor file read, CPU ms, best of 5; the index's XXH3-128 over the same
bytes adds about 2 % of the load's CPU, where its sha256 of format 1 added a quarter). Writes
bench/results/startup-profile.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def read_cpu_ms(shard: Path) -> tuple[int, int, float]:
    """Files, bytes and the best CPU ms of reading every descriptor file."""
    files = sorted(p for p in shard.rglob("*.json") if p.is_file())
    best, total = float("inf"), 0
    for _ in range(5):
        start, total = time.process_time(), 0
        for p in files:
            data = p.read_bytes()
            total += len(data)
        best = min(best, time.process_time() - start)
    return len(files), total, round(best * 1000, 2)


def main(argv: list[str] | None = None) -> int:
    """Print and record the profile of both shards."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("shards", type=Path, nargs=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--bench", type=Path, default=REPO / "build/py/bin/ukdpack_loader_bench")
    args = p.parse_args(argv)
    load_start = os.getloadavg()
    keys = ("json_cpp_cpu_ms", "index_cpp_cpu_ms", "index_cpp_wall_ms_threads",
            "index_cpp_cpu_ms_threads", "ext_cpu_ms")
    got: dict[str, dict[str, list[float]]] = {str(s): {k: [] for k in keys} for s in args.shards}
    from_index: dict[str, bool] = {}

    def bench(shard: Path, *flags: str) -> dict[str, object]:
        done = subprocess.run([str(args.bench), str(shard), "--runs", str(args.runs), *flags],
                              capture_output=True, text=True, check=True)
        doc: dict[str, object] = json.loads(done.stdout)
        return doc

    for _ in range(args.rounds):
        for shard in args.shards:
            row = got[str(shard)]
            json_load = bench(shard, "--threads", "1", "--index", "off")
            indexed = bench(shard, "--threads", "1", "--index", "on")
            threads = bench(shard, "--index", "on")
            from_index[str(shard)] = bool(indexed.get("from_index"))
            ext = subprocess.run([sys.executable, str(BENCH / "loader_figure.py"), str(shard),
                                  "--runs", str(args.runs)], capture_output=True, text=True,
                                 check=True)
            row["json_cpp_cpu_ms"].append(float(str(json_load["load_cpu_ms"])))
            row["index_cpp_cpu_ms"].append(float(str(indexed["load_cpu_ms"])))
            row["index_cpp_wall_ms_threads"].append(float(str(threads["load_ms"])))
            row["index_cpp_cpu_ms_threads"].append(float(str(threads["load_cpu_ms"])))
            row["ext_cpu_ms"].append(json.loads(ext.stdout)["load_cpu_ms"])
    out: dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    rows: dict[str, dict[str, object]] = {}
    for shard in args.shards:
        files, size, read = read_cpu_ms(shard)
        row: dict[str, object] = {k: {"median": statistics.median(v), "runs": v}
                                  for k, v in got[str(shard)].items()}
        row.update({"json_files": files, "json_bytes": size, "read_cpu_ms": read,
                    "from_index": from_index[str(shard)]})
        rows[str(shard)] = row
        print(shard, json.dumps(row))
    out["shards"] = rows
    results = BENCH / "results"
    results.mkdir(exist_ok=True)
    (results / "startup-profile.json").write_text(json.dumps(out, indent=2) + "\n")
    print("wrote bench/results/startup-profile.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
