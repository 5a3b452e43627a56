"""Keeping the local compile cache in bounds: its size limit, eviction, prune, clear.

What a pack may use is never removed under it: every pack holds a *shared* lock on
``<cache>/cache.lock`` from before its first lookup to after its last store
(``pack_lock``); eviction, ``cache prune`` and ``cache clear`` remove files only under
the *exclusive* lock (``exclusive_lock``), which waits for every running pack. After a
pack, its eviction takes the exclusive lock only when no other pack holds the shared
one (it never waits): the last pack to finish evicts for all of them.

The size limit (docs/packing.md, "Keeping the cache in bounds") comes from
``$UKDPACK_CACHE_MAX_SIZE``, else the ``max_size`` line of ``<cache>/cache.conf`` (as
ccache keeps its ``max_size`` in ``ccache.conf`` of its folder), else there is none.
Entries are objects: a compile's object with what was read from it (``info``); each
hit or store marks the object used (its mtime), and eviction removes the least
recently used first. Manifest entries left naming a removed object are dropped with it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ukdpack.errors import Problem, UkdError, UsageError
from ukdpack.files import write_atomic
from ukdpack.produce.cache import VERSION, CompileCache
from ukdpack.words import count

LOCK_NAME = "cache.lock"
CONFIG_NAME = "cache.conf"
MAX_SIZE_ENV = "UKDPACK_CACHE_MAX_SIZE"

_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?)?(b?)", re.IGNORECASE)
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """Bytes of a size such as ``5G``, ``500M``, ``2GiB``, ``300000B`` (k/M/G/T are
    powers of 1000, Ki/Mi/Gi/Ti of 1024); ``0`` is no limit (None). A bare number other
    than 0 is refused (ValueError): ccache reads it as gigabytes, a reader might as bytes."""
    t = text.strip()
    if t == "0":
        return None
    m = _SIZE.fullmatch(t)
    if m is None or (not m.group(2) and not m.group(3)):
        raise ValueError(f"expected a size with a unit such as 5G, 500M, 2GiB or 300000B (0: "
                         f"no limit), found {text!r}")
    value = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if value <= 0:
        raise ValueError(f"expected a size above 0 bytes (0 alone: no limit), found {text!r}")
    return value


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``30d``, ``12h``, ``90m``, ``3600s``, ``2w``."""
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"expected a duration such as 30d, 12h, 90m, 3600s or 2w, found "
                         f"{text!r}")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()]


def human(n: int) -> str:
    """``1.5 GiB``, ``12.0 KiB``, ``300 bytes``."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{n:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


# ---------------------------------------------------------------- the limit
@dataclass(frozen=True)
class Limit:
    """The size limit in force and where it was set (``origin``: the variable, the
    config file, or ``none``)."""

    max_size: int | None
    origin: str


def config_path(root: Path) -> Path:
    return root / CONFIG_NAME


def _read_config(root: Path) -> tuple[int | None, int] | None:
    """The config file's max_size and its line number; None when it sets none. A line
    that cannot be read as ``key = value``, an unknown key, or a bad size is an error
    naming the file and line: a limit the user wrote is never ignored."""
    path = config_path(root)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no cache yet, or one that is a file
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise UkdError(Problem(str(path), "", f"cannot read it: {e}")) from None
    found: tuple[int | None, int] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, eq, value = (s.strip() for s in stripped.partition("="))
        if not eq or key != "max_size":
            what = f"unknown key {key!r}" if eq else f"{stripped!r}"
            raise UkdError(Problem(str(path), f"line {number}",
                                   f"expected 'max_size = SIZE' (the one setting), found {what}"))
        try:
            found = (parse_size(value), number)
        except ValueError as e:
            raise UkdError(Problem(str(path), f"line {number}", f"max_size: {e}")) from None
    return found


def limit(root: Path) -> Limit:
    """``$UKDPACK_CACHE_MAX_SIZE``, else the config file's ``max_size``, else none."""
    env = os.environ.get(MAX_SIZE_ENV, "").strip()
    if env:
        try:
            return Limit(parse_size(env), f"${MAX_SIZE_ENV}")
        except ValueError as e:
            raise UsageError(f"${MAX_SIZE_ENV}: {e}") from None
    found = _read_config(root)
    if found is None:
        return Limit(None, "none")
    return Limit(found[0], f"{config_path(root)}:{found[1]}")


def write_max_size(root: Path, max_size: int | None) -> Path:
    """Record the limit in the config file (``None``: no limit); the file's other
    comment lines are kept."""
    path = config_path(root)
    kept: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        kept = [ln for ln in path.read_text(encoding="utf-8").splitlines()
                if not ln.strip() or ln.strip().startswith("#")]
    if not kept:
        kept = ["# ukdpack compile cache settings (docs/packing.md); "
                "$UKDPACK_CACHE_MAX_SIZE overrides max_size"]
    value = "0" if max_size is None else f"{max_size}B"
    write_atomic(path, ("\n".join([*kept, f"max_size = {value}"]) + "\n").encode())
    return path


# ---------------------------------------------------------------- locks
def _open_lock(root: Path) -> int | None:
    """The lock file's descriptor; None where it cannot be made (a read-only cache: it
    takes no writes, and a pack reads what it can)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        return os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        try:
            return os.open(root / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None


def _try(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _acquire(fd: int, how: int, timeout: float, waiting: Callable[[], None]) -> bool:
    """Take the lock, saying once that it waits; False after ``timeout`` seconds."""
    if _try(fd, how):
        return True
    waiting()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if _try(fd, how):
            return True
    return False


@contextlib.contextmanager
def pack_lock(root: Path, timeout: float, say: Callable[[str], None]) -> Iterator[None]:
    """Held by a pack while it uses the cache: nothing is removed from it meanwhile."""
    fd = _open_lock(root)
    if fd is None:
        yield
        return
    try:
        if not _acquire(fd, fcntl.LOCK_SH, timeout, lambda: say(
                f"compile cache {root}: waiting for 'ukdpack cache' (prune, clear or "
                "eviction) to finish with it")):
            raise UkdError(f"compile cache {root}: still held by 'ukdpack cache' after "
                           f"{timeout:g} s (--lock-timeout); nothing was packed")
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def exclusive_lock(root: Path, timeout: float, say: Callable[[str], None]) -> Iterator[bool]:
    """Held while files are removed; yields False when packs still held the cache after
    ``timeout`` seconds (0: do not wait) and nothing may be removed."""
    fd = _open_lock(root)
    if fd is None:
        yield True  # no lock file can be made: nor can anything be removed by a pack
        return
    try:
        yield _acquire(fd, fcntl.LOCK_EX, timeout, lambda: say(
            f"compile cache {root}: waiting for the packs using it to finish"))
    finally:
        os.close(fd)


# ---------------------------------------------------------------- removal
@dataclass(frozen=True)
class Removed:
    """What one eviction, prune or clear removed."""

    objects: int
    bytes: int  # every file removed, records included
    left_bytes: int  # what the cache holds afterwards


@dataclass(frozen=True)
class _Object:
    sha: str
    path: Path
    used: float  # mtime: the last pack that hit or stored it
    size: int


def _objects(cache: CompileCache) -> list[_Object]:
    found: list[_Object] = []
    for path in (cache.folder / "objects").glob("*/*"):
        if path.name.startswith("."):
            continue  # a temporary file of a write in flight
        with contextlib.suppress(OSError):
            st = path.lstat()
            found.append(_Object(path.name, path, st.st_mtime, st.st_size))
    return found


def cache_bytes(root: Path) -> int:
    """Bytes of every file under the cache folder."""
    total = 0
    for base, _dirs, names in os.walk(root):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, n)).st_size
    return total


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _remove_objects(cache: CompileCache, doomed: list[_Object]) -> int:
    """Remove objects with their info records, then the manifest entries naming them
    (a manifest left empty goes); the bytes removed."""
    freed = 0
    gone: set[str] = set()
    for obj in doomed:
        info = cache.folder / "info" / obj.sha[:2] / f"{obj.sha}.json"
        for path in (obj.path, info):
            size = _size(path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                freed += size
        gone.add(obj.sha)
    if gone:
        freed += cache.forget_objects(gone)
    return freed


def evict(cache: CompileCache, max_size: int) -> Removed:
    """Remove the least recently used objects until the folder holds at most
    ``max_size`` bytes (or no object is left). Call it under the exclusive lock."""
    total = cache_bytes(cache.root)
    if total <= max_size:
        return Removed(0, 0, total)
    doomed: list[_Object] = []
    over = total - max_size
    for obj in sorted(_objects(cache), key=lambda o: (o.used, o.sha)):
        if over <= 0:
            break
        doomed.append(obj)
        info = cache.folder / "info" / obj.sha[:2] / f"{obj.sha}.json"
        over -= obj.size + _size(info)
    freed = _remove_objects(cache, doomed)
    return Removed(len(doomed), freed, cache_bytes(cache.root))


def prune(cache: CompileCache, older_than: float) -> Removed:
    """Remove the objects no pack used for ``older_than`` seconds. Under the exclusive lock."""
    cutoff = time.time() - older_than
    doomed = [o for o in _objects(cache) if o.used < cutoff]
    freed = _remove_objects(cache, doomed)
    return Removed(len(doomed), freed, cache_bytes(cache.root))


def clear(cache: CompileCache) -> Removed:
    """Remove every record ukdpack wrote (the ``v1`` folder); the config and lock files
    and anything else in the folder stay. Under the exclusive lock."""
    objects = len(_objects(cache))
    before = cache_bytes(cache.folder)
    if cache.folder.is_symlink():
        raise UkdError(f"{cache.folder}: a symbolic link, which ukdpack did not write; "
                       "nothing removed")
    if cache.folder.is_dir():
        shutil.rmtree(cache.folder)
    return Removed(objects, before, cache_bytes(cache.root))


def evict_after_pack(root: Path, say: Callable[[str], None]) -> Removed | None:
    """A pack's eviction: when a limit is set and the folder is over it, evict, unless
    another pack still uses the cache (the last one to finish evicts); never waits."""
    lim = limit(root)
    if lim.max_size is None or not (root / VERSION).is_dir():
        return None
    try:
        with exclusive_lock(root, 0.0, lambda _line: None) as held:
            if not held:
                return None
            removed = evict(CompileCache(root), lim.max_size)
    except OSError as e:  # the shards are published: a failed eviction costs only a line
        say(f"compile cache {root}: warning: eviction stopped: {e}")
        return None
    if removed.objects:
        say(f"compile cache {root}: evicted {count(removed.objects, 'least recently used object')}"
            f" ({human(removed.bytes)}) to stay within {human(lim.max_size)} ({lim.origin}); "
            f"it holds {human(removed.left_bytes)}")
    return removed
