"""Packs at the same time: the per-arch lock serializes publishing, a waiting pack says
so, one that waits too long gives up cleanly, and separate out roots do not interact."""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pack_support import copy_example, run_pack, shard_files
from reliability_support import ARCH, assert_loads, pack_argv, pack_env, residue

WAITING = "waiting for another pack of"
RACES = 20


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes]]:
    """(tree, warm cache, the shard an untroubled pack makes)."""
    base = tmp_path_factory.mktemp("conc")
    tree, cache = copy_example(base / "tree"), base / "cache"
    r = run_pack(tree, base / "ref", [ARCH], "--jobs", "1", cache=cache)
    assert r.returncode == 0, r.stderr
    return tree, cache, shard_files(base / "ref" / ARCH)


@contextmanager
def held_lock(out: Path) -> Iterator[None]:
    """Hold the shard's lock as another pack would."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / f".{ARCH}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _start(tree: Path, out: Path, cache: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(pack_argv(tree, out, cache, *extra), env=pack_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_same_out_root_races_never_corrupt(warm: tuple[Path, Path, dict[str, bytes]],
                                           tmp_path: Path) -> None:
    tree, cache, ref = warm
    for i in range(RACES):
        out = tmp_path / f"out{i}"
        procs = [_start(tree, out, cache) for _ in range(2)]
        results = [(p.wait(), *p.communicate()) for p in procs]
        for rc, _, err in results:
            assert rc == 0, err
            assert "Traceback" not in err
        assert shard_files(out / ARCH) == ref
        assert residue(out) == []
        assert_loads(out / ARCH)


def test_pack_waits_for_the_lock_and_says_so(warm: tuple[Path, Path, dict[str, bytes]],
                                             tmp_path: Path) -> None:
    tree, cache, ref = warm
    out = tmp_path / "out"
    with held_lock(out):
        proc = _start(tree, out, cache, "--lock-timeout", "120")
        assert proc.stderr is not None
        # Reading up to the message proves it was said while the lock was still held.
        line = proc.stderr.readline()
        while line and WAITING not in line:
            line = proc.stderr.readline()
        assert WAITING in line and f".{ARCH}.lock" in line
        assert proc.poll() is None, "the pack went on without the lock"
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert err.count(WAITING) == 0  # said once, not once per poll
    assert shard_files(out / ARCH) == ref


def test_lock_timeout_gives_up_cleanly(warm: tuple[Path, Path, dict[str, bytes]],
                                       tmp_path: Path) -> None:
    tree, cache, ref = warm
    out = tmp_path / "out"
    assert run_pack(tree, out, [ARCH], "--jobs", "1", cache=cache).returncode == 0
    with held_lock(out):
        r = subprocess.run(pack_argv(tree, out, cache, "--lock-timeout", "0.3"),
                           env=pack_env(), capture_output=True, text=True, check=False)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert WAITING in r.stderr
    assert "gave up after" in r.stderr and "waiting for another pack to release" in r.stderr
    assert shard_files(out / ARCH) == ref  # the shard it could not lock is untouched
    assert residue(out) == []


def test_packs_of_different_roots_run_in_parallel(warm: tuple[Path, Path, dict[str, bytes]],
                                                  tmp_path: Path) -> None:
    tree, cache, ref = warm
    other = copy_example(tmp_path / "other")
    (other / "attention" / "scale.kdp.json").write_text(
        (tree / "attention" / "scale.kdp.json").read_text().replace('"priority": 10',
                                                                    '"priority": 3', 1))
    procs = [_start(tree, tmp_path / "a", cache), _start(other, tmp_path / "b", cache)]
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err
        assert WAITING not in err  # different out roots share no lock
    assert shard_files(tmp_path / "a" / ARCH) == ref
    b = shard_files(tmp_path / "b" / ARCH)
    assert b != ref and b["attention/scale.kdp.json"] != ref["attention/scale.kdp.json"]
    assert_loads(tmp_path / "a" / ARCH)
    assert_loads(tmp_path / "b" / ARCH)
