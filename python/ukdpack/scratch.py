"""Scratch folders in the temporary folder, and sweeping those a killed pack left.

A compile runs in a folder of its own (its output, its depfile and its ``TMPDIR``: hipcc
leaves folders there), removed after it; so do the compiler probes, the remote farm's
dependency scans and ``cache verify``'s compiles. A process killed with SIGKILL cannot
remove its folders. So each is *held*: its maker takes an exclusive ``flock`` on the
folder as soon as it is made, and only then writes the mark ``HELD_MARK`` into it. The
kernel drops the lock when its holder dies, whatever kills it and in whichever pid
namespace (containers sharing ``/tmp``), so a marked folder whose lock can be taken has
no owner left. ``sweep`` removes such folders: named with one of ``PREFIXES``, a folder
(not a link) of this user's, marked, not modified for ``MIN_AGE_S``, its lock free. A
folder without the mark (made before this rule, or not by ukdpack) is never touched.

Built-in modules only: the early compiles make folders before the packer is imported.
"""

from __future__ import annotations

import _thread
import fcntl
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

#: The folders' names: a compile's own, a compiler probe's, a farm compile's dependency
#: scan, and ``cache verify``'s compile.
COMPILE, PROBE, SCAN, VERIFY = "ukdpack-cc-", "ukdpack-probe-", "ukdpack-scan-", "ukdpack-verify-"
PREFIXES = (COMPILE, PROBE, SCAN, VERIFY)
#: Written into a folder once its lock is held: only marked folders are swept.
HELD_MARK = ".ukdpack-held"
#: A folder modified more recently is left alone, whatever its lock says: a guard beside
#: the lock's, for file systems whose locks are looser than a local one's.
MIN_AGE_S = 60.0

_lock = _thread.allocate_lock()
#: The descriptor holding each of this process's held folders' lock, by path.
_held: dict[str, int] = {}


def temp_base() -> str:
    """The temporary folder ``tempfile`` would pick first: ``$TMPDIR``, ``$TEMP``,
    ``$TMP``, else ``/tmp``."""
    return next((os.environ[v] for v in ("TMPDIR", "TEMP", "TMP") if os.environ.get(v)),
                "/tmp")


def make(prefix: str) -> str:
    """A new folder (mode 700) named ``prefix`` and a random part in the temporary
    folder, held by this process until ``remove``; ``tempfile.mkdtemp``'s choice of
    folder where the first one takes none."""
    base = temp_base()
    for _ in range(8):
        path = os.path.abspath(os.path.join(base, prefix + os.urandom(8).hex()))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError:
            break
        _hold(path)
        return path
    import tempfile

    path = tempfile.mkdtemp(prefix=prefix)
    _hold(path)
    return path


def _hold(path: str) -> None:
    """Lock ``path`` and mark it held; a folder that cannot be locked stays unmarked
    (its maker still removes it; no sweep ever does)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(os.open(os.path.join(path, HELD_MARK),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError:
        os.close(fd)
        return
    with _lock:
        _held[path] = fd


def remove(path: str) -> None:
    """Remove a folder ``make`` made (its contents first, its lock last)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


class Folder:
    """``make(prefix)`` as a context manager: its path while inside, removed after."""

    __slots__ = ("path", "prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix, self.path = prefix, ""

    def __enter__(self) -> str:
        self.path = make(self.prefix)
        return self.path

    def __exit__(self, *_: object) -> None:
        remove(self.path)


def _abandoned(base: str, now: float, uid: int) -> Iterator[tuple[str, int]]:
    """Each folder in ``base`` that ``sweep`` removes, with a descriptor holding its lock."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(PREFIXES):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (not stat.S_ISDIR(st.st_mode) or st.st_uid != uid
                or now - st.st_mtime < MIN_AGE_S):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            now_st = os.fstat(fd)
            mark = os.stat(HELD_MARK, dir_fd=fd, follow_symlinks=False)
            if (now_st.st_ino, now_st.st_dev) != (st.st_ino, st.st_dev) \
                    or not stat.S_ISREG(mark.st_mode):
                raise OSError("not the folder looked at, or not marked")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: no process holds it
        except OSError:  # BlockingIOError: its maker is alive
            os.close(fd)
            continue
        yield entry.path, fd


def sweep(base: str | None = None) -> int:
    """Remove the held folders in ``base`` (the temporary folder) whose maker is gone;
    how many. Never raises for a folder it cannot read or remove. The mark goes last: a
    sweep cut short leaves the folder marked, for the next one."""
    removed = 0
    for path, fd in _abandoned(base or temp_base(), time.time(), os.geteuid()):
        try:
            _remove_marked(path)
            removed += not os.path.lexists(path)
        finally:
            os.close(fd)
    return removed


def _remove_marked(path: str) -> None:
    import shutil

    try:
        children = [e for e in os.scandir(path) if e.name != HELD_MARK]
    except OSError:
        return
    for child in children:
        try:
            if child.is_dir(follow_symlinks=False):
                shutil.rmtree(child.path)
            else:
                os.unlink(child.path)
        except OSError:
            return
    try:
        os.unlink(os.path.join(path, HELD_MARK))
        os.rmdir(path)
    except OSError:
        pass
