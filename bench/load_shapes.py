"""What a shard's start-up costs per file and per kernel: the load of shards of the
scale tree's kernels laid out in other shapes (bench/README.md, "Sixteenth pass").

    python bench/load_shapes.py [--work DIR] [--rounds 5] [--runs 15] [--threads 0]
        [--output bench/results/load_shapes.json]

Shapes (kernels, kernels per KDP): one kernel per KDP at 1, 104 and 1,000 KDPs (what a
file costs with almost no kernel in it), and 10,000 kernels at 10, 100 and 1,000 to a
KDP, 100,000 at 1,000 to a KDP (what a kernel costs, files apart). Each is made by
make_tree.make_scale_tree (the scale tree's kernels), packed once for gfx90a into a
folder of `--work` (kept: a stamp names the parameters), then loaded by
`ukdpack_loader_bench` (load and state manager, as `runtime_load_10k_ms`) `--runs`
times per round, the shapes in turn each round. Prints and writes the median over
rounds of each shape's load, set-only and CPU ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402

#: (kernels, kernels per KDP)
SHAPES = [(1, 1), (104, 1), (1000, 1), (10000, 10), (10000, 100), (10000, 1000), (100000, 1000)]
ARCH = "gfx90a"


def loader_bench() -> Path:
    """The built `ukdpack_loader_bench` (cmake --build build/py --target ukdpack_loader_bench)."""
    path = BENCH.parent / "build" / "py" / "bin" / "ukdpack_loader_bench"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: cmake --build build/py --target ukdpack_loader_bench")
    return path


def shard_of(work: Path, kernels: int, per_pack: int,
             objects: list[Path]) -> tuple[Path, dict[str, int]]:
    """The packed shard of one shape, made once and kept, and what make_tree made."""
    name = f"k{kernels}-p{per_pack}"
    stamp = work / f"{name}.made.json"
    params = {"kernels": kernels, "per_pack": per_pack,
              "objects": [o.name for o in objects]}
    out = work / f"{name}.out"
    if stamp.is_file() and (out / ARCH).is_dir():
        kept = json.loads(stamp.read_text())
        if kept.get("params") == params:
            return out / ARCH, kept["made"]
    for d in (work / name, out, work / f"{name}.cache"):
        shutil.rmtree(d, ignore_errors=True)
    made = make_tree.make_scale_tree(work / name, kernels, ARCH, objects, per_pack=per_pack)
    subprocess.run([sys.executable, "-m", "ukdpack", "pack", "--source-root", str(work / name),
                    "--out-root", str(out), "--cache-dir", str(work / f"{name}.cache"),
                    "--plain", "--arch", ARCH], check=True, capture_output=True,
                   env=dict(os.environ, HIP_PLATFORM="amd"))
    stamp.write_text(json.dumps({"params": params, "made": made}))
    return out / ARCH, made


def main(argv: list[str] | None = None) -> int:
    """Load every shape in turn, round after round; print and write the medians."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--work", default=str(BENCH / ".work" / "load-shapes"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--output", default=str(BENCH / "results" / "load_shapes.json"))
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    objects = make_tree.compile_objects(work / "objects", 8, ARCH, 2, 4)
    made = {shape: shard_of(work, *shape, objects) for shape in SHAPES}
    shards = {shape: shard for shape, (shard, _) in made.items()}
    binary = loader_bench()
    got: dict[tuple[int, int], list[dict[str, float]]] = {shape: [] for shape in SHAPES}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for shape, shard in shards.items():
            out = subprocess.run([str(binary), str(shard), "--runs", str(args.runs), "--threads",
                                  str(args.threads)], check=True, capture_output=True,
                                 text=True).stdout
            got[shape].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for (kernels, per_pack), runs in got.items():
        row: dict[str, object] = {"kernels": kernels, "per_pack": per_pack,
                                  "kdps": made[(kernels, per_pack)][1]["kdps"]}
        for key in ("load_ms", "set_ms", "load_cpu_ms"):
            row[key] = round(statistics.median(r[key] for r in runs), 2)
            row[f"{key}_rounds"] = [r[key] for r in runs]
        rows.append(row)
        print(f"{kernels:>7} kernels in {row['kdps']:>5} KDPs: load {row['load_ms']:7.2f} ms "
              f"(set {row['set_ms']:.2f}, CPU {row['load_cpu_ms']:.2f})")
    result = {"threads": args.threads, "rounds": args.rounds, "runs": args.runs,
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "shapes": rows}
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
