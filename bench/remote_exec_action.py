"""Per-action cost of remote execution on the tests' farm: Execute to done, one action
at a time, through a real BuildGrid (PostgreSQL, 2 workers) on loopback.

    python bench/remote_exec_action.py [--rounds N]

Three kinds of action, interleaved round by round so a busy machine moves them alike:
``empty`` (``/bin/true``, no inputs, not cached: the scheduling overhead), ``compile``
(the packer's ``hipcc --genco`` of a small kernel, a new source each round so nothing
is cached) and ``cache_hit`` (an action already in the action cache). The compile's
local time (the same command in a tmp folder) is taken in the same rounds, so
``compile - local_compile`` is what going remote adds. Writes
``bench/results/remote_exec_action.json`` (seconds; median, min and max of each kind).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests" / "python"))
from hip_objects import hip_env  # noqa: E402
from remote_exec_servers import ReapiClient, farm, genco_argv, toolchain  # noqa: E402

KERNEL = """\
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float* x, float a, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a + {round}.0f;
}}
"""


def _timed(client: ReapiClient, action: Any) -> float:
    start = time.perf_counter()
    response = client.execute(action)
    took = time.perf_counter() - start
    if response.status.code != 0 or response.result.exit_code != 0:
        raise SystemExit(f"an action failed: {response}\n{client.remote.log_tails()}")
    return took


def main() -> int:
    """Start the farm, time the rounds, write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"empty": [], "compile": [], "local_compile": [],
                                     "cache_hit": []}
    with tempfile.TemporaryDirectory(prefix="ukdpack-bench-") as tmp:
        farm_run = farm(Path(tmp) / "farm", workers=2)
        remote = next(farm_run)
        try:
            client = ReapiClient(remote)
            cached = client.action(["/bin/true"], {}, [])
            client.execute(cached)  # fills the action cache
            argv = genco_argv("kernel.hip", "kernel.co")
            for r in range(args.rounds):
                times["empty"].append(_timed(client, client.action(["/bin/true"], {}, [],
                                                                   cache=False)))
                source = KERNEL.format(round=r + 1000 * os.getpid()).encode()
                local = Path(tmp) / f"local{r}"
                local.mkdir()
                (local / "kernel.hip").write_bytes(source)
                start = time.perf_counter()
                subprocess.run(argv, cwd=local, env=hip_env(), check=True, capture_output=True)
                times["local_compile"].append(time.perf_counter() - start)
                times["compile"].append(_timed(client, client.action(
                    argv, {"kernel.hip": source}, ["kernel.co"], env={"HIP_PLATFORM": "amd"},
                    toolchain_value=toolchain())))
                times["cache_hit"].append(_timed(client, cached))
            client.channel.close()
        finally:
            farm_run.close()
    figures = {k: {"median_s": round(statistics.median(v), 4), "min_s": round(min(v), 4),
                   "max_s": round(max(v), 4)} for k, v in times.items()}
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                 capture_output=True, text=True, check=False).stdout.strip(),
        "rounds": args.rounds,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "server": "BuildGrid 0.4.4, PostgreSQL 15, 2 workers (tests/remote_exec/worker.py)",
        "figures": figures,
        "remote_overhead_s": round(figures["compile"]["median_s"]
                                   - figures["local_compile"]["median_s"], 4),
        "raw": {k: [round(x, 4) for x in v] for k, v in times.items()},
    }
    out = BENCH / "results" / "remote_exec_action.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("load_average", "figures", "remote_overhead_s")},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
