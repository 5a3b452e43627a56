"""Publishing shards: each shard is built in ``OUT_ROOT/.<arch>.staging``
and swapped into place only when complete and checked, under a per-arch lock.

On Linux the swap is one ``renameat2(RENAME_EXCHANGE)``, so a reader (or a kill at
any moment) sees the previous shard or the new one, never neither. Elsewhere the
previous shard is first moved to ``.<arch>.old``, and the next pack restores it
should a kill land between the two renames.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ukdpack.errors import UkdError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def staging_path(out_root: Path, arch: str) -> Path:
    return out_root / f".{arch}.staging"


def _old_path(out_root: Path, arch: str) -> Path:
    return out_root / f".{arch}.old"


def dormant_marker(out_root: Path, arch: str) -> Path:
    """``OUT_ROOT/.<arch>.dormant``: present exactly when the last pack found no kernels
    for ``arch``, so a missing shard is told apart from one a failed pack removed."""
    return out_root / f".{arch}.dormant"


def mark_dormant(out_root: Path, arch: str, why: str) -> None:
    """Record that ``arch`` has no shard because the root has no kernels for it (its shard
    removed first). The file's presence is the record; its line only says why, so a kill
    mid-write leaves a true record and no temporary file."""
    dormant_marker(out_root, arch).write_text(why + "\n", encoding="utf-8")


def _rmtree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        _unlink_files(path)
        shutil.rmtree(path)


def _unlink_files(root: Path) -> None:
    """Unlink the files under ``root`` before ``shutil.rmtree`` removes what is left (and
    reports what fails). An unlink mostly takes microseconds, but one of a file whose
    blocks reached the disk can take milliseconds where freed blocks are discarded at
    once (measured: 3 ms each, a tenth of that when concurrent): past a few
    milliseconds, the rest go in one batch of concurrent calls."""
    files = [os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names]
    deadline = time.monotonic() + UNLINK_ALONE_S
    for i, path in enumerate(files):
        if time.monotonic() > deadline:
            _concurrently(_unlink_quietly, files[i:])
            return
        _unlink_quietly(path)


#: Seconds of unlinking one file after another before the rest go concurrently.
UNLINK_ALONE_S = 0.005


def _unlink_quietly(path: str) -> None:
    # What cannot be unlinked here is left for shutil.rmtree, which reports it.
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.contextmanager
def shard_lock(out_root: Path, arch: str, timeout: float,
               waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold ``OUT_ROOT/.<arch>.lock`` (flock); say so once while waiting for it.

    Whatever ends the work under the lock early (Ctrl-C, an internal failure) leaves what
    a kill would, tidied before the lock is released: the previous shard or the complete
    new one, and no staging folder."""
    path = out_root / f".{arch}.lock"
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            out_root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise UkdError(f"--out-root {out_root}: cannot write the shard of {arch} there: "
                           f"{e.strerror} ({e.filename or out_root})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if not said:
                waiting(f"waiting for another pack of {out_root / arch} (lock {path})")
                said = True
            if time.monotonic() >= deadline:
                raise UkdError(f"{out_root / arch}: gave up after {timeout:.0f} s waiting for "
                               f"another pack to release {path}") from None
            time.sleep(0.05)
            continue
        # The holder before us removes the file as it lets go (below): a lock taken on
        # a file no longer at the path is no lock; open the path anew.
        if _same_file(fd, path):
            break
        os.close(fd)
    try:
        try:
            _recover(out_root, arch)
            yield
        except BaseException:
            _recover(out_root, arch)
            raise
    finally:
        # No lock file outlives the pack: removed while still held, so a waiter that
        # gets this file's lock next sees it gone and starts over on a new one.
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        held, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _recover(out_root: Path, arch: str) -> None:
    """Undo what a killed pack left: a half-built staging folder, a moved-away shard."""
    old, final = _old_path(out_root, arch), out_root / arch
    if old.exists():
        if final.exists():
            _rmtree(old)
        else:
            os.rename(old, final)
    _rmtree(staging_path(out_root, arch))


def fresh_staging(out_root: Path, arch: str) -> Path:
    path = staging_path(out_root, arch)
    _rmtree(path)
    path.mkdir(parents=True)
    return path


def _exchange(a: Path, b: Path) -> bool:
    import ctypes  # here: a first pack, with no shard to swap, does without it

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(rc == 0)


#: Threads fsyncing a staged shard's files: concurrent fsyncs share the file
#: system's journal commits, so many small files cost a few commits, not one each.
FSYNC_THREADS = 16


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class EarlySync(threading.Thread):
    """fsyncs started ahead of publishing, on a thread of their own: the paths they made
    durable, and what failed. Publishing skips the first and reports the second: a file's
    writeback error is told to the first fsync that follows it, so an fsync made anew at
    publishing would return success over data the disk never got."""

    def __init__(self, paths: Callable[[], list[str]]) -> None:
        super().__init__(name="ukdpack-fsync")
        self._paths = paths
        self.synced: set[str] = set()
        self.failed: dict[str, OSError] = {}

    def run(self) -> None:
        _each(self._sync, self._paths())

    def _sync(self, path: str) -> None:
        try:
            _fsync_path(path)
        except OSError as e:
            self.failed[path] = e
        else:
            self.synced.add(path)


def start_fsync(*paths: Path) -> EarlySync:
    """fsync each of ``paths`` on a thread of its own, started now (the disk writes a
    large file, an archive, while the pack goes on checking the shard); hand it to
    ``publish``, which joins it."""
    sync = EarlySync(lambda: [str(p) for p in paths])
    sync.start()
    return sync


def start_fsync_tree(root: Path) -> EarlySync:
    """fsync every file and folder under ``root`` (as ``_fsync_tree``) on a thread of its
    own, started now; hand it to ``publish``, which joins it. Files written under ``root``
    after this call need their own ``start_fsync``."""
    sync = EarlySync(lambda: _tree_paths(root))
    sync.start()
    return sync


def _tree_paths(root: Path, synced: AbstractSet[str] = frozenset()) -> list[str]:
    """Every folder under ``root`` (itself included) and every file in them but those in
    ``synced``."""
    paths: list[str] = []
    for folder, _, files in os.walk(root):
        paths.append(folder)
        paths.extend(path for name in files if (path := os.path.join(folder, name)) not in synced)
    return paths


def _fsync_tree(root: Path, synced: AbstractSet[str] = frozenset()) -> None:
    """fsync every file under ``root`` but those in ``synced`` (made durable since they were
    last written), and every folder (so their names are durable), in one batch of
    concurrent calls."""
    _each(_fsync_path, _tree_paths(root, synced))


def _each(call: Callable[[str], None], paths: list[str]) -> None:
    """``call`` on each path: a few in turn, more in one concurrent batch."""
    if len(paths) <= 2:
        for path in paths:
            call(path)
    else:
        _concurrently(call, paths)


def _concurrently(call: Callable[[str], None], paths: list[str]) -> None:
    """``call`` on every path, FSYNC_THREADS at a time: file system calls that wait on
    the disk (fsync, some unlinks) overlap rather than queue."""
    list(_io_pool().map(call, paths))


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _io_pool() -> ThreadPoolExecutor:
    """The process's threads for those calls, started when first needed and kept: a pack
    fsyncs each arch's staged shard twice (once early, once to publish), and a pool made
    per call started its 16 threads each time (about 2 ms of CPU a call). Its tasks never
    wait on the pool, so callers on several threads at once share it safely."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=FSYNC_THREADS, thread_name_prefix="ukdpack-io")
        return _pool


def end_io_pool() -> None:
    """Let the kept pool's threads end once their calls have (an interrupted command's
    end, which would otherwise wait for idle threads); a later call starts a new one."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads are not there; a new pool starts."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_pool)


def publish(staging: Path, out_root: Path, arch: str,
            early: Sequence[EarlySync] = ()) -> Path:
    """Swap the complete staging folder into ``OUT_ROOT/<arch>``; return that path.
    ``early``: the fsyncs started on the staged files since they were written (joined
    here): their files are not synced again, and what failed in them fails publishing."""
    final = out_root / arch
    synced: set[str] = set()
    try:
        for sync in early:
            sync.join()
            for path, error in sync.failed.items():
                if os.path.lexists(path):  # one unlinked since (an index not kept) is no loss
                    raise error
            synced |= sync.synced
        _fsync_tree(staging, synced)
    except OSError as e:  # the disk's failure, not the tree's: told as such, not as a bug
        raise UkdError(f"{final}: cannot write the shard to disk: {e.strerror} "
                       f"({e.filename or staging})") from None
    if not final.exists():
        os.rename(staging, final)
    elif _exchange(staging, final):
        _rmtree(staging)  # now the previous shard
    else:
        old = _old_path(out_root, arch)
        os.rename(final, old)
        os.rename(staging, final)
        _rmtree(old)
    _rmtree(dormant_marker(out_root, arch))
    return final


def remove_shard(out_root: Path, arch: str) -> bool:
    """Remove a stale shard (and any staging and dormant marker); whether a shard was there. The shard
    leaves its name in one rename (to the staging name, which every pack clears) before
    its files are removed, so an interrupt or a kill never leaves half a shard behind."""
    final, staging = out_root / arch, staging_path(out_root, arch)
    existed = os.path.lexists(final)
    _rmtree(staging)
    if existed:
        os.rename(final, staging)
    _rmtree(staging)
    _rmtree(_old_path(out_root, arch))
    _rmtree(dormant_marker(out_root, arch))
    return existed


def write_file(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
