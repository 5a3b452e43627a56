"""Files the package writes and reads: writing so that a reader (or a kill) sees the old
content or the new, never a part (the one atomic-write helper of the package), and
reading only what is a regular file, without ever blocking (the one reader helper)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_atomic(path: Path, data: bytes | Iterable[bytes], *, mode: int = 0o644,
                 durable: bool = False) -> None:
    """Write ``data`` (bytes, or chunks of them) to ``path`` through a temporary file in the
    same folder, renamed over it. ``mode`` replaces mkstemp's 0600 (shipped files are
    read by others); ``durable`` also fsyncs the file and its folder, for what must
    survive a power cut (archives), not for caches."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in [data] if isinstance(data, bytes) else data:
                f.write(chunk)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """fsync a folder, so the names in it (a rename) are durable; a platform or
    filesystem that cannot is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, worded for a message (``a FIFO``, ``a folder``): the
    runtime's own words for the same finding (cpp/src/files.cpp)."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def found_at(path: str | os.PathLike[str]) -> str:
    """What lies at ``path``, links followed, worded for a message: ``nothing``,
    ``a folder``, ``a FIFO``, ``a symbolic link to nothing (-> target)``..."""
    try:
        return kind_of(os.stat(path).st_mode)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a symbolic link to nothing (-> {os.readlink(path)})"
        return "nothing"
    except OSError as e:
        return f"something that cannot be looked at ({e.strerror})"


class NotRegularFileError(OSError):
    """A path a reader expected a regular file at holds something else: a FIFO (whose
    read would wait for a writer forever), a socket, a device, a folder. ``strerror``
    is the message: ``expected a regular file, found a FIFO``."""

    def __init__(self, path: str | os.PathLike[str], found: str) -> None:
        super().__init__(errno.EINVAL, f"expected a regular file, found {found}", os.fspath(path))
        self.found = found


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), never blocking: a
    FIFO, socket, device or folder raises NotRegularFileError without being read, a
    missing file FileNotFoundError, any other failure its OSError. Every reader of a file
    the user points the package at (sources, prebuilt objects, artifacts, sidecars) goes
    through here, so none of them can hang a build on a FIFO."""
    # stat first, so a device is not even opened (opening some has effects: a tape
    # rewinds); then open without blocking and look again at what was opened, since the
    # path may have been replaced in between.
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, kind_of(mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, kind_of(mode))
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)
