"""The remote tier of the compile cache (docs/remote-cache.md).

Behind the local cache (cache.py), a server several machines share: a pack that
misses locally asks it before compiling, and (``read-write``) uploads what it compiled.
Two kinds of record, in the layout of ccache's and bazel-remote's HTTP stores:

* ``ac/<base key>``: the action entry, the local manifest's form: entries binding the
  full compile key (the base key: compiler fingerprint, command line without paths —
  flags, defines, arch —, the source's path and digest; and each entry's digest of every
  header the depfile named) to an object, with the seconds its compile took;
* ``cas/<sha256>``: the object's bytes.

Over HTTP(S) they are GET/PUT/HEAD under the URL; in Redis the keys ``ukdpack:ac:<key>``
and ``ukdpack:cas:<sha256>``. Nothing fetched is trusted: an entry must carry the digest
binding it to its key and recompute to that key, an object must hash to its name; what
fails is ignored (one warning per pack) and compiled here.

The server is an optimisation: the first fault (refused, a timeout, a 5xx, an answer
that makes no sense) costs one warning line and the tier is off for the rest of the pack.
Uploads run on a thread of their own; the pack waits for them after publishing, at most
``upload_grace`` seconds.
"""

from __future__ import annotations

import json
import math
import os
import queue
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.errors import escape_controls, has_controls
from ukdpack.produce.cache import FileDigests, _absolute, _bound, base_key
from ukdpack.produce.remote_store import (
    KEY,
    MAX_ENTRY_BYTES,
    Oversize,
    RemoteFault,
    Store,
    check_url,
    open_store,
)
from ukdpack.redact import redact, redact_url

__all__ = ["RemoteFault", "Store", "check_url", "open_store", "redact_url"]

Mode = Literal["read", "read-write"]
MODES: tuple[Mode, ...] = ("read", "read-write")
DEFAULT_TIMEOUT = 3.0  # seconds per request: a slow server costs at most this, once
DEFAULT_MAX_OBJECT = 64 << 20  # bytes; larger objects are not uploaded
DEFAULT_UPLOAD_GRACE = 30.0  # seconds a pack waits for its uploads after publishing
KEPT_ENTRIES = 8  # entries per action key, newest last (as the local manifest)
MAX_SECONDS = 1e9  # a recorded compile time beyond this is no compile time


@dataclass(frozen=True)
class RemoteConfig:
    """How to reach the remote tier and what a pack may do with it."""

    url: str
    mode: Mode = "read-write"
    timeout: float = DEFAULT_TIMEOUT
    max_object_bytes: int = DEFAULT_MAX_OBJECT
    upload_grace: float = DEFAULT_UPLOAD_GRACE


# ---------------------------------------------------------------- action entries
def _relative_ok(rel: str) -> bool:
    """A root-relative path as ukdpack writes it: no ``..``, ``.`` or empty part, not
    absolute, no control character."""
    return (bool(rel) and not has_controls(rel)
            and all(part not in ("", ".", "..") for part in rel.split("/")))


def _absolute_ok(path: str, toolchain: Sequence[str] | None) -> bool:
    """An absolute, normalised path inside one of the compiler's include folders (any such
    path when ``toolchain`` is None: stats and verify open no dependency)."""
    if has_controls(path) or not path.startswith("/") or path.startswith("//") or \
            os.path.normpath(path) != path:
        return False
    return toolchain is None or any(path.startswith(d + "/") for d in toolchain)


def _shown(name: str) -> str:
    """A name from the server, as a message may show it: redacted (before it is cut, so no
    part of a credential is left), escaped, at most 100 characters."""
    shown = escape_controls(redact(name))
    return shown if len(shown) <= 100 else shown[:100] + "..."


def _seconds_ok(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and (isinstance(value, int) or math.isfinite(value)) and 0 <= value <= MAX_SECONDS)


def entry_problem(e: Any, toolchain: Sequence[str] | None) -> str | None:
    """Why an entry from the server cannot be used, or None. Decided from the entry alone,
    before any local file is looked at: every dependency must be inside the source root
    (``root:<path>``) or inside one of the compiler's own include folders (``toolchain``);
    anything else (``root:../.env``, ``/home/me/.env``, ``/dev/zero``) would let a server
    learn the digest of a file here by which object the client fetches."""
    if not isinstance(e, dict):
        return "an entry is no JSON object"
    deps, rerun = e.get("deps"), e.get("rerun")
    if not (isinstance(deps, dict) and all(isinstance(d, str) and KEY.fullmatch(d)
                                           for d in deps.values())):
        return "its deps are not sha256 digests by file"
    if not (isinstance(e.get("object"), str) and KEY.fullmatch(e["object"])):
        return "its object is no sha256 in hex"
    size = e.get("size")
    if not (isinstance(size, int) and not isinstance(size, bool) and size > 0):
        return "its size is no byte count"
    if "seconds" in e and not _seconds_ok(e["seconds"]):
        return "its compile time is no finite number of seconds"
    if not (isinstance(rerun, dict) and isinstance(rerun.get("source"), str)
            and _relative_ok(rerun["source"])):
        return "its source is no path inside the source root"
    for path in deps:
        if not (_relative_ok(path[5:]) if path.startswith("root:") else
                _absolute_ok(path, toolchain)):
            return (f"it names {_shown(path)!r}, which is neither inside the source root "
                    "nor inside the compiler's include folders")
    return None


def checked_entries(key: str, doc: Any, toolchain: Sequence[str] | None = None
                    ) -> list[dict[str, Any]] | str:
    """The entries of an action record, or why it is refused: the record must carry the
    digest binding it to ``key``, every entry must pass ``entry_problem`` and its compile
    must recompute to ``key`` (compiler, command line, source and its digest)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        return "is damaged (not an action record)"
    entries = doc["entries"]
    if doc.get("digest") != _bound(key, entries):
        return "is damaged or filed under another key"
    for e in entries:
        why = entry_problem(e, toolchain)
        if why is not None:
            return f"is refused: {why}"
        rerun = e["rerun"]
        source = rerun["source"]
        if base_key({"compiler": rerun.get("compiler"), "argv": rerun.get("argv"),
                     "source": source, "source_sha256": e["deps"].get("root:" + source)}
                    ) != key:
            return "is damaged or filed under another key"
    good: list[dict[str, Any]] = entries
    return good


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number")


def parse_entries(key: str, raw: bytes, toolchain: Sequence[str] | None = None
                  ) -> list[dict[str, Any]] | str:
    """``checked_entries`` of a record's bytes (NaN and Infinity refused)."""
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return "is damaged (not JSON)"
    try:
        return checked_entries(key, doc, toolchain)
    except (ValueError, RecursionError):  # a lone surrogate or a depth its digest can't take
        return "is damaged (no canonical JSON form)"


def _special_file(deps: Mapping[str, str]) -> str | None:
    """A dependency that exists but is no regular file (a FIFO, a device, a folder):
    looked at with ``stat`` only, never opened."""
    for path in deps:
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(mode):
            return path
    return None


def action_record(key: str, entries: list[dict[str, Any]]) -> bytes:
    return canonical_json({"digest": _bound(key, entries), "entries": entries})


# ---------------------------------------------------------------- the tier of a pack
@dataclass(frozen=True)
class RemoteHit:
    data: bytes
    deps: tuple[str, ...]  # absolute paths the compile read
    seconds: float  # what the compile took where it ran


@dataclass(frozen=True)
class RemoteStats:
    """One pack's use of the cache tiers (the summary line and ``pack --json``)."""

    url: str  # redacted
    mode: Mode
    local_hits: int
    remote_hits: int
    misses: int
    bytes_down: int
    bytes_up: int
    uploads: int
    seconds_saved: float
    damaged: int
    fault: str | None  # why the tier went off, if it did
    uploads_left: int  # still queued when the grace ran out

    def line(self) -> str:
        """The pack's one summary line."""
        text = (f"remote cache {self.url} ({self.mode}): {self.local_hits} local hits, "
                f"{self.remote_hits} remote hits, {self.misses} misses; "
                f"{_size(self.bytes_down)} down, {_size(self.bytes_up)} up "
                f"({self.uploads} uploads); {self.seconds_saved:.1f} s of compiles saved")
        if self.damaged:
            text += f"; {self.damaged} damaged records ignored"
        if self.uploads_left:
            text += f"; {self.uploads_left} uploads left undone"
        if self.fault:
            text += "; off after a fault"
        return text

    def doc(self) -> dict[str, Any]:
        return {"url": self.url, "mode": self.mode, "local_hits": self.local_hits,
                "remote_hits": self.remote_hits, "misses": self.misses,
                "bytes_down": self.bytes_down, "bytes_up": self.bytes_up,
                "uploads": self.uploads,
                "seconds_saved": round(self.seconds_saved, 3)
                if math.isfinite(self.seconds_saved) else None,
                "damaged": self.damaged, "fault": self.fault,
                "uploads_left": self.uploads_left}


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _print_warning(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # looked up now: progress may proxy stderr


class RemoteTier:
    """The remote tier for one pack: lookups from the producer's threads, uploads on a
    thread of its own, counters for the summary. Never raises for the server's faults."""

    def __init__(self, config: RemoteConfig, store: Store | None = None,
                 warn: Callable[[str], None] = _print_warning) -> None:
        self.config = config
        self.where = redact_url(config.url)
        self._warn = warn
        self._lock = threading.Lock()
        self._store = store
        self._fault: str | None = None
        self._damage_told = False
        self._counts = {"local_hits": 0, "remote_hits": 0, "misses": 0, "bytes_down": 0,
                        "bytes_up": 0, "uploads": 0, "damaged": 0}
        self._saved = 0.0
        self._queue: queue.Queue[tuple[str, dict[str, Any], bytes, tuple[str, ...]] | None] \
            = queue.Queue()
        self._uploader: threading.Thread | None = None
        self._left = 0

    # ------------------------------------------------------------ faults and counts
    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _off(self, why: str) -> None:
        why = escape_controls(redact(why))
        with self._lock:
            if self._fault is not None:
                return
            self._fault = why
        self._warn(f"ukdpack: warning: remote compile cache {self.where}: {why}; not asking "
                   "it again in this pack (compiling what it would have given)")

    def _damaged(self, what: str) -> None:
        what = escape_controls(redact(what))
        with self._lock:
            self._counts["damaged"] += 1
            if self._damage_told:
                return
            self._damage_told = True
        self._warn(f"ukdpack: warning: remote compile cache {self.where}: {what}; ignored, "
                   "compiled here (further damaged records are counted in the summary)")

    @property
    def off(self) -> bool:
        return self._fault is not None

    def _server(self) -> Store | None:
        """The store, its client made at first use; None once the tier is off."""
        with self._lock:
            if self._fault is not None or self._store is not None:
                return self._store if self._fault is None else None
            try:
                self._store = open_store(self.config.url, self.config.timeout)
                return self._store
            except Exception as e:  # a client refusing its options (a bad db number, ...)
                why = str(e) if isinstance(e, RemoteFault) else f"{type(e).__name__}: {e}"
        self._off(why)
        return None

    def local_hit(self) -> None:
        self._count("local_hits")

    def miss(self) -> None:
        self._count("misses")

    # ------------------------------------------------------------ lookups
    def lookup(self, key: str, root: Path, digests: FileDigests,
               toolchain: Sequence[str] = ()) -> RemoteHit | None:
        """The remote compile of ``key`` whose every input here has its recorded digest,
        its object checked against its sha256; None on a miss, damage or a fault. An
        entry naming a file outside ``root`` and the compiler's include folders
        (``toolchain``), or a file that is not a regular file, is refused before any file
        is opened (entry_problem)."""
        store = self._server()
        if store is None:
            return None
        try:
            try:
                raw = store.get("ac", key, MAX_ENTRY_BYTES)
            except Oversize:
                raw = b""
            if raw is None:
                return None
            entries = parse_entries(key, raw, toolchain)
            if isinstance(entries, str):
                self._damaged(f"action entry ac/{key[:16]} {entries}")
                return None
            for entry in reversed(entries):
                deps = _absolute(entry["deps"], root)
                special = _special_file(deps)
                if special is not None:
                    self._damaged(f"action entry ac/{key[:16]} is refused: it names "
                                  f"{_shown(special)!r}, which is not a regular file")
                    return None
                if not digests.all_match(deps):
                    continue
                sha, size = entry["object"], entry["size"]
                if size > self.config.max_object_bytes:
                    continue  # larger than this client fetches: a compile
                try:
                    data = store.get("cas", sha, size)
                except Oversize:
                    data = b""
                if data is None:
                    continue  # evicted: another entry, or a compile
                self._count("bytes_down", len(data))
                if sha256_hex(data) != sha:
                    self._damaged(f"object cas/{sha[:16]} is damaged (its bytes are not "
                                  "the sha256 it is stored under)")
                    continue
                seconds = float(entry.get("seconds", 0.0))
                with self._lock:
                    self._counts["remote_hits"] += 1
                    self._saved += seconds
                return RemoteHit(data, tuple(deps), seconds)
        except RemoteFault as e:
            self._off(str(e))
        return None

    # ------------------------------------------------------------ uploads
    def upload(self, key: str, entry: Mapping[str, Any], data: bytes,
               toolchain: Sequence[str] = ()) -> None:
        """Queue a compile for upload (read-write mode; objects above the size cap are
        not uploaded, nor compiles that read a file outside the source root and the
        compiler's include folders: every reader would refuse the entry). ``entry``: deps
        (portable), object, size, seconds, rerun."""
        if self.config.mode != "read-write" or self.off:
            return
        if len(data) > self.config.max_object_bytes or entry_problem(entry, toolchain):
            return
        with self._lock:
            if self._uploader is None:
                self._uploader = threading.Thread(target=self._upload_all, daemon=True,
                                                  name="ukdpack-remote-upload")
                self._uploader.start()
        self._queue.put((key, dict(entry), data, tuple(toolchain)))

    def _upload_all(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.off:
                continue
            key, entry, data, toolchain = item
            store = self._server()
            if store is None:
                continue
            try:
                self._upload(store, key, entry, data, toolchain)
            except RemoteFault as e:
                self._off(str(e))

    def _upload(self, store: Store, key: str, entry: dict[str, Any], data: bytes,
                toolchain: Sequence[str]) -> None:
        sha = entry["object"]
        if not store.has("cas", sha):  # the object first: an entry never names a missing one
            store.put("cas", sha, data)
            self._count("bytes_up", len(data))
        try:
            raw = store.get("ac", key, MAX_ENTRY_BYTES)
        except Oversize:
            raw = None
        # The entries there are kept only when this client would use them: one it refuses
        # (a hostile or damaged record) is replaced, not carried along.
        found = parse_entries(key, raw, toolchain) if raw is not None else []
        entries = [e for e in (found if isinstance(found, list) else [])
                   if e["deps"] != entry["deps"]]
        entries.append(entry)
        record = action_record(key, entries[-KEPT_ENTRIES:])
        store.put("ac", key, record)
        self._count("bytes_up", len(record))
        self._count("uploads")

    def finish(self) -> RemoteStats:
        """Wait for the uploads (at most ``upload_grace`` seconds: the shards are
        published by now) and close; the pack's stats."""
        with self._lock:
            uploader = self._uploader
        if uploader is not None:
            self._queue.put(None)
            uploader.join(self.config.upload_grace)
            if uploader.is_alive():
                self._left = self._queue.qsize()
                self._off(f"uploads still running after {self.config.upload_grace:g} s")
        with self._lock:
            store = self._store
        if store is not None and (uploader is None or not uploader.is_alive()):
            store.close()
        c = self._counts
        return RemoteStats(self.where, self.config.mode, c["local_hits"], c["remote_hits"],
                           c["misses"], c["bytes_down"], c["bytes_up"], c["uploads"],
                           self._saved, c["damaged"], self._fault, self._left)


# ---------------------------------------------------------------- stats and verify
@dataclass(frozen=True)
class ServerStats:
    """What the server holds under the URL (``ukdpack cache stats --remote-cache``)."""

    keys: int  # action keys
    entries: int
    broken: int  # action records that fail their digest or key
    objects: int  # distinct objects the entries name
    object_bytes: int  # their recorded sizes
    compile_seconds: float  # recorded compile time of every entry


def _records(store: Store) -> Iterator[tuple[str, list[dict[str, Any]] | None]]:
    """Each listed action key and its entries (None when refused); names that are no key
    never reach here (Store.keys)."""
    for key in sorted(store.keys("ac")):
        try:
            raw = store.get("ac", key, MAX_ENTRY_BYTES)
        except Oversize:
            raw = b""
        if raw is not None:
            found = parse_entries(key, raw)
            yield key, found if isinstance(found, list) else None


def server_stats(store: Store) -> ServerStats:
    keys = entries = broken = 0
    sizes: dict[str, int] = {}
    seconds = 0.0
    for _, found in _records(store):
        keys += 1
        if found is None:
            broken += 1
            continue
        for e in found:  # checked: sizes are counts, seconds finite
            entries += 1
            sizes[e["object"]] = e["size"]
            seconds += float(e.get("seconds", 0.0))
    return ServerStats(keys, entries, broken, len(sizes), sum(sizes.values()), seconds)


@dataclass(frozen=True)
class ServerVerdict:
    """``ok``; ``damaged`` (a pack ignores it); ``missing`` (evicted: a pack compiles)."""

    state: Literal["ok", "damaged", "missing"]
    line: str


def server_verify(store: Store) -> list[ServerVerdict]:
    """Every action record checked (digest, key) and every object it names fetched and
    hashed; a verdict per record and object, errors for what a pack would ignore."""
    verdicts: list[ServerVerdict] = []
    checked: set[str] = set()
    for key, found in _records(store):
        if found is None:
            verdicts.append(ServerVerdict("damaged", f"action entry ac/{key[:16]} is damaged "
                                                 "or filed under another key"))
            continue
        verdicts.append(ServerVerdict("ok", f"ac/{key[:16]}"))
        for e in found:
            sha = e["object"]
            if sha in checked:
                continue
            checked.add(sha)
            try:
                data = store.get("cas", sha, e["size"])
            except Oversize:
                data = b""
            if data is None:
                verdicts.append(ServerVerdict("missing", f"object cas/{sha[:16]} (of ac/"
                                                     f"{key[:16]}) is missing"))
            elif sha256_hex(data) != sha:
                verdicts.append(ServerVerdict("damaged", f"object cas/{sha[:16]} is damaged (its "
                                                     "bytes are not the sha256 it is stored "
                                                     "under)"))
            else:
                verdicts.append(ServerVerdict("ok", f"cas/{sha[:16]}"))
    return verdicts
