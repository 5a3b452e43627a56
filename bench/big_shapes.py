"""Shapes a big library may take that the scale tree (100 kernels to a KDP, every
kernel kept) does not, two versions side by side.

    python bench/big_shapes.py --before /path/to/baseline/.venv/bin/python \
        [--after .venv/bin/python] [--kernels 60000] [--runs 3]

Each version is a Python environment with ukdpack installed (its ``ukdpack-validate``
beside its ``python``). Trees are made in ``bench/.work/big-shapes`` with
``make_tree.make_scale_tree`` (half prebuilt objects, half embedded sources):

* ``one_pack``: every kernel in one KDP. Figure: a pack with a warm cache and an empty
  out root (the shard's making, index and check: what grows with a pack's size);
* ``all_dropped``: 100 kernels to a KDP, every KDP without a dispatch
  (``"dispatch": null``), so the runtime drops every kernel with a warning. Figure:
  ``ukdpack-validate`` of its packed shard (one finding and one log line per kernel);
* ``many_engines``: ``--engines`` engines (each its KMD, UED and two UDDs) of 10
  embedded-source kernels in one KDP each. Figure: the runtime's load of its packed
  shard and the state manager on it (``load_shard`` + ``StateManager`` through the
  extension, as ``run.py``'s scale load: the median of 3 in one process);
* ``tools``: ``--tool-kernels`` kernels as the scale tree lays them out (100 to a KDP).
  Figures: ``ukdpack verify`` of its packed shard against the tree, and ``ukdpack diff``
  of the shard and a copy of it (tools that go through every kernel's launches).

Runs alternate between the versions (before, after, then after, before, ...); each
run's wall and CPU seconds (user + sys) are printed, and the medians are written to
``bench/results/big_shapes.json``. The two versions' outputs are compared (the shard's
files, the validate report), so a faster version is also the same one.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402
import run as bench_run  # noqa: E402

ARCH = "gfx90a"


def _pack(python: str, tree: Path, out: Path, cache: Path) -> list[str]:
    return [python, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root", str(out),
            "--cache-dir", str(cache), "--plain", "--jobs", str(bench_run.jobs()), "--arch", ARCH]


def _engines_tree(root: Path, engines: int, per_engine: int = 10) -> None:
    """``engines`` engines of ``per_engine`` embedded-source kernels, a KDP each."""
    k = 0
    for e in range(engines):
        make_tree._engine(root, e, [ARCH])
        items: list[object] = []
        for _ in range(per_engine):
            items.append({"id": make_tree._id("engines", k), "version": "1.0", "name": f"e{k}",
                          "priority": k % 7, "metadata": {"variant": k}, "arch": [ARCH],
                          "kernel_source": {"kind": "embedded_source",
                                            "source_file": f"rtc/k{k % 997}.cpp",
                                            "entry_point": f"k{k}"}})
            k += 1
        make_tree._write(root / f"engine{e}" / "kernels.kdp.json",
                         make_tree._kdp(make_tree._id("kdp", "engines", e), f"engines{e}", e,
                                        "single", items, [ARCH]))


def _trees(work: Path, kernels: int, engines: int, tool_kernels: int) -> dict[str, Path]:
    """The four trees, made once per size."""
    objects = make_tree.compile_objects(work / "objects", make_tree.SCALE_DISTINCT_OBJECTS, ARCH,
                                        bench_run.jobs(), make_tree.SCALE_OBJECT_KIB)
    trees = {}
    shapes = (("one_pack", kernels, kernels), ("all_dropped", kernels, 100),
              ("many_engines", 0, 0), ("tools", tool_kernels, 100))
    for name, count, per_pack in shapes:
        tree = work / (f"{name}-{engines}" if name == "many_engines" else f"{name}-{count}")
        if not (tree / ".made").is_file():
            shutil.rmtree(tree, ignore_errors=True)
            if name == "many_engines":
                _engines_tree(tree, engines)
            else:
                make_tree.make_scale_tree(tree, count, ARCH, objects, engines=1,
                                          per_pack=per_pack)
            if name == "all_dropped":
                for kdp in tree.rglob("*.kdp.json"):
                    doc = json.loads(kdp.read_text())
                    doc["dispatch"] = None
                    kdp.write_text(json.dumps(doc, indent=1) + "\n")
            (tree / ".made").write_text("")
        trees[name] = tree
    return trees


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the baseline environment's python")
    ap.add_argument("--after", default=sys.executable)
    ap.add_argument("--kernels", type=int, default=60000)
    ap.add_argument("--engines", type=int, default=2000)
    ap.add_argument("--tool-kernels", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=BENCH / ".work" / "big-shapes")
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    trees = _trees(work, args.kernels, args.engines, args.tool_kernels)
    sides = {"before": args.before, "after": args.after}
    cache = work / "cache"
    # Warm the cache (both versions key objects alike: the same entries) and pack the
    # other trees once per version: validate and the load read each version's own shard.
    for side, python in sides.items():
        for name, tree in trees.items():
            bench_run.timed_child(_pack(python, tree, work / f"out-{name}-{side}", cache))
    figures = ["one_pack", "all_dropped", "many_engines", "verify", "diff"]
    got: dict[str, dict[str, list[tuple[float, float]]]] = {n: {s: [] for s in sides} for n in figures}
    tool_shard = {side: work / f"out-tools-{side}" / ARCH for side in sides}
    for side, shard in tool_shard.items():
        shutil.rmtree(work / f"tools-copy-{side}", ignore_errors=True)
        shutil.copytree(shard, work / f"tools-copy-{side}")
    reports: dict[str, str] = {}
    for i in range(args.runs):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for side in order:
            python = sides[side]
            out = work / f"out-one_pack-{side}"
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu, _ = bench_run.timed_child(_pack(python, trees["one_pack"], out, cache))
            got["one_pack"][side].append((wall, cpu))
            validate = str(Path(python).parent / "ukdpack-validate")
            shard = str(work / f"out-all_dropped-{side}" / ARCH)
            wall, cpu, reports[side] = bench_run.timed_child([validate, "--json", shard])
            got["all_dropped"][side].append((wall, cpu))
            shard = str(work / f"out-many_engines-{side}" / ARCH)
            _, _, text = bench_run.timed_child([python, "-c", bench_run.LOAD, shard, ARCH, "3"])
            loaded = json.loads(text)
            if loaded["kept"] != 10 * args.engines:
                raise SystemExit(f"many_engines: {side} kept {loaded['kept']} kernels")
            load_s = statistics.median(loaded["times"])
            got["many_engines"][side].append((load_s, load_s))
            ukdpack = [python, "-m", "ukdpack"]
            got["verify"][side].append(bench_run.timed_child(
                [*ukdpack, "verify", "--source-root", str(trees["tools"]), str(tool_shard[side])])[:2])
            got["diff"][side].append(bench_run.timed_child(
                [*ukdpack, "diff", str(tool_shard[side]), str(work / f"tools-copy-{side}")])[:2])
            print(f"run {i + 1} {side}: " + ", ".join(
                f"{n} {got[n][side][-1][0]:.3f} s" for n in figures), flush=True)
    same = _same_shards(work / "out-one_pack-before" / ARCH, work / "out-one_pack-after" / ARCH)
    # The reports name each version's own shard folder; the rest must be the same.
    verdicts = [{k: v for k, v in json.loads(reports[s]).items() if k != "roots"} for s in sides]
    if not same or verdicts[0] != verdicts[1]:
        raise SystemExit("the two versions' outputs differ")
    result = {"kernels": args.kernels, "engines": args.engines,
              "tool_kernels": args.tool_kernels, "runs": args.runs,
              "units": {"one_pack": "s", "all_dropped": "s", "verify": "s", "diff": "s",
                        "many_engines": "s (the load's wall, median of 3 in a process; CPU not "
                                        "taken: the figure's columns repeat the wall)"},
              "before": args.before, "after": args.after,
              "figures": {n: {s: bench_run.summary(r) for s, r in runs.items()}
                          for n, runs in got.items()}}
    for name, figure in result["figures"].items():  # type: ignore[attr-defined]
        b, a = figure["before"]["wall_median_s"], figure["after"]["wall_median_s"]
        print(f"{name}: {b:.4f} s -> {a:.4f} s (wall, median of {args.runs})")
    out = BENCH / "results" / "big_shapes.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(BENCH.parent)}")
    return 0


def _same_shards(a: Path, b: Path) -> bool:
    """Whether two shard folders hold the same files with the same bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(
        _same_shards(a / d, b / d) for d in cmp.common_dirs)


if __name__ == "__main__":
    raise SystemExit(main())
