"""Every benchmark of ukdpack, side by side in one run, against the machine's own bounds.

    python bench/run.py [--quick]

Prints each figure with its parts and writes ``bench/results/latest.json`` and a dated
copy: ``ratios`` (the six figures below, with their goals), the raw times, the machine
and the commit. ``--quick`` uses small trees (under a minute, except that the no-op
build figure reuses the superbuild of an earlier full run when there is one).

| key | what | goal |
|---|---|---|
| prebuilt_pack_vs_raw_bound | pack of a prebuilt-only tree / read+sha256+zstd-3 of the same bytes in one process | <= 2.0 |
| hip_pack_vs_compile_bound | cold pack of a hip tree (40 units, 2 arches) / (the same compiles run directly / jobs) | <= 1.15 |
| one_edit_vs_full | repack after one kernel's build defines changed (warm cache, median of 3 edits) / cold full pack | <= 0.03 |
| noop_build_s | no-op `cmake --build` of a superbuild packing a 1,000-kernel tree for 2 arches | <= 1.0 |
| runtime_load_10k_ms | C++ load of a 10,000-kernel shard plus its state manager, median of 5 | <= 100 |
| pack_peak_rss_mib | peak memory of the 10,000-kernel pack | <= 1024 |
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zstandard

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402

GOALS = {"prebuilt_pack_vs_raw_bound": ("<=", 2.0), "hip_pack_vs_compile_bound": ("<=", 1.15),
         "one_edit_vs_full": ("<=", 0.03), "noop_build_s": ("<=", 1.0),
         "runtime_load_10k_ms": ("<=", 100.0), "pack_peak_rss_mib": ("<=", 1024.0)}


def jobs() -> int:
    return len(os.sched_getaffinity(0))


def env() -> dict[str, str]:
    out = dict(os.environ, HIP_PLATFORM="amd")
    return out


def run_pack(tree: Path, out: Path, arches: list[str], cache: Path, *extra: str) -> float:
    """Seconds of one ``ukdpack pack`` (a fresh process, as a build runs it)."""
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(out), "--cache-dir", str(cache), "--plain", "--jobs", str(jobs()), *extra]
    for a in arches:
        argv += ["--arch", a]
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=env(), check=False)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"pack failed:\n{r.stderr}")
    return took


def raw_bound(files: list[Path]) -> float:
    """Reading, hashing and zstd-3 compressing the same bytes in one process, one thread."""
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
    start = time.perf_counter()
    for f in files:
        data = f.read_bytes()
        hashlib.sha256(data).digest()
        cctx.compress(data)
    return time.perf_counter() - start


def prebuilt_figure(work: Path, quick: bool) -> dict[str, Any]:
    count, kib = (200, 20) if quick else (2048, 104)
    tree = work / "prebuilt"
    if tree.exists():
        shutil.rmtree(tree)
    objects = make_tree.compile_objects(work / "objects", 8 if quick else 24, "gfx90a", jobs(), kib)
    size = make_tree.make_prebuilt_tree(tree, count, "gfx90a", objects)
    files = sorted(tree.rglob("*.hsaco"))
    raw_bound(files)  # warm the page cache for both sides alike
    bound = min(raw_bound(files) for _ in range(2))
    cache = work / "cache-prebuilt"
    shutil.rmtree(cache, ignore_errors=True)
    # A cold pack into a fresh out root, as on a first run: replacing a previous shard
    # would add removing its 225 MiB archive, which the bound has no part of.
    shutil.rmtree(work / "out-prebuilt", ignore_errors=True)
    pack = run_pack(tree, work / "out-prebuilt", ["gfx90a"], cache)
    print(f"prebuilt: {count} kernels, {size / 2**20:.0f} MiB: pack {pack:.2f} s (cold cache), "
          f"read+sha256+zstd-3 bound {bound:.2f} s -> {pack / bound:.2f}x")
    return {"kernels": count, "mib": round(size / 2**20, 1), "pack_s": round(pack, 3),
            "raw_bound_s": round(bound, 3), "ratio": pack / bound}


def direct_compiles(tree: Path, arches: list[str]) -> float:
    """The same compiles the pack runs, run directly one after another: summed seconds."""
    total = 0.0
    for src in sorted((tree / "src").glob("*.hip")):
        for arch in arches:
            out = tree.parent / "direct.o"
            start = time.perf_counter()
            subprocess.run(["hipcc", "--genco", f"--offload-arch={arch}", "-O3",
                            "-fuse-cuid=none", str(src), "-o", str(out)], check=True, env=env(),
                           capture_output=True)
            total += time.perf_counter() - start
    return total


def hip_figures(work: Path, quick: bool) -> tuple[dict[str, Any], dict[str, Any], Path, Path]:
    kernels, units = (100, 4) if quick else (1000, 40)
    arches = ["gfx90a", "gfx940"]
    tree = work / "hip"
    if tree.exists():
        shutil.rmtree(tree)
    make_tree.make_hip_tree(tree, kernels, 4, units, arches)
    cache = work / "cache-hip"
    shutil.rmtree(cache, ignore_errors=True)
    full = run_pack(tree, work / "out-hip", arches, cache)
    compiles = direct_compiles(tree, arches)
    bound = compiles / jobs()
    print(f"hip: {kernels} kernels over {units} units x {len(arches)} arches: cold pack "
          f"{full:.1f} s; the {units * len(arches)} compiles run directly {compiles:.1f} s / "
          f"{jobs()} jobs = {bound:.1f} s -> {full / bound:.2f}x")
    # One kernel's build defines change: one compile per arch, the rest from the cache.
    # Three edits (each a value no pack compiled before), median: one repack is ~1 s
    # and a single run moves with whatever else the machine does.
    kdp = sorted(tree.glob("engine0/single*.kdp.json"))[0]
    edits = []
    for scale in (2, 3, 4):
        doc = json.loads(kdp.read_text())
        doc["kernelDescriptors"][0]["kernel_source"]["build"] = {"defines": {"SCALE": scale}}
        kdp.write_text(json.dumps(doc, indent=1) + "\n")
        edits.append(run_pack(tree, work / "out-hip", arches, cache))
    edit = statistics.median(edits)
    print(f"one edit: repack {edit:.2f} s (median of {len(edits)}, warm cache) / cold {full:.1f} s "
          f"-> {edit / full:.3f}")
    hip = {"kernels": kernels, "units": units, "arches": arches, "cold_pack_s": round(full, 3),
           "direct_compiles_s": round(compiles, 3), "jobs": jobs(), "ratio": full / bound}
    one = {"repack_s": round(edit, 3), "repack_runs_s": [round(e, 3) for e in edits],
           "cold_pack_s": round(full, 3), "ratio": edit / full}
    return hip, one, tree, cache


SUPERBUILD = """cmake_minimum_required(VERSION 3.20)
project(ukdpack_bench LANGUAGES CXX)
add_subdirectory("{repo}" ukdpack)
ukd_add_pack_target(NAME bench SOURCE_ROOT "{tree}" OUT_ROOT "${{CMAKE_BINARY_DIR}}/shards"
                    ARCHES gfx90a gfx940)
"""


def noop_figure(work: Path, tree: Path, cache: Path, quick: bool) -> dict[str, Any] | None:
    """No-op `cmake --build` of a superbuild packing the hip tree for 2 arches."""
    project, build = work / "superbuild", work / "superbuild-build"
    if quick and not (build / "CMakeCache.txt").is_file():
        print("noop build: skipped in --quick (no superbuild from an earlier full run)")
        return None
    project.mkdir(parents=True, exist_ok=True)
    (project / "CMakeLists.txt").write_text(SUPERBUILD.format(repo=REPO, tree=tree))
    e = env()
    e["UKDPACK_CACHE_DIR"] = str(cache)
    e.pop("PYTHONPATH", None)
    subprocess.run(["cmake", "-S", str(project), "-B", str(build), "-G", "Ninja",
                    f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True, env=e)
    subprocess.run(["cmake", "--build", str(build), "-j", str(jobs())], check=True,
                   capture_output=True, env=e)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        r = subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True,
                           text=True, env=e)
        times.append(time.perf_counter() - start)
        if "packing bench" in r.stdout:
            raise SystemExit("a no-op build repacked:\n" + r.stdout)
    noop = statistics.median(times)
    print(f"noop build: {noop:.3f} s (median of 5; ninja, 1000-kernel tree, 2 arches)")
    return {"seconds": noop, "runs": [round(t, 3) for t in times]}


def big_figures(work: Path, quick: bool, cache: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The 10,000-kernel tree: peak memory of its pack, then its C++ load."""
    kernels = 2000 if quick else 10000
    tree = work / "big"
    if tree.exists():
        shutil.rmtree(tree)
    make_tree.make_hip_tree(tree, kernels, 8, 4 if quick else 40, ["gfx90a"])
    out = work / "out-big"
    run_pack(tree, out, ["gfx90a"], cache)  # compiles (shared with the hip tree's cache)
    probe = ("import resource, subprocess, sys; "
             "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(out), "--cache-dir", str(cache), "--plain", "--arch", "gfx90a"]
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                       env=env(), check=True)
    took = time.perf_counter() - start
    rss = int(r.stdout.strip()) / 1024
    print(f"pack of {kernels} kernels: peak RSS {rss:.0f} MiB ({took:.1f} s, warm cache)")
    from ukdpack import _runtime

    shard = str(out / "gfx90a")
    times, teardown = [], []
    for _ in range(5):
        start = time.perf_counter()
        dset = _runtime.load_shard(shard)
        sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch="gfx90a")
        times.append(time.perf_counter() - start)
        assert len(sm.kept()) == kernels and not sm.dropped()
        # Freeing the previous set is not part of a load: time it apart.
        start = time.perf_counter()
        del sm, dset
        teardown.append(time.perf_counter() - start)
    load = statistics.median(times) * 1000
    freed = statistics.median(teardown) * 1000
    print(f"runtime load of {kernels} kernels + state manager: {load:.1f} ms (median of 5; "
          f"freeing them after: {freed:.1f} ms)")
    return ({"kernels": kernels, "mib": rss, "pack_s": round(took, 3)},
            {"kernels": kernels, "ms": load, "runs_ms": [round(t * 1000, 2) for t in times],
             "teardown_ms": round(freed, 2)})


def machine() -> dict[str, Any]:
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": jobs(), "memory_mib": mem, "cpu": model, "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="ukdpack benchmarks")
    p.add_argument("--quick", action="store_true", help="small trees: under a minute")
    p.add_argument("--work", type=Path, default=BENCH / ".work", help="scratch folder")
    args = p.parse_args(argv)
    work = args.work / ("quick" if args.quick else "full")
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    prebuilt = prebuilt_figure(work, args.quick)
    hip, one, tree, cache = hip_figures(work, args.quick)
    noop = noop_figure(work, tree, cache, args.quick)
    rss, load = big_figures(work, args.quick, cache)
    ratios: dict[str, float | None] = {
        "prebuilt_pack_vs_raw_bound": round(prebuilt["ratio"], 3),
        "hip_pack_vs_compile_bound": round(hip["ratio"], 3),
        "one_edit_vs_full": round(one["ratio"], 4),
        "noop_build_s": round(noop["seconds"], 3) if noop else None,
        "runtime_load_10k_ms": round(load["ms"], 2),
        "pack_peak_rss_mib": round(rss["mib"], 1),
    }
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO, check=False).stdout.strip()
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": commit, "quick": args.quick, "machine": machine(), "ratios": ratios,
              "goals": {k: f"{op} {v}" for k, (op, v) in GOALS.items()},
              "raw": {"prebuilt": prebuilt, "hip": hip, "one_edit": one, "noop_build": noop,
                      "pack_10k": rss, "runtime_load": load},
              "seconds": round(time.perf_counter() - started, 1)}
    print("\nfigure                        value      goal")
    for key, value in ratios.items():
        op, goal = GOALS[key]
        met = "n/a" if value is None else ("met" if value <= goal else "NOT met")
        print(f"{key:28s} {value!s:>9}  {op} {goal}  {met}")
    results = BENCH / "results"
    results.mkdir(exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    name = "latest-quick.json" if args.quick else "latest.json"
    (results / name).write_text(text)
    if not args.quick:
        (results / f"{datetime.date.today().isoformat()}.json").write_text(text)
    print(f"\nwrote bench/results/{name} ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
