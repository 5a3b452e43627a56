"""Two builds of `ukdpack_loader_bench` side by side on one shard (bench/README.md, "Loader").

    python bench/loader_ab.py BEFORE_BIN AFTER_BIN SHARD [--after-shard SHARD2]
        [--threads 1] [--rounds 5] [--runs 7] [--output F]

Each round runs the before binary, then the after one (the order flips every round, so
neither always runs on a warmer cache), `--runs` loads each on `--threads` threads (0: one
per core, as a library loads); a round's figure is the binary's median of its loads.
`--after-shard` gives the after binary a copy of the shard of its own (the same
descriptors with the index the after build writes, when the index format changed).
Prints and writes (default bench/results/loader_ab.json) the median over rounds of the
load's CPU and wall ms, the ratio after/before and the load average before and after
the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def one(binary: str, shard: str, runs: int, threads: int) -> dict[str, float]:
    """One run of the driver: its JSON line (medians of `runs` loads)."""
    out = subprocess.run([binary, shard, "--runs", str(runs), "--threads", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    line: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return line


def main(argv: list[str] | None = None) -> int:
    """Alternate the two binaries and report the medians over rounds."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("shard")
    p.add_argument("--after-shard", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--output", default=str(BENCH / "results" / "loader_ab.json"))
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    rows: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for which in order:
            shard = args.after_shard if which == "after" and args.after_shard else args.shard
            rows[which].append(one(getattr(args, which), shard, args.runs, args.threads))
    result: dict[str, object] = {"shard": args.shard, "after_shard": args.after_shard or args.shard,
                                 "threads": args.threads, "rounds": args.rounds, "runs": args.runs,
                                 "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    for key in ("load_cpu_ms", "load_ms", "free_cpu_ms"):
        before = statistics.median(x[key] for x in rows["before"])
        after = statistics.median(x[key] for x in rows["after"])
        result[key] = {"before": before, "after": after, "ratio": round(after / before, 3),
                       "before_rounds": [x[key] for x in rows["before"]],
                       "after_rounds": [x[key] for x in rows["after"]]}
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.output).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
