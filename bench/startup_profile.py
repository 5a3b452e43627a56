"""Where a shard's start-up goes, at two sizes side by side (bench/README.md, "Fourth round").

    python bench/startup_profile.py SHARD_10K SHARD_100K [--rounds 3] [--runs 3]

For each round and each shard, alternating: the C++ load + state manager
(`ukdpack_loader_bench`, 1 thread, CPU ms: the machine is shared, so wall time says
little), the same through the extension (`bench/loader_figure.py`: what Python adds), and
what binding an index to the JSON it mirrors by digest would cost (every descriptor file
read and hashed with sha256, CPU ms, best of 5). Writes bench/results/startup-profile.json.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def digest_cpu_ms(shard: Path) -> tuple[int, int, float]:
    """Files, bytes and the best CPU ms of reading and hashing every descriptor file."""
    files = sorted(p for p in shard.rglob("*.json") if p.is_file())
    best, total = float("inf"), 0
    for _ in range(5):
        start, total = time.process_time(), 0
        for p in files:
            data = p.read_bytes()
            total += len(data)
            hashlib.sha256(data).digest()
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
    got: dict[str, dict[str, list[float]]] = {str(s): {"cpp_cpu_ms": [], "ext_cpu_ms": []}
                                              for s in args.shards}
    for _ in range(args.rounds):
        for shard in args.shards:
            cpp = subprocess.run([str(args.bench), str(shard), "--runs", str(args.runs),
                                  "--threads", "1"], capture_output=True, text=True, check=True)
            ext = subprocess.run([sys.executable, str(BENCH / "loader_figure.py"), str(shard),
                                  "--runs", str(args.runs)], capture_output=True, text=True,
                                 check=True)
            got[str(shard)]["cpp_cpu_ms"].append(json.loads(cpp.stdout)["load_cpu_ms"])
            got[str(shard)]["ext_cpu_ms"].append(json.loads(ext.stdout)["load_cpu_ms"])
    out: dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    rows: dict[str, dict[str, object]] = {}
    for shard in args.shards:
        files, size, digest = digest_cpu_ms(shard)
        row: dict[str, object] = {k: {"median": statistics.median(v), "runs": v}
                                  for k, v in got[str(shard)].items()}
        row.update({"json_files": files, "json_bytes": size, "read_sha256_cpu_ms": digest})
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
