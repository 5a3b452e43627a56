"""A pack SIGKILLed at any moment leaves the previous shard or the complete new one,
never a mix or nothing; the next pack cleans up after it."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pack_support import copy_example, run_pack, shard_files
from reliability_support import ARCH, assert_loads, pack_argv, pack_env, residue, set_define

from ukdpack import scratch

TRIALS = 20
SEED = 20261202


@dataclass(frozen=True)
class Setup:
    tree: Path
    cache: Path
    previous_out: Path  # an out root holding the good previous shard
    previous: dict[str, bytes]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    base = tmp_path_factory.mktemp("kill")
    tree, cache = copy_example(base / "tree"), base / "cache"
    r = run_pack(tree, base / "previous", [ARCH], "--jobs", "1", cache=cache)
    assert r.returncode == 0, r.stderr
    return Setup(tree, cache, base / "previous", shard_files(base / "previous" / ARCH))


def _trial_out(setup: Setup, where: Path) -> Path:
    shutil.copytree(setup.previous_out, where, symlinks=True)
    return where


def _check_after_kill(setup: Setup, out: Path, scratch: Path) -> str:
    """The shard is the previous one or the complete new one, loads, and a following pack
    leaves the new one and no residue; which of the two the kill left."""
    left = shard_files(out / ARCH)
    r = run_pack(setup.tree, out, [ARCH], "--jobs", "1", cache=setup.cache)
    assert r.returncode == 0, r.stderr
    assert residue(out) == []
    new = shard_files(out / ARCH)
    # The new shard as an untroubled pack makes it, into an empty out root.
    r = run_pack(setup.tree, scratch, [ARCH], "--jobs", "1", cache=setup.cache)
    assert r.returncode == 0, r.stderr
    assert new == shard_files(scratch / ARCH)
    assert new != setup.previous
    if left == setup.previous:
        kind = "previous"
    else:
        assert left == new, "the kill left a shard that is neither the previous nor the new"
        kind = "new"
    assert_loads(out / ARCH)
    return kind


def _kill_after(argv: list[str], delay: float, after_production: bool) -> int | None:
    """Start a pack, SIGKILL it ``delay`` s after its start (or after it said production
    ended); its exit code when it finished first."""
    proc = subprocess.Popen(argv, env=pack_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    if after_production:
        for line in proc.stderr:
            if "code objects:" in line and "compiled" in line:
                break
    time.sleep(delay)
    done = proc.poll()
    if done is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    return done


def _measure(setup: Setup, out: Path) -> tuple[float, float]:
    """(when production ended, when the pack ended) of a pack with one compile, in s."""
    set_define(setup.tree, "KILL_TRIAL", -1)
    start = time.monotonic()
    proc = subprocess.Popen(pack_argv(setup.tree, out, setup.cache), env=pack_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    produced = 0.0
    for line in proc.stderr:
        if "code objects:" in line and "compiled" in line:
            produced = time.monotonic() - start
    assert proc.wait() == 0
    return produced, time.monotonic() - start


@pytest.mark.slow
def test_kill_at_random_moments_leaves_old_or_new_shard(setup: Setup, tmp_path: Path) -> None:
    produced, total = _measure(setup, tmp_path / "measure")
    assert 0 < produced <= total
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}
    for i in range(TRIALS):
        # Every trial compiles (a define no earlier pack used); half the kills land anywhere
        # in the pack, half in its tail, where the archive is written and published.
        set_define(setup.tree, "KILL_TRIAL", i)
        tail = i % 2 == 1
        delay = rng.uniform(0.0, total - produced) if tail else rng.uniform(0.0, total)
        out = _trial_out(setup, tmp_path / f"out{i}")
        finished = _kill_after(pack_argv(setup.tree, out, setup.cache), delay, tail)
        assert finished in (None, 0)
        kind = "finished" if finished == 0 else _check_after_kill(
            setup, out, tmp_path / f"ref{i}")
        if finished == 0:
            assert _check_after_kill(setup, out, tmp_path / f"ref{i}") == "new"
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert sum(outcomes.values()) == TRIALS
    assert outcomes.get("previous", 0) > 0, outcomes  # some kills did land mid-pack


#: (point, n-th call): each narrow window of a pack, hit exactly.
POINTS = [
    ("archive-write", 1),  # archive being written into staging
    ("archive-written", 1),  # archive complete, descriptors not yet
    ("staging-write", 3),  # staging half written
    ("fsync", 1),  # staging complete, not yet swapped
    ("exchange", 1),  # about to swap
    ("exchanged", 1),  # swapped; the previous shard sits in staging
    ("rmtree", 3),  # about to remove the previous shard from staging
    ("rmtree-partial", 3),  # halfway through removing it
    ("rmtree-partial", 1),  # halfway through clearing an earlier kill's staging
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}-{n}" for p, n in POINTS])
def test_kill_at_each_publish_step(setup: Setup, tmp_path: Path, point: str, nth: int) -> None:
    set_define(setup.tree, "KILL_POINT", len(point) * 10 + nth)  # a new shard; cached after
    out = _trial_out(setup, tmp_path / "out")
    (out / f".{ARCH}.staging" / "junk").mkdir(parents=True)  # an earlier kill's leftovers
    r = subprocess.run(pack_argv(setup.tree, out, setup.cache, runner=True),
                       env=pack_env(UKDPACK_TEST_KILL_AT=f"{point}:{nth}"),
                       capture_output=True, text=True, check=False)
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    kind = _check_after_kill(setup, out, tmp_path / "ref")
    # Once swapped, only the previous shard (now in staging) is at risk: the new one stays.
    swapped = point in ("exchanged", "rmtree") or (point, nth) == ("rmtree-partial", 3)
    assert kind == ("new" if swapped else "previous")


def _compiling(folder: Path) -> bool:
    """Whether a process still runs with ``folder`` on its command line (a compile the
    killed pack started runs on: it is in a session of its own)."""
    needle = str(folder).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def test_the_next_pack_sweeps_a_killed_packs_compile_folders(setup: Setup,
                                                              tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = pack_env(TMPDIR=str(temp))
    set_define(setup.tree, "KILL_SWEEP", 1)
    out = _trial_out(setup, tmp_path / "out")
    proc = subprocess.Popen(pack_argv(setup.tree, out, setup.cache), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (left := list(temp.glob(f"{scratch.COMPILE}*"))):
        assert proc.poll() is None and time.monotonic() < deadline, "no compile was seen"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    while any(_compiling(f) for f in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all((f / scratch.HELD_MARK).is_file() for f in left), left
    # Left by the kill, and an hour old by the time of the next pack.
    for folder in left:
        os.utime(folder, (time.time() - 3600,) * 2)
    set_define(setup.tree, "KILL_SWEEP", 2)  # the next pack compiles too
    r = subprocess.run(pack_argv(setup.tree, out, setup.cache), env=env, capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert not any(f.exists() for f in left)
    assert list(temp.iterdir()) == []  # its own folders went too
