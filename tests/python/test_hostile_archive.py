"""Hostile archives in a packed shard.

* Not every file is a file: a FIFO named like the shard's archive is refused at once by
  every judge (``ukdpack-validate``, ``ukdpack inspect``, ``desk-check``, ``verify``),
  naming the file and what it found. Each runs under a timeout, so a judge that waits on
  the FIFO for a writer fails the test instead of hanging the suite.

The shard is the example tree packed by the real packer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shard_support import ARCH, pack_example

LIMIT = 30  # seconds: far above what a refusal takes, far below a hung suite
ARCHIVE = f"kpack/kernels_{ARCH}.kpack"
FIFO_FOUND = "expected a regular file, found a FIFO"
VALIDATE = Path(sys.executable).parent / "ukdpack-validate"


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(authored tree, out root) of the example tree packed for gfx90a."""
    return pack_example(tmp_path_factory, "hostile-archive")


def _copy(packed: tuple[Path, Path], tmp_path: Path) -> Path:
    shard = tmp_path / ARCH  # named like the arch: the tools take the arch from it
    shutil.copytree(packed[1] / ARCH, shard, symlinks=True)
    return shard


def _validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VALIDATE), *args], capture_output=True, text=True, check=False,
                          timeout=LIMIT, env=dict(os.environ, HIP_PLATFORM="amd"))


def _clean(r: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in r.stderr
    assert "internal error" not in r.stderr


# ------------------------------------------------------------------ a FIFO for the archive

def _judge(tool: str, shard: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    if tool == "ukdpack-validate":
        return _validate(str(shard))
    args = [str(shard), "--source-root", str(tree)] if tool == "verify" else [str(shard)]
    env = dict(os.environ, HIP_PLATFORM="amd")
    return subprocess.run([sys.executable, "-m", "ukdpack", tool, *args], capture_output=True,
                          text=True, check=False, timeout=LIMIT, env=env)


@pytest.mark.parametrize("tool", ["ukdpack-validate", "inspect", "desk-check", "verify"])
def test_a_fifo_named_like_the_archive_is_refused_at_once(
        packed: tuple[Path, Path], tmp_path: Path, tool: str) -> None:
    shard = _copy(packed, tmp_path)
    (shard / ARCHIVE).unlink()
    os.mkfifo(shard / ARCHIVE)
    start = time.monotonic()
    r = _judge(tool, shard, packed[0])  # raises TimeoutExpired if it waits on the FIFO
    assert time.monotonic() - start < LIMIT
    _clean(r)
    assert r.returncode == 1, r.stdout + r.stderr
    prefix = "ukdpack-validate: error: " if tool == "ukdpack-validate" else "ukdpack: error: "
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(prefix) and FIFO_FOUND in ln]
    assert lines, r.stderr
    assert all(ARCHIVE in ln for ln in lines), lines
    assert not any("not found" in ln for ln in r.stderr.splitlines() if ARCHIVE in ln)


def test_the_runtime_reader_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "kernels_gfx90a.kpack"
    os.mkfifo(fifo)
    # In a child process: were the reader to block, the timeout ends it, not the suite.
    code = ("import sys\nfrom ukdpack import _runtime\n"
            "try:\n    _runtime.KpackArchive(sys.argv[1])\n"
            "except _runtime.KpackError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                       text=True, check=False, timeout=LIMIT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{fifo}: {FIFO_FOUND}"
