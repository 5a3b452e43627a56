"""Scratch folders: held while their maker lives, swept once it is gone (however it
died), and nothing else in the temporary folder touched."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ukdpack import scratch

AN_HOUR_AGO = time.time() - 3600


def _backdate(path: Path) -> None:
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO), follow_symlinks=False)


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def _made_by_killed_child(base: Path, prefix: str = scratch.COMPILE) -> Path:
    """A folder ``scratch.make`` made in a process then SIGKILLed (it removes nothing)."""
    code = ("import os, sys; from ukdpack import scratch; "
            f"print(scratch.make({prefix!r}), flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(base)})
    assert child.stdout is not None
    path = Path(child.stdout.readline().strip())
    assert path.is_dir()
    (path / "out.o").write_bytes(b"left by the compile")
    (path / "hipcc-tmp").mkdir()  # as hipcc leaves in its TMPDIR
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    child.stdout.close()
    return path


def test_a_folder_is_private_marked_and_removed_by_its_maker(base: Path) -> None:
    path = Path(scratch.make(scratch.COMPILE))
    assert path.parent == base and path.name.startswith(scratch.COMPILE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert (path / scratch.HELD_MARK).is_file()
    scratch.remove(str(path))
    assert not path.exists()
    with scratch.Folder(scratch.PROBE) as inside:
        assert Path(inside).is_dir()
    assert not Path(inside).exists()


def test_a_held_folder_is_never_swept(base: Path) -> None:
    path = Path(scratch.make(scratch.COMPILE))
    try:
        _backdate(path)
        assert scratch.sweep() == 0
        assert (path / scratch.HELD_MARK).is_file()
        # held by another process, too (the lock is the kernel's, not this process's)
        code = "import sys; from ukdpack import scratch; print(scratch.sweep(sys.argv[1]))"
        r = subprocess.run([sys.executable, "-c", code, str(base)], capture_output=True,
                           text=True, check=True)
        assert r.stdout.strip() == "0" and path.is_dir()
    finally:
        scratch.remove(str(path))


def test_a_killed_makers_folder_is_swept_once_old_enough(base: Path) -> None:
    path = _made_by_killed_child(base)
    assert scratch.sweep() == 0, "a folder modified within MIN_AGE_S is left"
    assert path.is_dir()
    _backdate(path)
    assert scratch.sweep() == 1
    assert not path.exists()


@pytest.mark.parametrize("prefix", scratch.PREFIXES)
def test_each_kind_of_folder_is_swept(base: Path, prefix: str) -> None:
    path = _made_by_killed_child(base, prefix)
    _backdate(path)
    assert scratch.sweep() == 1 and not path.exists()


def test_nothing_else_is_touched(base: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # unmarked: an older ukdpack's, or a user's own folder of that name
    unmarked = base / f"{scratch.COMPILE}0123"
    unmarked.mkdir()
    (unmarked / "keep").write_text("x")
    # a link of that name to a marked folder elsewhere, lock free
    elsewhere = _made_by_killed_child(tmp_path)
    link = base / f"{scratch.COMPILE}link"
    link.symlink_to(elsewhere)
    # a file of that name; a marked folder under another name
    plain = base / f"{scratch.COMPILE}file"
    plain.write_text("x")
    other = base / "mine"
    other.mkdir()
    (other / scratch.HELD_MARK).write_text("")
    for p in (unmarked, elsewhere, link, plain, other):
        _backdate(p)
    assert scratch.sweep() == 0
    assert (unmarked / "keep").is_file() and (elsewhere / "out.o").is_file()
    assert link.is_symlink() and plain.is_file() and (other / scratch.HELD_MARK).exists()
    # another user's (as this user sees it: another uid than its own)
    killed = _made_by_killed_child(base)
    _backdate(killed)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(killed).st_uid + 1)
    assert scratch.sweep() == 0 and killed.is_dir()
    monkeypatch.undo()
    assert scratch.sweep(str(base)) == 1 and not killed.exists()


def test_a_missing_temporary_folder_sweeps_nothing(tmp_path: Path) -> None:
    assert scratch.sweep(str(tmp_path / "gone")) == 0
