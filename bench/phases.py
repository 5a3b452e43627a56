"""Wall seconds per phase of one ``ukdpack pack``: where a pack's time goes.

    python bench/phases.py [--runs N] [--fresh PATH]... PACK_ARGS...
    python bench/phases.py --runs 5 --fresh O --fresh C --source-root T --out-root O \
        --cache-dir C --plain --jobs 2 --arch gfx90a

Runs ``ukdpack pack PACK_ARGS`` ``--runs`` times, each in a fresh process whose packer
functions are wrapped with timers, and prints the median of each phase. Each
``--fresh`` path is removed before each run (the out root and cache: cold packs). Phases nest:
``assemble`` (a packer before the arches overlapped) holds the four below;
``assemble: prepare`` holds ``descriptors`` and ``archive``, ``assemble: check and publish``
holds ``index`` (made, and read back), ``runtime check`` and ``publish``; with several arches, an arch's check and publish
run on a thread beside the next arch's prepare, so the phases overlap. The
timers cost a few microseconds per call; compare figures taken the same way.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from child_timing import timer_code

# The child: wrap the phases, run the pack, print {phase: seconds} as JSON on stderr.
CHILD = r"""
import functools, json, sys, time
started = time.perf_counter()
from ukdpack import _runtime, cli
from ukdpack.produce import producers
from ukdpack.shard import pack, publish
spent = {"imports": time.perf_counter() - started}
""" + timer_code("perf_counter", "spent") + r"""
for owner, attr, label in [
        (pack, "load_tree", "load_tree"), (pack, "check_tree", "check_tree"),
        (pack, "plan_arch", "plan"), (producers.Producer, "run", "produce"),
        (_runtime, "read_prebuilt_objects", "produce: batch reads"),
        (pack._Assembler, "run", "assemble"),
        (pack._Assembler, "prepare", "assemble: prepare"),
        (pack._Assembler, "finish", "assemble: check and publish"),
        (pack._Assembler, "_descriptor_files", "assemble: descriptors"),
        (pack._Assembler, "_write_archive", "assemble: archive"),
        (pack, "check_shard", "assemble: runtime check"),  # before 2026-12-05, evening
        (pack, "set_problems", "assemble: runtime check"),
        (pack, "_write_index", "assemble: index"), (pack, "_confirm_index", "assemble: index"),
        (publish, "publish", "assemble: publish")]:
    wrap(owner, attr, label)
code = cli.main(sys.argv[1:])
spent["total"] = time.perf_counter() - started
print("PHASES " + json.dumps(spent), file=sys.stderr)
sys.exit(code)
"""


def main(argv: list[str]) -> int:
    runs, fresh = 3, []
    while argv[:1] in (["--runs"], ["--fresh"]):
        if argv[0] == "--runs":
            runs = int(argv[1])
        else:
            fresh.append(argv[1])
        argv = argv[2:]
    seen: dict[str, list[float]] = {}
    for _ in range(runs):
        for path in fresh:
            shutil.rmtree(path, ignore_errors=True)
        r = subprocess.run([sys.executable, "-c", CHILD, "pack", *argv], capture_output=True,
                           text=True, check=False)
        line = next((ln for ln in r.stderr.splitlines() if ln.startswith("PHASES ")), None)
        if r.returncode != 0 or line is None:
            print(r.stderr, file=sys.stderr)
            return 1
        for phase, seconds in json.loads(line[len("PHASES "):]).items():
            seen.setdefault(phase, []).append(seconds)
    for phase, values in seen.items():
        print(f"{phase:28s} {statistics.median(values):7.3f} s   "
              f"(runs {', '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
