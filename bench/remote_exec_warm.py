"""Remote execution's figure: a fresh machine packing against a farm whose action cache is warm.

    python bench/remote_exec_warm.py [--quick]

A 1,000-kernel hip tree (40 units, gfx90a + gfx940; ``--quick``: 100 kernels over 4
units) is first packed locally, cold (empty cache, no farm): the time a machine without
a farm takes. Then it is packed through a real BuildGrid farm on loopback (the tests'
farm, ``tests/python/remote_exec_servers.py``, 2 workers): the farm compiles, and its
action cache fills. Then a fresh machine (empty local cache and out-root) packs it again
through the farm. ``remote_exec_warm_vs_local_cold`` is that pack's seconds over the
local cold pack's (goal <= 0.1); the fresh machine must compile nothing here and run
nothing on the farm (every compile an action-cache hit), or the bench stops. The shards
of all three packs must be byte-identical. Writes ``bench/results/remote_exec_warm.json``
(``--quick``: ``remote_exec_warm.quick.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "tests" / "python"))
import make_tree  # noqa: E402
from remote_cache import figure_main  # noqa: E402
from remote_exec_servers import TOOLCHAIN_KEY, farm  # noqa: E402

from ukdpack.produce import compiler  # noqa: E402

GOAL = 0.1
ARCHES = ["gfx90a", "gfx940"]


def _pack(tree: Path, out: Path, cache: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    """Seconds of one ``ukdpack pack`` (a fresh process, as a build runs it) and its report."""
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(out), "--cache-dir", str(cache), "--plain", "--json",
            "--jobs", str(len(os.sched_getaffinity(0))), *extra]
    for a in ARCHES:
        argv += ["--arch", a]
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True,
                       env=dict(os.environ, HIP_PLATFORM="amd"), check=False)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"pack failed:\n{r.stderr}")
    doc: dict[str, Any] = json.loads(r.stdout)
    return took, doc


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def warm_figure(work: Path, quick: bool) -> dict[str, Any]:
    """Local cold pack, a cold farm pack (filling its action cache), then a fresh machine's
    pack through the warm farm."""
    kernels, units = (100, 4) if quick else (1000, 40)
    base = work / "remote-exec"
    shutil.rmtree(base, ignore_errors=True)
    tree = base / "tree"
    make_tree.make_hip_tree(tree, kernels, 4, units, ARCHES)
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        raise SystemExit("hipcc is not on PATH (scripts/setup.sh installs it)")
    identity = compiler.identify("hip", hipcc, None).identity
    local, local_doc = _pack(tree, base / "out-local", base / "cache-local")
    for remote in farm(base / "farm", workers=2,
                       properties={"OSFamily": "linux", TOOLCHAIN_KEY: identity}):
        cold, cold_doc = _pack(tree, base / "out-cold", base / "cache-a",
                               "--remote-exec", remote.url)
        warm, warm_doc = _pack(tree, base / "out-warm", base / "cache-b",
                               "--remote-exec", remote.url)
    rx = warm_doc["remote_exec"]
    if rx["executed"] or rx["local"] or rx["refused"] or rx["fault"] \
            or rx["cache_hits"] != units * len(ARCHES):
        raise SystemExit(f"the fresh machine's pack did not take every compile from the "
                         f"farm's action cache: {rx}")
    shards = {name: _files(base / name) for name in ("out-local", "out-cold", "out-warm")}
    if not shards["out-local"] == shards["out-cold"] == shards["out-warm"]:
        raise SystemExit("the shards differ between the local and the farm's packs")
    ratio = warm / local
    print(f"remote exec: {kernels} kernels over {units} units x {len(ARCHES)} arches: local "
          f"cold pack {local:.1f} s; farm cold {cold:.1f} s ({cold_doc['remote_exec']['executed']}"
          f" actions run); fresh machine, warm farm {warm:.2f} s ({rx['cache_hits']} action-"
          f"cache hits) -> {ratio:.3f}")
    return {"kernels": kernels, "units": units, "arches": ARCHES, "workers": 2,
            "local_cold_pack_s": round(local, 3), "farm_cold_pack_s": round(cold, 3),
            "fresh_machine_warm_farm_pack_s": round(warm, 3),
            "farm_cold": cold_doc["remote_exec"], "warm": rx, "ratio": ratio,
            "local_compiled": local_doc.get("compiled")}


def main(argv: list[str] | None = None) -> int:
    return figure_main(argv, __doc__, warm_figure, "remote_exec_warm",
                       "remote_exec_warm_vs_local_cold", GOAL)


if __name__ == "__main__":
    raise SystemExit(main())
