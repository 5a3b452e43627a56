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
import queue
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.produce.cache import FileDigests, _absolute, _bound, base_key
from ukdpack.produce.remote_store import (
    RemoteFault,
    Store,
    check_url,
    open_store,
    redact,
    scrub,
    secrets_of,
)

__all__ = ["RemoteFault", "Store", "check_url", "open_store", "redact"]

Mode = Literal["read", "read-write"]
MODES: tuple[Mode, ...] = ("read", "read-write")
DEFAULT_TIMEOUT = 3.0  # seconds per request: a slow server costs at most this, once
DEFAULT_MAX_OBJECT = 64 << 20  # bytes; larger objects are not uploaded
DEFAULT_UPLOAD_GRACE = 30.0  # seconds a pack waits for its uploads after publishing
KEPT_ENTRIES = 8  # entries per action key, newest last (as the local manifest)


@dataclass(frozen=True)
class RemoteConfig:
    """How to reach the remote tier and what a pack may do with it."""

    url: str
    mode: Mode = "read-write"
    timeout: float = DEFAULT_TIMEOUT
    max_object_bytes: int = DEFAULT_MAX_OBJECT
    upload_grace: float = DEFAULT_UPLOAD_GRACE


# ---------------------------------------------------------------- action entries
def checked_entries(key: str, doc: Any) -> list[dict[str, Any]] | None:
    """The entries of an action record, or None when it is damaged or filed under another
    key: the record must carry the digest binding it to ``key``, and every entry's
    compile must recompute to ``key`` (compiler, command line, source and its digest)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        return None
    entries = doc["entries"]
    if doc.get("digest") != _bound(key, entries):
        return None
    good: list[dict[str, Any]] = []
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("deps"), dict)
                and isinstance(e.get("object"), str) and isinstance(e.get("rerun"), dict)
                and all(isinstance(v, str) for v in e["deps"].values())):
            return None
        rerun = e["rerun"]
        source = rerun.get("source")
        if not isinstance(source, str) or base_key({
                "compiler": rerun.get("compiler"), "argv": rerun.get("argv"),
                "source": source, "source_sha256": e["deps"].get("root:" + source)}) != key:
            return None
        good.append(e)
    return good


def parse_entries(key: str, raw: bytes) -> list[dict[str, Any]] | None:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return checked_entries(key, doc)


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
                "uploads": self.uploads, "seconds_saved": round(self.seconds_saved, 3),
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
        self.where = redact(config.url)
        self._warn = warn
        self._lock = threading.Lock()
        self._store = store
        self._fault: str | None = None
        self._damage_told = False
        self._counts = {"local_hits": 0, "remote_hits": 0, "misses": 0, "bytes_down": 0,
                        "bytes_up": 0, "uploads": 0, "damaged": 0}
        self._saved = 0.0
        self._queue: queue.Queue[tuple[str, dict[str, Any], bytes] | None] = queue.Queue()
        self._uploader: threading.Thread | None = None
        self._left = 0

    # ------------------------------------------------------------ faults and counts
    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _off(self, why: str) -> None:
        with self._lock:
            if self._fault is not None:
                return
            self._fault = why
        self._warn(f"ukdpack: warning: remote compile cache {self.where}: {why}; not asking "
                   "it again in this pack (compiling what it would have given)")

    def _damaged(self, what: str) -> None:
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
                why = scrub(f"{type(e).__name__}: {e}", secrets_of(self.config.url))
        self._off(why)
        return None

    def local_hit(self) -> None:
        self._count("local_hits")

    def miss(self) -> None:
        self._count("misses")

    # ------------------------------------------------------------ lookups
    def lookup(self, key: str, root: Path, digests: FileDigests) -> RemoteHit | None:
        """The remote compile of ``key`` whose every input here has its recorded digest,
        its object checked against its sha256; None on a miss, damage or a fault."""
        store = self._server()
        if store is None:
            return None
        try:
            raw = store.get("ac", key)
            if raw is None:
                return None
            entries = parse_entries(key, raw)
            if entries is None:
                self._damaged(f"action entry ac/{key[:16]} is damaged or filed under "
                              "another key")
                return None
            for entry in reversed(entries):
                deps = _absolute(entry["deps"], root)
                if not all(digests.digest(p, recheck=False) == d for p, d in deps.items()):
                    continue
                sha = entry["object"]
                data = store.get("cas", sha)
                if data is None:
                    continue  # evicted: another entry, or a compile
                self._count("bytes_down", len(data))
                if sha256_hex(data) != sha:
                    self._damaged(f"object cas/{sha[:16]} is damaged (its bytes are not "
                                  "the sha256 it is stored under)")
                    continue
                seconds = entry.get("seconds")
                seconds = float(seconds) if isinstance(seconds, (int, float)) else 0.0
                with self._lock:
                    self._counts["remote_hits"] += 1
                    self._saved += max(0.0, seconds)
                return RemoteHit(data, tuple(deps), seconds)
        except RemoteFault as e:
            self._off(str(e))
        return None

    # ------------------------------------------------------------ uploads
    def upload(self, key: str, entry: Mapping[str, Any], data: bytes) -> None:
        """Queue a compile for upload (read-write mode; objects above the size cap are
        not uploaded). ``entry``: deps (portable), object, seconds, rerun."""
        if self.config.mode != "read-write" or self.off:
            return
        if len(data) > self.config.max_object_bytes:
            return
        with self._lock:
            if self._uploader is None:
                self._uploader = threading.Thread(target=self._upload_all, daemon=True,
                                                  name="ukdpack-remote-upload")
                self._uploader.start()
        self._queue.put((key, dict(entry), data))

    def _upload_all(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.off:
                continue
            key, entry, data = item
            store = self._server()
            if store is None:
                continue
            try:
                self._upload(store, key, entry, data)
            except RemoteFault as e:
                self._off(str(e))

    def _upload(self, store: Store, key: str, entry: dict[str, Any], data: bytes) -> None:
        sha = entry["object"]
        if not store.has("cas", sha):  # the object first: an entry never names a missing one
            store.put("cas", sha, data)
            self._count("bytes_up", len(data))
        raw = store.get("ac", key)
        entries = (parse_entries(key, raw) if raw is not None else None) or []
        entries = [e for e in entries if e["deps"] != entry["deps"]]
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
    for key in sorted(store.keys("ac")):
        raw = store.get("ac", key)
        if raw is not None:
            yield key, parse_entries(key, raw)


def server_stats(store: Store) -> ServerStats:
    keys = entries = broken = 0
    sizes: dict[str, int] = {}
    seconds = 0.0
    for _, found in _records(store):
        keys += 1
        if found is None:
            broken += 1
            continue
        for e in found:
            entries += 1
            size = e.get("size")
            sizes[e["object"]] = size if isinstance(size, int) else 0
            s = e.get("seconds")
            seconds += float(s) if isinstance(s, (int, float)) else 0.0
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
            data = store.get("cas", sha)
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
