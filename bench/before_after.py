"""`ukdpack validate` and a warm no-change `ukdpack pack`, before and after, side by side.

    python bench/before_after.py [BASE_REF] [--quick] [--runs N] [--output FILE]

"Before" is ukdpack built at BASE_REF (default ``DEFAULT_BASE``) into its own git
worktree and venv under ``bench/.work/baseline-<sha>/`` (built once, reused after);
"after" is this tree's own ``.venv``, reinstalled first from the working tree
(incremental, the same pip command as ``scripts/setup.sh``) so it runs what is checked
out. Both time the same tree from ``bench/make_tree.py`` (10,000 hip kernels, 8
engines, 40 units, gfx90a; ``--quick``: 1,000 kernels over 4 units), each version
with its own out root and compile cache, made warm by one untimed pack first.

Every run is a fresh process; the two versions take turns (A B, then B A, ...) so a
busy machine slows both sides alike. Writes ``bench/results/judge_before_after.json``
(``--quick``: ``judge_before_after.quick.json``): per figure and version the median,
min and max wall seconds (plus CPU seconds and peak RSS), the ratio after/before of
the medians and the median of the per-round ratios, both commits, the date and the
machine.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
import make_tree  # noqa: E402

# The commit before the descriptor rules moved into the C++ runtime ("One judge").
DEFAULT_BASE = "ecb02844711acadd8a92e97ba42c7148741a9fe6"
ARCH = "gfx90a"
ENGINES = 8
# (kernels, translation units, timed runs per version and figure)
FULL = (10_000, 40, 7)
QUICK = (1_000, 4, 3)
FIGURES = ("validate", "warm_pack")
# What scripts/setup.sh installs to build with --no-build-isolation; the baseline's own
# [build-system] requires are added where Python can read TOML (3.11 on).
BUILD_TOOLS = ["setuptools", "wheel", "scikit-build-core>=0.10", "pybind11>=2.12",
               "cmake>=3.20", "ninja"]


def log(msg: str) -> None:
    print(f"before_after: {msg}", file=sys.stderr, flush=True)


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def run_logged(argv: list[str], logfile: Path, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> None:
    """Runs a set-up step with its output appended to ``logfile``; on failure shows its tail."""
    with logfile.open("a") as f:
        f.write(f"\n$ {' '.join(argv)}\n")
        f.flush()
        r = subprocess.run(argv, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                           check=False)
    if r.returncode != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-40:])
        raise SystemExit(f"before_after: failed ({r.returncode}): {' '.join(argv)}\n"
                         f"--- last lines of {logfile} ---\n{tail}")


def clean_env() -> dict[str, str]:
    """The environment every timed command gets: HIP_PLATFORM=amd and no PYTHONPATH (it
    would put one version's sources ahead of the other's installed package)."""
    env = dict(os.environ, HIP_PLATFORM="amd")
    env.pop("PYTHONPATH", None)
    return env


# --- the two versions -----------------------------------------------------------------


@dataclass
class Version:
    label: str  # "before" or "after"
    commit: str
    ukdpack: Path  # the console script
    work: Path  # its own out roots and caches go here
    dirty: bool = False


def build_requires(src: Path) -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: BUILD_TOOLS alone
        return []
    doc = tomllib.loads((src / "pyproject.toml").read_text())
    return [str(r) for r in doc.get("build-system", {}).get("requires", [])]


def build_baseline(sha: str) -> Path:
    """ukdpack at ``sha`` in ``bench/.work/baseline-<sha12>/``: ``src`` (a detached git
    worktree), ``venv`` and ``build``. Built once; ``ready.json`` marks a finished build."""
    home = BENCH / ".work" / f"baseline-{sha[:12]}"
    src, venv, build, stamp = home / "src", home / "venv", home / "build", home / "ready.json"
    ukdpack = venv / "bin" / "ukdpack"
    if stamp.is_file() and ukdpack.is_file():
        log(f"baseline {sha[:12]}: reusing {home.relative_to(REPO)}")
        return ukdpack
    home.mkdir(parents=True, exist_ok=True)
    logfile = home / "build.log"
    logfile.write_text("")
    if src.exists():
        try:
            at = git("rev-parse", "HEAD", cwd=src)
        except subprocess.CalledProcessError:
            at = ""
        if at != sha:
            shutil.rmtree(src)
            git("worktree", "prune")
    if not src.exists():
        log(f"baseline {sha[:12]}: git worktree add --detach {src.relative_to(REPO)}")
        git("worktree", "prune")
        git("worktree", "add", "--detach", str(src), sha)
    log(f"baseline {sha[:12]}: building into {venv.relative_to(REPO)} (a few minutes once; "
        f"log: {logfile.relative_to(REPO)})")
    started = time.perf_counter()
    if not (venv / "bin" / "python").is_file():
        run_logged([sys.executable, "-m", "venv", str(venv)], logfile)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run_logged([*pip, *BUILD_TOOLS, *build_requires(src)], logfile)
    run_logged([*pip, "--no-build-isolation", "-C", f"build-dir={build}", str(src)], logfile,
               cwd=home, env=clean_env())
    if not ukdpack.is_file():
        raise SystemExit(f"before_after: the baseline build left no {ukdpack}")
    took = time.perf_counter() - started
    stamp.write_text(json.dumps({"commit": sha, "python": sys.version.split()[0],
                                 "build_s": round(took, 1)}, indent=2) + "\n")
    log(f"baseline {sha[:12]}: built in {took:.0f} s")
    return ukdpack


def refresh_after(logfile: Path) -> Path:
    """This tree's ``.venv``, reinstalled from the working tree (incremental in build/py,
    the same pip command as scripts/setup.sh): a regular install is a copy, and a copy
    older than the sources would time the old code as "after"."""
    py = REPO / ".venv" / "bin" / "python"
    if not py.is_file():
        raise SystemExit("before_after: no .venv here: run scripts/setup.sh first")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    logfile.write_text("")
    log("after: reinstalling .venv from the working tree (incremental)")
    run_logged([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                "--no-build-isolation", "--force-reinstall", "--no-deps",
                "-C", "build-dir=build/py", "-C", "cmake.define.UKDPACK_BUILD_TESTS=ON", "."],
               logfile, cwd=REPO, env=clean_env())
    return REPO / ".venv" / "bin" / "ukdpack"


def changed_outside_bench(base: str) -> list[str]:
    """Files of the working tree (tracked or not) that differ from ``base`` outside bench/."""
    spec = [".", ":(exclude)bench"]
    tracked = git("diff", "--name-only", base, "--", *spec).splitlines()
    untracked = git("ls-files", "--others", "--exclude-standard", "--", *spec).splitlines()
    return sorted(set(tracked) | set(untracked))


# --- the tree ------------------------------------------------------------------------


def make_or_reuse_tree(work: Path, kernels: int, units: int) -> Path:
    """The hip tree of ``kernels`` kernels, regenerated only when its parameters or the
    generator changed (``params.json`` beside it)."""
    tree = work / f"tree-{kernels}"
    stamp = work / f"tree-{kernels}.params.json"
    params = {"kernels": kernels, "engines": ENGINES, "units": units, "arches": [ARCH],
              "make_tree_sha256": hashlib.sha256((BENCH / "make_tree.py").read_bytes()).hexdigest()}
    if tree.is_dir() and stamp.is_file() and json.loads(stamp.read_text()) == params:
        log(f"tree: reusing {tree.relative_to(REPO)}")
        return tree
    log(f"tree: generating {kernels} kernels into {tree.relative_to(REPO)}")
    if tree.exists():
        shutil.rmtree(tree)
    stamp.unlink(missing_ok=True)
    make_tree.make_hip_tree(tree, kernels, ENGINES, units, [ARCH])
    stamp.write_text(json.dumps(params, indent=2) + "\n")
    return tree


# --- timing --------------------------------------------------------------------------


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + sys of the process and its children
    maxrss_mib: float


def timed(argv: list[str], what: str) -> Run:
    """One run of ``argv`` as a fresh process: wall time around spawn and reap, and the
    kernel's own accounting of that process (os.wait4). A failure stops the benchmark."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=clean_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"before_after: {what} exited {proc.returncode}: {' '.join(argv)}\n{text}")
    if what.endswith("warm_pack"):
        compiled = re.search(r"(\d+) compiled", text)
        if compiled and int(compiled.group(1)) != 0:
            raise SystemExit(f"before_after: {what} compiled: the pack was not warm\n{text}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def commands(v: Version, tree: Path) -> dict[str, list[str]]:
    out, cache = v.work / "out", v.work / "cache"
    return {"validate": [str(v.ukdpack), "validate", str(tree)],
            "warm_pack": [str(v.ukdpack), "pack", "--source-root", str(tree), "--out-root",
                          str(out), "--arch", ARCH, "--cache-dir", str(cache)]}


def summary(xs: list[float], digits: int = 4) -> dict[str, Any]:
    return {"median": round(statistics.median(xs), digits), "min": round(min(xs), digits),
            "max": round(max(xs), digits), "runs": [round(x, digits) for x in xs]}


def bench_figure(figure: str, before: Version, after: Version, tree: Path,
                 runs: int) -> dict[str, Any]:
    """``runs`` rounds, each one run of each version, the order swapped every round."""
    argv = {v.label: commands(v, tree)[figure] for v in (before, after)}
    got: dict[str, list[Run]] = {"before": [], "after": []}
    for i in range(runs):
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        for label in order:
            got[label].append(timed(argv[label], f"{label} {figure}"))
        b, a = got["before"][-1].wall_s, got["after"][-1].wall_s
        log(f"{figure} round {i + 1}/{runs}: before {b:.3f} s, after {a:.3f} s")
    result: dict[str, Any] = {}
    for label, rs in got.items():
        result[label] = {"wall_s": summary([r.wall_s for r in rs]),
                         "cpu_s": summary([r.cpu_s for r in rs]),
                         "maxrss_mib": summary([r.maxrss_mib for r in rs], 1),
                         "argv": argv[label]}
    med_b = result["before"]["wall_s"]["median"]
    med_a = result["after"]["wall_s"]["median"]
    pairs = [a.wall_s / b.wall_s for a, b in zip(got["after"], got["before"], strict=True)]
    result["ratio_after_before"] = round(med_a / med_b, 4)
    result["pairwise_ratio"] = summary(pairs)
    result["cpu_ratio_after_before"] = round(result["after"]["cpu_s"]["median"]
                                             / result["before"]["cpu_s"]["median"], 4)
    return result


# --- the machine and the report ------------------------------------------------------


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
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
            "memory_mib": mem, "cpu": model, "python": sys.version.split()[0],
            "loadavg_end": list(os.getloadavg())}


def table(figures: dict[str, Any]) -> str:
    lines = [f"{'figure':10s} {'version':7s} {'median s':>9s} {'min s':>8s} {'max s':>8s} "
             f"{'cpu s':>7s} {'rss MiB':>8s}"]
    for name, f in figures.items():
        for label in ("before", "after"):
            w, c, m = f[label]["wall_s"], f[label]["cpu_s"], f[label]["maxrss_mib"]
            lines.append(f"{name:10s} {label:7s} {w['median']:9.3f} {w['min']:8.3f} "
                         f"{w['max']:8.3f} {c['median']:7.3f} {m['median']:8.1f}")
        p = f["pairwise_ratio"]
        lines.append(f"{name:10s} after/before {f['ratio_after_before']:.3f} (medians); "
                     f"per round {p['median']:.3f} [{p['min']:.3f}..{p['max']:.3f}]; "
                     f"cpu {f['cpu_ratio_after_before']:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="validate and warm no-change pack, before vs after")
    p.add_argument("base", nargs="?", default=DEFAULT_BASE,
                   help=f"git ref of the baseline (default {DEFAULT_BASE[:7]})")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK[0]:,} kernels, {QUICK[2]} runs (default {FULL[0]:,}, {FULL[2]})")
    p.add_argument("--runs", type=int, help="timed runs of each version and figure")
    p.add_argument("--output", type=Path, help="result file (default bench/results/"
                   "judge_before_after.json; --quick: judge_before_after.quick.json)")
    p.add_argument("--before-ukdpack", type=Path,
                   help="the baseline's ukdpack script, already installed (a venv of BASE_REF): "
                        "used instead of building one")
    p.add_argument("--no-refresh", action="store_true",
                   help="time .venv as installed (skip reinstalling it from the working tree)")
    args = p.parse_args(argv)
    kernels, units, runs = QUICK if args.quick else FULL
    runs = args.runs or runs
    if runs < 1:
        p.error("--runs must be at least 1")
    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        base = git("rev-parse", "--verify", f"{args.base}^{{commit}}")
    except subprocess.CalledProcessError:
        p.error(f"not a commit: {args.base}")
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain"))
    loadavg_start = list(os.getloadavg())
    changed = changed_outside_bench(base)
    work = BENCH / ".work" / "judge"
    work.mkdir(parents=True, exist_ok=True)

    before = Version("before", base, args.before_ukdpack or build_baseline(base),
                     work / f"before-{base[:12]}-{kernels}")
    after_ukdpack = (REPO / ".venv" / "bin" / "ukdpack" if args.no_refresh
                     else refresh_after(work / "after-install.log"))
    after = Version("after", head, after_ukdpack, work / f"after-{kernels}", dirty=dirty)
    if not changed:
        log(f"note: the working tree matches {base[:12]} outside bench/: a dry run, "
            "ratios should be about 1.0")
    tree = make_or_reuse_tree(work, kernels, units)

    # Each version its own out root and cache, fresh for this run; one untimed pack
    # (compiles everything into that cache) and one untimed validate make both warm.
    setup_s: dict[str, float] = {}
    for v in (before, after):
        if v.work.exists():
            shutil.rmtree(v.work)
        v.work.mkdir(parents=True)
        cmd = commands(v, tree)
        log(f"{v.label}: cold pack into {v.work.relative_to(REPO)} (compiles {units} units)")
        setup_s[f"{v.label}_cold_pack_s"] = round(timed(cmd["warm_pack"], f"{v.label} cold pack")
                                                  .wall_s, 3)
        timed(cmd["warm_pack"], f"{v.label} warm_pack")
        timed(cmd["validate"], f"{v.label} validate")

    figures = {f: bench_figure(f, before, after, tree, runs) for f in FIGURES}
    result = {
        "what": "ukdpack validate and a warm no-change ukdpack pack of the same tree, "
                "baseline (before) vs working tree (after), alternated in one run",
        "date": date, "quick": args.quick, "runs": runs,
        "tree": {"kernels": kernels, "engines": ENGINES, "units": units, "arch": ARCH,
                 "path": str(tree.relative_to(REPO))},
        "before": {"commit": base, "ref": args.base, "ukdpack": str(before.ukdpack)},
        "after": {"commit": head, "dirty": dirty, "ukdpack": str(after.ukdpack),
                  "refreshed": not args.no_refresh,
                  "files_changed_outside_bench_vs_before": len(changed)},
        "machine": machine(),
        "figures": figures,
        "ratios": {f: figures[f]["ratio_after_before"] for f in FIGURES},
        "setup": setup_s,
    }
    result["machine"]["loadavg_start"] = loadavg_start
    result["seconds"] = round(time.perf_counter() - started, 1)
    default = "judge_before_after.quick.json" if args.quick else "judge_before_after.json"
    out = (args.output or BENCH / "results" / default).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nbefore {base[:12]}  after {head[:12]}{' (dirty)' if dirty else ''}  "
          f"{kernels:,} kernels  {runs} runs each  nproc {result['machine']['nproc']}")
    print(table(figures))
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    print(f"\nwrote {shown} ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
