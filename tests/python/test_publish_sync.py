"""Publishing after the early fsyncs (``publish.EarlySync``): what they synced is not
synced again, and what they failed to sync fails publishing even where a second fsync
would succeed (the kernel reports a writeback error to the first fsync after it)."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pack_support import REPO

from ukdpack.cli import main
from ukdpack.errors import UkdError
from ukdpack.shard import publish

MINIMAL = REPO / "tests" / "corpus" / "ok_minimal" / "tree"


def _staged(root: Path) -> Path:
    staging = publish.fresh_staging(root, "gfx90a")
    (staging / "kpack").mkdir()
    (staging / "kpack" / "a.kpack").write_bytes(b"archive")
    (staging / "engine.kdp.json").write_text("{}")
    (staging / "engine.kdp.json.ukdside").write_text("{}")
    return staging


def _counting(monkeypatch: pytest.MonkeyPatch,
              fails: Callable[[str], bool] = lambda _: False) -> list[str]:
    """Replace ``_fsync_path``: record each path synced, raise EIO where ``fails``."""
    seen: list[str] = []
    lock = threading.Lock()

    def fsync(path: str) -> None:
        with lock:
            seen.append(path)
        if fails(path):
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    monkeypatch.setattr(publish, "_fsync_path", fsync)
    return seen


def test_publishing_syncs_only_what_the_early_fsyncs_did_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = _staged(tmp_path)
    seen = _counting(monkeypatch)
    early = publish.start_fsync_tree(staging)
    early.join()
    files = {str(staging / "kpack" / "a.kpack"), str(staging / "engine.kdp.json"),
             str(staging / "engine.kdp.json.ukdside")}
    assert files <= set(seen)
    (staging / "index.ukdx").write_bytes(b"written after the early pass")
    seen.clear()
    final = publish.publish(staging, tmp_path, "gfx90a", [early])
    # Every folder again (names made since), the late file; no file synced early.
    assert str(final / "engine.kdp.json").endswith("engine.kdp.json")
    assert str(staging / "index.ukdx") in seen
    assert not files & set(seen)
    assert {str(staging), str(staging / "kpack")} <= set(seen)
    assert (final / "index.ukdx").read_bytes() == b"written after the early pass"


def test_an_early_fsync_failure_fails_publishing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    staging = _staged(tmp_path)
    archive = str(staging / "kpack" / "a.kpack")
    failing = {archive}
    _counting(monkeypatch, lambda p: p in failing)
    early = publish.start_fsync(Path(archive))
    early.join()
    failing.clear()  # a second fsync of the file would now succeed: the error is spent
    with pytest.raises(UkdError) as raised:
        publish.publish(staging, tmp_path, "gfx90a", [early])
    assert str(raised.value) == (f"{tmp_path / 'gfx90a'}: cannot write the shard to disk: "
                                 f"{os.strerror(errno.EIO)} ({archive})")
    assert not (tmp_path / "gfx90a").exists(), "a shard was published over a failed write"


def test_an_early_failure_on_a_file_removed_since_is_no_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = _staged(tmp_path)
    index = staging / "index.ukdx"
    index.write_bytes(b"an index the check did not keep")
    _counting(monkeypatch, lambda p: p == str(index))
    early = publish.start_fsync(index, staging)
    early.join()
    index.unlink()
    final = publish.publish(staging, tmp_path, "gfx90a", [early])
    assert (final / "engine.kdp.json").is_file() and not (final / "index.ukdx").exists()


def test_a_pack_whose_write_the_disk_failed_publishes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    tree = Path(shutil.copytree(MINIMAL, tmp_path / "tree"))
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["pack", "--source-root", str(tree), "--out-root", str(out), "--cache-dir",
            str(cache), "--plain", "--jobs", "2", "--arch", "gfx90a"]
    monkeypatch.setenv("HIP_PLATFORM", "amd")
    assert main(argv) == 0
    capsys.readouterr()
    # The early fsync of the staged archive meets a writeback error, once: a later fsync
    # of the same file succeeds, as the kernel's would.
    told: list[str] = []
    real = publish._fsync_path

    def fsync(path: str) -> None:
        if path.endswith(".kpack") and ".staging" in path and not told:
            told.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        real(path)

    monkeypatch.setattr(publish, "_fsync_path", fsync)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert told and f"cannot write the shard to disk: {os.strerror(errno.EIO)} ({told[0]})" in err
    assert "internal error" not in err and "Traceback" not in err
    # A failed arch leaves no shard (a stale one is not taken for this tree's) and no
    # staging folder.
    assert sorted(p.name for p in out.iterdir()) == [], sorted(p.name for p in out.iterdir())
