"""What work per pack could give an edit at most: the edit figures of ``bench/run.py``
on the bench's hip tree and on a tree of the edited pack alone, side by side.

    python bench/edit_ceiling.py --tree T --cache C [--rounds 3] [--edits 9] [--out F]

``T`` is a tree of ``make_tree.make_hip_tree`` (the bench's ``hip`` tree) and ``C`` a
compile cache that holds its objects. The pack-alone tree keeps the engine, dispatch and
metadata files of ``engine0`` and its first single pack (``single000.kdp.json``, the pack
``one_edit_figure`` edits), with every source: an edit of it compiles the same unit and
looks up the same objects as in the whole tree, and its packer has no other pack to
model, plan, key or make. Its figures are what a packer that worked only on the packs an
edit touched would reach at best: the rules, each arch's finish and the start-up would
still cost what they cost on this small tree.

Rounds alternate the two trees; each round runs ``one_edit_figure`` (``--edits`` edits a
mode, a fresh process and the resident packer alternating, each edit's compiles run alone
after it) with ``SCALE`` values neither cache has compiled. Writes the overheads, their
CPU and the load average to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run

ARCHES = ["gfx90a", "gfx940"]


def pack_alone(tree: Path, dest: Path) -> None:
    """``tree``'s sources and ``engine0`` with only its first single pack."""
    shutil.copytree(tree / "src", dest / "src")
    engine = dest / "engine0"
    engine.mkdir(parents=True)
    for f in sorted((tree / "engine0").iterdir()):
        if not f.name.endswith(".kdp.json") or f.name == "single000.kdp.json":
            shutil.copy2(f, engine / f.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ukdpack-edit-ceiling"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--edits", type=int, default=9)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    run.EDITS = args.edits
    shutil.rmtree(args.work, ignore_errors=True)
    trees: dict[str, Path] = {}
    for name in ("whole", "alone"):
        w = args.work / name
        w.mkdir(parents=True)
        if name == "whole":
            shutil.copytree(args.tree, w / "tree")
        else:
            pack_alone(args.tree, w / "tree")
        shutil.copytree(args.cache, w / "cache")
        run.run_pack(w / "tree", w / "out", ARCHES, w / "cache")
        trees[name] = w
    result: dict[str, Any] = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M"),
                              "load_average_before": os.getloadavg()[0], "rounds": {}}
    for rnd in range(args.rounds):
        for name, w in trees.items():
            first = 7000 + 100 * rnd  # values the bench's own edits (2 onwards) never use
            got = run.one_edit_figure(w / "tree", w / "out", ARCHES, w / "cache", 1.0, w,
                                      first=first)
            row = {mode: {"overhead_s": round(g["overhead_s"], 3),
                          "overhead_cpu_s": g["overhead_cpu_s"], "repack_s": g["repack_s"],
                          "compiles_alone_s": g["compiles_alone_s"]}
                   for mode, g in (("process", got), ("resident", got["resident"]))}
            result["rounds"].setdefault(name, []).append(row)
            print(f"round {rnd + 1} {name}: process {row['process']['overhead_s']:.3f} s "
                  f"(CPU {row['process']['overhead_cpu_s']:.3f}), resident "
                  f"{row['resident']['overhead_s']:.3f} s (CPU "
                  f"{row['resident']['overhead_cpu_s']:.3f})", flush=True)
    result["load_average_after"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
