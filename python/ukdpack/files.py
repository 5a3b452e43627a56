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
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileRange:
    """``size`` bytes at ``offset`` of the open file ``fd``: a chunk that ``write_atomic``
    copies from file to file (inside the kernel where it can), never through memory."""

    fd: int
    offset: int
    size: int


def read_range(r: FileRange) -> bytes:
    """The bytes of ``r``; OSError when its file ends first."""
    out = bytearray()
    while len(out) < r.size:
        got = os.pread(r.fd, r.size - len(out), r.offset + len(out))
        if not got:
            raise OSError(errno.EIO, f"a file range ends {r.size - len(out)} bytes early")
        out += got
    return bytes(out)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy_range(r: FileRange, dst: int) -> None:
    """Appends ``r`` to ``dst`` at its offset: copy_file_range, else read and write."""
    offset, left = r.offset, r.size
    while left:
        try:
            n = os.copy_file_range(r.fd, dst, left, offset)
        except OSError as e:  # across file systems, or a kernel without it
            if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            n = 0
        if n == 0:
            chunk = read_range(FileRange(r.fd, offset, min(left, 1 << 22)))
            _write_all(dst, chunk)
            n = len(chunk)
        offset += n
        left -= n


def _write_chunks(fd: int, chunks: Iterable[bytes | FileRange]) -> None:
    """Writes ``chunks`` in order: small ones gathered, adjacent ranges of one file
    copied as one."""
    pending = bytearray()
    ranged: FileRange | None = None
    for chunk in chunks:
        if isinstance(chunk, FileRange):
            if ranged is not None and ranged.fd == chunk.fd and \
                    ranged.offset + ranged.size == chunk.offset:
                ranged = FileRange(chunk.fd, ranged.offset, ranged.size + chunk.size)
                continue
            if ranged is not None:
                _copy_range(ranged, fd)
            _write_all(fd, pending)
            pending.clear()
            ranged = chunk
            continue
        if ranged is not None:
            _copy_range(ranged, fd)
            ranged = None
        if len(chunk) >= 1 << 16:
            _write_all(fd, pending)
            pending.clear()
            _write_all(fd, chunk)
        else:
            pending += chunk
    if ranged is not None:
        _copy_range(ranged, fd)
    _write_all(fd, pending)


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """Writes all of ``data`` at ``offset`` of ``fd``."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def unnamed_file(folder: Path) -> int:
    """A new read-write file in ``folder`` that has no name: O_TMPFILE where the file
    system has it (a kill leaves nothing behind, and ``link_unnamed`` can name it), else
    created and unlinked at once."""
    flags = os.O_RDWR | os.O_CLOEXEC
    with contextlib.suppress(OSError, AttributeError):
        return os.open(folder, flags | os.O_TMPFILE, 0o600)
    fd, name = tempfile.mkstemp(dir=folder, prefix=".ukdpack-spool.")
    os.unlink(name)
    return fd


def link_unnamed(fd: int, path: Path, *, mode: int = 0o644) -> bool:
    """Gives the unnamed (O_TMPFILE) file ``fd`` the name ``path``: linked under a
    temporary name in the same folder, then renamed over ``path``. False, and nothing
    changed, where it cannot be (another file system, a file that had a name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        # linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N, the one way to name such a file
        # without privileges; Python uses linkat only when given a folder descriptor.
        fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.link(str(fd), tmp, src_dir_fd=fds, follow_symlinks=True)
    except OSError:
        return False
    finally:
        os.close(fds)
    _rename_into_place(tmp, path, mode)
    return True


def _rename_into_place(tmp: str | Path, path: Path, mode: int) -> None:
    """Gives the written temporary file ``tmp`` its ``mode`` and renames it over
    ``path``; removes it when either fails."""
    try:
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, data: bytes | Iterable[bytes | FileRange], *, mode: int = 0o644,
                 durable: bool = False) -> None:
    """Write ``data`` (bytes, or chunks of bytes and file ranges) to ``path`` through a
    temporary file in the same folder, renamed over it. ``mode`` replaces mkstemp's 0600
    (shipped files are read by others); ``durable`` also fsyncs the file and its folder,
    for what must survive a power cut (archives), not for caches."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            _write_chunks(fd, [data] if isinstance(data, bytes) else data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _rename_into_place(tmp, path, mode)
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
    runtime's own words for the same finding (cpp/src/base/files.cpp)."""
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
