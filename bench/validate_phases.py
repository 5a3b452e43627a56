"""Wall and CPU seconds per phase of ``ukdpack validate``, in one process.

    python bench/validate_phases.py TREE

Calls what ``validate`` calls, one phase at a time: the imports, ``load_tree`` (the
runtime's load, the whole-set rules and, before 2026-12-05, the models), the packer's
rules (``check_tree``) and the reachability note with the summary. CPU is the process's
(``time.process_time``: every thread, the loader's included). Run it with each version's
Python to compare (the phases nest the same way in both).
"""

from __future__ import annotations

import os
import sys
import time

started, cpu_started = time.perf_counter(), time.process_time()
marks: list[tuple[str, float, float]] = []


def mark(name: str) -> None:
    marks.append((name, time.perf_counter(), time.process_time()))


def main() -> int:
    from pathlib import Path

    from ukdpack.authored import load, validate

    mark("imports")
    tree = load.load_tree(Path(sys.argv[1]))
    mark("load_tree")
    problems = validate.check_tree(tree, missing_prebuilt="warning")
    mark("rules")
    problems += tree.unreachable_note()
    summary = validate.Validation(tree, tuple(problems)).summary()
    mark("note+summary")
    wall, cpu = started, cpu_started
    for name, w, c in marks:
        print(f"{name:14s} wall {w - wall:7.3f} s  CPU {c - cpu:7.3f} s")
        wall, cpu = w, c
    print(f"{'total':14s} wall {marks[-1][1] - started:7.3f} s  CPU "
          f"{marks[-1][2] - cpu_started:7.3f} s  ({summary}; load average "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
