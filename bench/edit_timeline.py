"""Where an edit's repack spends its wall time around its compiles, side by side.

    python bench/edit_timeline.py --tree T --out O --cache C [--edits 7] PYTHON...

Each edit changes ``SCALE`` of the first kernel of ``T/engine0/single*.kdp.json`` (the
tree of ``make_tree.make_hip_tree``, packed once into ``O`` with cache ``C``, so each
edit compiles one unit per arch) and is repacked by each PYTHON in turn (an environment
with ukdpack installed), in a child whose compiles are timed. Printed per repack: its
wall time, the time before its first compile starts, the compiles' span, and the time
after its last compile ends (the pack's serial tail), then the medians per PYTHON, and
the CPU of each: the pack process's (user + sys, its compilers apart) and each phase's
thread CPU (``time.thread_time`` around the packer's functions, summed over calls and
threads; a version without a function shows none). ``--events`` also prints the last
repack's timeline per PYTHON: when each phase (and each compile) began and ended, in
milliseconds from the repack's start, and on which thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from child_timing import timer_code

# The child: time every compile and the phases' thread CPU, run the pack, print the
# compiles' span and the CPU on stderr.
CHILD = r"""
import functools, json, os, resource, sys, time
T0 = float(os.environ["EDIT_TIMELINE_T0"])
# As ukdpack.__main__ does for a pack: the early compiles first (a version without them
# starts none).
try:
    from ukdpack.produce import early_compiles as early
except ImportError:
    early = None
if early is not None:
    early.start(sys.argv[1:])
    started_early = (time.time() - T0, early.started())
from ukdpack import cli
from ukdpack.produce import compiler, producers
from ukdpack.shard import pack
import threading
cpu = {}
# (seconds from the start, thread, what) for --events: each marked call's entry and exit
events = [(time.time() - T0, "MainThread", "imported")]
if early is not None and started_early[1]:
    events.append((started_early[0], "MainThread", f"{started_early[1]} compiles started early"))
""" + timer_code("thread_time", "cpu") + r"""
def mark(owner, attr, label):
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    @functools.wraps(fn)
    def marked(*args, **kwargs):
        name = threading.current_thread().name
        events.append((time.time() - T0, name, label + " >"))
        try:
            return fn(*args, **kwargs)
        finally:
            events.append((time.time() - T0, name, label + " <"))
    setattr(owner, attr, marked)
for owner, attr, label in [
        (pack, "load_tree", "tree"), (pack, "check_tree", "rules"), (pack, "plan_arch", "plan"),
        (pack._Assembler, "premake", "premake"), (pack._Assembler, "prepare", "prepare"),
        (pack._Assembler, "finish", "finish"), (pack._runtime, "load_shard", "load_shard"),
        (pack, "_write_index", "index draft"), (pack, "set_problems", "runtime check"),
        (pack, "_confirm_index", "index confirm"), (pack.publish, "publish", "publish")]:
    mark(owner, attr, label)
for owner, attr, label in [
        (pack, "check_tree", "rules"), (pack, "plan_arch", "plan"),
        (producers.Producer, "_may_hit", "keys"), (producers.Producer, "_produce", "jobs"),
        (pack._Assembler, "premake", "premake"), (pack._Assembler, "prepare", "prepare"),
        (pack._Assembler, "finish", "finish")]:
    wrap(owner, attr, label)
spans = []
if hasattr(producers.Producer, "_run_compile"):
    # Each compile's span ends when its outcome is in and lasted the seconds it gives
    # (an early compile's from its early start).
    run_one = producers.Producer._run_compile
    def timed_one(*args, **kwargs):
        outcome, seconds = run_one(*args, **kwargs)
        end = time.time() - T0
        spans.append((end - seconds, end, threading.current_thread().name))
        return outcome, seconds
    producers.Producer._run_compile = timed_one
else:
    run_compile = compiler.run_compile
    def timed(*args, **kwargs):
        start = time.time() - T0
        try:
            return run_compile(*args, **kwargs)
        finally:
            spans.append((start, time.time() - T0, threading.current_thread().name))
    compiler.run_compile = timed
try:
    code = cli.main(sys.argv[1:])
finally:
    if early is not None:
        early.discard()
events.append((time.time() - T0, "MainThread", "main returned"))
print("SPANS " + json.dumps(spans), file=sys.stderr)
print("EVENTS " + json.dumps(events), file=sys.stderr)
used = resource.getrusage(resource.RUSAGE_SELF)
cpu["process"] = used.ru_utime + used.ru_stime
print("CPU " + json.dumps(cpu), file=sys.stderr)
# Ended as the ukdpack command ends (ukdpack.__main__): output flushed, no teardown.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


Events = list[tuple[float, str, str]]  # (seconds from the start, thread, what)


def repack(python: str, tree: Path, out: Path, cache: Path, arches: list[str]
           ) -> tuple[tuple[float, float, float, float], dict[str, float], Events]:
    """(wall, before the first compile, the compiles' span, after the last compile), the
    CPU seconds of the process and of each phase, and the timeline's events."""
    argv = [python, "-c", CHILD, "pack", "--source-root", str(tree), "--out-root", str(out),
            "--cache-dir", str(cache), "--plain", "--jobs", str(len(os.sched_getaffinity(0)))]
    for a in arches:
        argv += ["--arch", a]
    start = time.time()
    r = subprocess.run(argv, capture_output=True, text=True, check=False,
                       env=dict(os.environ, HIP_PLATFORM="amd", EDIT_TIMELINE_T0=repr(start)))
    wall = time.time() - start
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("SPANS ")), None)
    if r.returncode != 0 or line is None:
        raise SystemExit(f"pack by {python} failed:\n{r.stderr}")
    spans = json.loads(line[6:])
    if not spans:
        raise SystemExit("the edit compiled nothing: use a fresh SCALE (--first)")
    first, last = min(s for s, _, _ in spans), max(e for _, e, _ in spans)
    cpu = json.loads(next(ln for ln in r.stderr.splitlines() if ln.startswith("CPU "))[4:])
    events = json.loads(next(ln for ln in r.stderr.splitlines() if ln.startswith("EVENTS "))[7:])
    # the compiles' own events from their spans (each with the thread that ran it)
    events += [e for s, end, name in spans for e in ((s, name, "compile >"),
                                                     (end, name, "compile <"))]
    return (wall, first, last - first, wall - last), cpu, sorted(tuple(e) for e in events)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="out root (one per PYTHON: O-1, O-2)")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--edits", type=int, default=7)
    ap.add_argument("--first", type=int, default=int(time.time()) % 100_000 * 100,
                    help="the first SCALE value (each repack takes the next one)")
    ap.add_argument("--events", action="store_true",
                    help="print the last repack's timeline per PYTHON")
    ap.add_argument("pythons", nargs="+")
    args = ap.parse_args()
    arches = args.arch or ["gfx90a", "gfx940"]
    kdp = sorted(args.tree.glob("engine0/single*.kdp.json"))[0]
    got: dict[str, list[tuple[float, float, float, float]]] = {p: [] for p in args.pythons}
    cpus: dict[str, list[dict[str, float]]] = {p: [] for p in args.pythons}
    timelines: dict[str, Events] = {}
    scale = args.first
    for _ in range(args.edits):
        for i, python in enumerate(args.pythons):
            doc = json.loads(kdp.read_text())
            doc["kernelDescriptors"][0]["kernel_source"]["build"] = {"defines": {"SCALE": scale}}
            kdp.write_text(json.dumps(doc, indent=1) + "\n")
            scale += 1
            out = args.out.with_name(f"{args.out.name}-{i + 1}")
            times, cpu, timelines[python] = repack(python, args.tree, out, args.cache, arches)
            got[python].append(times)
            cpus[python].append(cpu)
            w, b, c, a = got[python][-1]
            print(f"{python}: wall {w:.3f} s, before the compiles {b:.3f}, compiles {c:.3f}, "
                  f"after them {a:.3f}")
    for python, events in timelines.items() if args.events else ():
        print(f"timeline of the last repack by {python} (ms from its start):")
        for at, thread, what in events:
            print(f"  {at * 1e3:8.1f}  {thread[:22]:22s}  {what}")
    for python, runs in got.items():
        med = [statistics.median(r[k] for r in runs) for k in range(4)]
        print(f"median {python}: wall {med[0]:.3f} s, before the compiles {med[1]:.3f}, "
              f"compiles {med[2]:.3f}, after them {med[3]:.3f}")
    for python, runs in cpus.items():
        labels = [k for k in runs[0] if k != "process"]
        print(f"CPU {python}: process {statistics.median(r['process'] for r in runs) * 1e3:.1f} "
              "ms; " + ", ".join(f"{k} {statistics.median(r.get(k, 0.0) for r in runs) * 1e3:.1f}"
                                 for k in labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
