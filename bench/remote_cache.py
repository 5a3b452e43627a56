"""The remote compile cache's figure: a fresh machine packing against a warm server.

    python bench/remote_cache.py [--quick]

A 1,000-kernel hip tree (40 units, gfx90a + gfx940; ``--quick``: 100 kernels over 4
units) is packed cold — empty local cache, empty server, ``read-write`` — against nginx
with WebDAV PUT on loopback (the tests' server, ``tests/python/remote_servers.py``).
Then a second, fresh local cache packs it against the now warm server. The figure
``remote_warm_vs_cold`` is that warm pack's seconds over the cold pack's (goal <= 0.1).
Writes ``bench/results/remote_cache.json`` (``--quick``: ``remote_cache.quick.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "tests" / "python"))
import make_tree  # noqa: E402
from remote_servers import nginx  # noqa: E402

GOAL = 0.1
ARCHES = ["gfx90a", "gfx940"]


def _pack(tree: Path, out: Path, cache: Path, url: str) -> tuple[float, dict[str, Any]]:
    """Seconds of one ``ukdpack pack --remote-cache URL`` and its ``remote_cache`` report."""
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(out), "--cache-dir", str(cache), "--plain", "--json",
            "--jobs", str(len(os.sched_getaffinity(0))), "--remote-cache", url]
    for a in ARCHES:
        argv += ["--arch", a]
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ,
                       HIP_PLATFORM="amd"), check=False)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"pack failed:\n{r.stderr}")
    doc: dict[str, Any] = json.loads(r.stdout)["remote_cache"]
    return took, doc


def remote_figure(work: Path, quick: bool) -> dict[str, Any]:
    """Cold pack (filling the server), then a fresh machine's pack against it."""
    kernels, units = (100, 4) if quick else (1000, 40)
    base = work / "remote"
    shutil.rmtree(base, ignore_errors=True)
    tree = base / "tree"
    make_tree.make_hip_tree(tree, kernels, 4, units, ARCHES)
    server = nginx(base / "server")
    srv = next(server)
    try:
        cold, cold_doc = _pack(tree, base / "out-cold", base / "cache-a", srv.url)
        warm, warm_doc = _pack(tree, base / "out-warm", base / "cache-b", srv.url)
    finally:
        server.close()
    if warm_doc["misses"] or warm_doc["remote_hits"] != units * len(ARCHES):
        raise SystemExit(f"the warm pack compiled: {warm_doc}")
    print(f"remote: {kernels} kernels over {units} units x {len(ARCHES)} arches: cold pack "
          f"{cold:.1f} s ({cold_doc['uploads']} uploads, {cold_doc['bytes_up']:,} B up); "
          f"fresh machine, warm remote {warm:.2f} s ({warm_doc['remote_hits']} remote hits, "
          f"{warm_doc['bytes_down']:,} B down, {warm_doc['seconds_saved']:.1f} s of compiles "
          f"saved) -> {warm / cold:.3f}")
    return {"kernels": kernels, "units": units, "arches": ARCHES, "cold_pack_s": round(cold, 3),
            "warm_remote_pack_s": round(warm, 3), "cold": cold_doc, "warm": warm_doc,
            "ratio": warm / cold}


def record(stem: str, key: str, goal: float, fig: dict[str, Any], quick: bool,
           load: tuple[float, float, float]) -> None:
    """Writes ``bench/results/STEM.json`` (``STEM.quick.json``): the figure ``key`` (the
    ratio in ``fig``) with its goal, the machine's load, the commit and ``fig`` as raw."""
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                       text=True, cwd=REPO, check=False).stdout.strip(),
              "quick": quick, "cpus": len(os.sched_getaffinity(0)),
              "loadavg_start": [round(x, 2) for x in load],
              "loadavg_end": [round(x, 2) for x in os.getloadavg()],
              key: round(fig["ratio"], 4), "goal": f"<= {goal}", "raw": fig}
    name = f"{stem}.quick.json" if quick else f"{stem}.json"
    (BENCH / "results").mkdir(exist_ok=True)
    (BENCH / "results" / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"{key} {fig['ratio']:.4f} (goal <= {goal}); load average "
          f"{load[0]:.2f} -> {os.getloadavg()[0]:.2f}; wrote bench/results/{name}")


def figure_main(argv: list[str] | None, doc: str | None,
                figure: Callable[[Path, bool], dict[str, Any]], stem: str, key: str,
                goal: float) -> int:
    """A remote figure's command line (``--quick``, ``--work``): the figure measured in
    its scratch folder and written by ``record``."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="100 kernels over 4 units")
    p.add_argument("--work", type=Path, default=BENCH / ".work", help="scratch folder")
    args = p.parse_args(argv)
    load = os.getloadavg()
    fig = figure(args.work / ("quick" if args.quick else "full"), args.quick)
    record(stem, key, goal, fig, args.quick, load)
    return 0


def main(argv: list[str] | None = None) -> int:
    return figure_main(argv, __doc__, remote_figure, "remote_cache", "remote_warm_vs_cold", GOAL)


if __name__ == "__main__":
    raise SystemExit(main())
