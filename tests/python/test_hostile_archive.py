"""Hostile archives in a packed shard.

* Not every file is a file: a FIFO named like the shard's archive is refused at once by
  every judge (``ukdpack-validate``, ``ukdpack inspect``, ``desk-check``, ``verify``),
  naming the file and what it found. Each runs under a timeout, so a judge that waits on
  the FIFO for a writer fails the test instead of hanging the suite.
* Bounded work per load: a small archive whose toc keys all hold one highly compressible
  payload, and kernels naming every key, stop at the budget of decompressed bytes
  (``max_decompressed_bytes``, ``ukdpack-validate --max-decompressed-bytes``) with a
  diagnostic naming the archive, the budget and how to raise it.

The shard is the example tree packed by the real packer; the hostile archive is written by
the real writer (``ArchiveWriter``) from a code object of that shard.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from shard_support import ARCH, edit, kernel, pack_example, read

from ukdpack import _runtime
from ukdpack.shard import archive as kpack

LIMIT = 30  # seconds: far above what a refusal takes, far below a hung suite
ARCHIVE = f"kpack/kernels_{ARCH}.kpack"
FIFO_FOUND = "expected a regular file, found a FIFO"
SCALE = "attention/scale.kdp.json"
KEYS = 1000
PAYLOAD = 1 << 20  # each entry decompresses to 1 MiB
BUDGET = 64 * PAYLOAD
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


# ------------------------------------------------------------------ the decompression budget

def _hostile(packed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of the shard whose ``scale.f32`` is cloned into KEYS kernels, kernel i naming
    toc key ``hostile_<i>`` of kpack/hostile_gfx90a.kpack; every key holds the same
    payload, scale.f32's object zero-padded to 1 MiB. Returns the shard and the ids."""
    shard = _copy(packed, tmp_path)
    src = kernel(read(shard / SCALE), "scale.f32")["kernel_source"]
    obj = _runtime.KpackArchive(str(shard / ARCHIVE)).get(src["toc_key"], ARCH)
    assert len(obj) < PAYLOAD
    payload = obj + bytes(PAYLOAD - len(obj))
    writer = kpack.ArchiveWriter("hostile", [ARCH])
    frame = kpack.compress_frame(payload)  # the writer stores it once per key
    for i in range(KEYS):
        writer.add(f"hostile_{i:04d}", ARCH, payload, frame=frame)
    writer.write(shard / "kpack" / f"hostile_{ARCH}.kpack")
    assert (shard / "kpack" / f"hostile_{ARCH}.kpack").stat().st_size < KEYS * PAYLOAD // 100

    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(KEYS)]
    sha = hashlib.sha256(payload).hexdigest()

    def clone(doc: dict[str, Any]) -> None:
        base = kernel(doc, "scale.f32")
        for i, uid in enumerate(ids):
            k = dict(base, id=uid, name=f"hostile.f32.{i}",
                     metadata={"dtype": "FLOAT", "block": 100000 + i})
            k["kernel_source"] = dict(base["kernel_source"], library=f"../kpack/hostile_{ARCH}.kpack",
                                      toc_key=f"hostile_{i:04d}", sha256=sha)
            doc["kernelDescriptors"].append(k)

    edit(shard / SCALE, clone)
    return shard, ids


def test_a_state_manager_stops_at_the_budget(packed: tuple[Path, Path], tmp_path: Path) -> None:
    shard, ids = _hostile(packed, tmp_path)
    dset = _runtime.load_shard(str(shard), max_decompressed_bytes=BUDGET)
    assert dset.ok, dset.diagnostics
    sm = _runtime.StateManager(dset, _runtime.stub_handlers(dset, ARCH), arch=ARCH)
    start = time.monotonic()
    loaded = 0
    refused: list[_runtime.RuntimeCheckError] = []
    for uid in ids:
        try:
            assert len(sm.load_launch_code(uid)) == PAYLOAD
            assert not refused, "a launch loaded after the budget was spent"
            loaded += 1
        except _runtime.RuntimeCheckError as e:
            refused.append(e)
    assert time.monotonic() - start < LIMIT
    assert loaded == 64
    assert {e.code for e in refused} == {"DECOMPRESS_BUDGET"}
    assert len(refused) == KEYS - 64
    message = refused[0].diagnostic["message"]
    assert refused[0].diagnostic["file"] == SCALE
    assert f"archive '../kpack/hostile_{ARCH}.kpack' (kpack/hostile_{ARCH}.kpack)" in message
    assert f"budget of {BUDGET} bytes (64.0 MiB)" in message
    assert "load_shard(max_decompressed_bytes=N)" in message
    assert "ukdpack-validate --max-decompressed-bytes N" in message


def test_ukdpack_validate_stops_at_the_budget(packed: tuple[Path, Path], tmp_path: Path) -> None:
    shard, _ = _hostile(packed, tmp_path)
    r = _validate("--max-decompressed-bytes", str(BUDGET), str(shard))
    _clean(r)
    assert r.returncode == 1, r.stderr
    budget = [ln for ln in r.stderr.splitlines() if f"budget of {BUDGET} bytes" in ln]
    assert budget and all(ln.startswith("ukdpack-validate: error: ") for ln in budget)
    assert all(f"kpack/hostile_{ARCH}.kpack" in ln and "--max-decompressed-bytes N" in ln
               for ln in budget)
    # The example's own launches and the hostile ones share the one budget.
    assert KEYS - 64 <= len(budget) < KEYS
    verdict = _runtime.validate_roots([str(shard)], max_decompressed_bytes=BUDGET)
    assert not verdict["ok"]
    assert sum(d["code"] == "DECOMPRESS_BUDGET" for d in verdict["diagnostics"]) == len(budget)


@pytest.mark.parametrize("value", ["", "-1", "64G", "1e9", "18446744073709551616"])
def test_ukdpack_validate_wants_a_byte_count(packed: tuple[Path, Path], value: str) -> None:
    r = _validate(f"--max-decompressed-bytes={value}", str(packed[1] / ARCH))
    _clean(r)
    assert r.returncode == 2
    assert "--max-decompressed-bytes" in r.stderr


def test_the_packed_example_loads_under_the_default(packed: tuple[Path, Path]) -> None:
    shard = packed[1] / ARCH
    r = _validate(str(shard))
    _clean(r)
    assert r.returncode == 0, r.stderr
    dset = _runtime.load_shard(str(shard))
    sm = _runtime.StateManager(dset, _runtime.stub_handlers(dset, ARCH), arch=ARCH)
    launches = [(k["kernel_id"], name) for k in sm.kept() if k["packed"]
                for name in (k["launches"] or [None])]
    assert len(launches) > 1
    for uid, name in launches:
        assert sm.load_launch_code(uid, name)
    assert _runtime.DEFAULT_MAX_DECOMPRESSED_BYTES == 64 << 30
