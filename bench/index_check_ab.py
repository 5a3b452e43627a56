"""CPU of a packed shard's index and runtime check, the two ways side by side.

    python bench/index_check_ab.py SHARD ARCH [--runs 15]

``before``: the index from a JSON load of its own (``_runtime.shard_index``), then the
runtime check's JSON load and check (``check_shard(use_index=False)``); ``after``: the
check's JSON load, the index drafted from it (``shard_index_draft``), the check, then
the load through the index checked (``ShardIndexDraft.confirm``): what
``_Assembler.finish`` runs before publishing, on a copy of ``SHARD`` (whose index is
removed). Runs alternate; prints the median process CPU (every thread's) and wall of
each, and asserts both give the same index bytes and problems.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ukdpack import _runtime
from ukdpack.shard.runtime_check import check_shard, set_problems


def _before(shard: Path, arch: str) -> tuple[bytes | None, list[str]]:
    data, _why = _runtime.shard_index(str(shard))
    problems = check_shard(shard, arch, None, 2, use_index=False)
    return data, [str(p) for p in problems]


def _after(shard: Path, arch: str) -> tuple[bytes | None, list[str]]:
    dset = _runtime.load_shard(str(shard), use_index=False)
    draft, _why = _runtime.shard_index_draft(dset)
    problems = set_problems(dset, arch, None, 2)
    del dset
    data = draft.data if draft is not None and not draft.confirm(str(shard)) else None
    return data, [str(p) for p in problems]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shard", type=Path)
    ap.add_argument("arch")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shard = Path(tmp) / "shard"
        shutil.copytree(args.shard, shard)
        (shard / _runtime.SHARD_INDEX_FILE).unlink(missing_ok=True)
        ways = {"before": _before, "after": _after}
        got: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
        results = {}
        for i in range(args.runs):
            for w in (("before", "after") if i % 2 == 0 else ("after", "before")):
                cpu, wall = time.process_time(), time.perf_counter()
                results[w] = ways[w](shard, args.arch)
                got[w].append((time.process_time() - cpu, time.perf_counter() - wall))
        assert results["before"] == results["after"], "the two ways differ"
        assert results["after"][0] is not None, "no index"
        for w, runs in got.items():
            print(f"{w}: CPU {statistics.median(r[0] for r in runs) * 1000:.1f} ms, wall "
                  f"{statistics.median(r[1] for r in runs) * 1000:.1f} ms (median of {len(runs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
