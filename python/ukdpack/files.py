"""Writing files so that a reader (or a kill) sees the old content or the new, never a
part: the one atomic-write helper of the package."""

from __future__ import annotations

import contextlib
import os
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
