"""The content-addressed compile cache.

A compile is keyed in two steps, because the headers it reads are known only
after it ran: a *base key* (compiler identity, the command line without paths,
arch, the source's root-relative path and bytes) names a manifest listing, for
each earlier compile, the digest of every file it read and the object it
produced. A lookup that finds an entry whose files all still have those digests
is a hit. Objects are stored under their own sha256 and checked on every read:
a damaged entry is dropped and rebuilt, never packed.

Layout under the cache folder: ``v1/objects/<ab>/<sha256>``,
``v1/manifests/<ab>/<base key>.json``, ``v1/info/<ab>/<sha256>.json`` (what was
read from an object: kernels, target, signatures), ``v1/compilers/`` (each
compiler's fingerprint, compiler.identify), ``v1/file-digests.json`` (the digests
of files lookups read, by path and stat: FileDigests), ``v1/shard-parts/`` (the packer's
record of each published shard's parts: ukdpack.shard.reuse), ``v1/hits/`` (each command
line's last hits, read in place of their manifests: hits.py) and ``v1/early/`` (what the
next pack of a command line may compile before it is planned: early_compiles.py). Every
record but the early ones carries a digest binding it to its key: a record that fails it
is ignored and rewritten (an early one only starts compiles the packer checks before it
takes them). A manifest entry also records how to run its compile again (``rerun``: the
command line without paths, the source, its root, the compiler), which ``ukdpack cache
verify`` does.

The cache is an optimisation: a folder that cannot be written (read-only, a file, a
full disk, no permission) costs one warning line per pack, and the pack goes on
compiling without writing to it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ukdpack import scratch
from ukdpack.authored.kinds import of_producer
from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.errors import UkdError
from ukdpack.files import write_atomic
from ukdpack.produce import compiler, early_compiles, hits
from ukdpack.produce.limits import DEFAULT_JOB_TIMEOUT

VERSION = early_compiles.CACHE_LAYOUT


def default_cache_dir() -> Path:
    """``$UKDPACK_CACHE_DIR``, else ``$XDG_CACHE_HOME/ukdpack``, else ``~/.cache/ukdpack``."""
    return Path(early_compiles.default_cache_root())


#: A recorded digest is trusted only for a file last changed (mtime or ctime) at least
#: this long before the digest was taken: a same-size rewrite within the file system's
#: timestamp granularity leaves the stat unchanged (git's "racily clean" rule).
RACY_NS = 2_000_000_000

#: Entries the digest manifest keeps at most: this run's, then the most recent others.
MAX_RECORDED_FILES = 20_000


def _stamp(st: os.stat_result) -> hits.Stamp:
    """What must match for a digest to be reused: the stamp a remembered hit has too."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def trusted(recorded: hits.Stamp, taken_ns: int, now: hits.Stamp) -> bool:
    """Whether a digest taken at ``taken_ns`` of a file then stamped ``recorded`` still
    holds for the file stamped ``now``: every field equal, and the file last changed
    well before the digest was taken (else a rewrite within the timestamp granularity
    could hide behind the same stamp)."""
    return recorded == now and max(now[1], now[2]) <= taken_ns - RACY_NS


class FileDigests:
    """sha256 of files, each read once per run (keyed by path, size and mtime).

    With a ``manifest`` file, digests also outlive the run: a file whose size, mtime,
    ctime, inode and device are those recorded with its digest, and that had not
    changed for a while when it was taken (``trusted``), is not read again. The
    manifest is written atomically (``save``) and bound to its content by a digest; a
    damaged one is ignored and rewritten."""

    def __init__(self, manifest: Path | None = None) -> None:
        self._memo: dict[tuple[str, int, int], str] = {}
        self._latest: dict[str, str] = {}  # path -> the digest last taken this run
        self._lock = threading.Lock()
        self._manifest = manifest
        self._recorded: dict[str, list[Any]] | None = None  # loaded on first use
        self._taken: dict[str, list[Any]] = {}  # this run's: path -> [*stamp, taken, digest]

    def _known(self) -> dict[str, list[Any]]:
        """The manifest's entries (path -> [*stamp, taken_ns, digest]); none when it is
        missing, unreadable or fails its digest. Called with the lock held."""
        if self._recorded is None:
            self._recorded = {}
            doc = _read_json(self._manifest) if self._manifest is not None else None
            if isinstance(doc, dict):
                entries = doc.get("entries")
                if (isinstance(entries, dict)
                        and doc.get("digest") == _bound(_DIGESTS_KEY, entries)):
                    self._recorded = {p: e for p, e in entries.items() if _entry_ok(e)}
        return self._recorded

    def digest(self, path: str, *, recheck: bool = True) -> str | None:
        """``recheck=False`` (cache lookups) takes a digest already taken this run without
        a new ``stat``: every compile of a tree reads the same few hundred headers, so
        lookups would otherwise stat each of them once per object. Recording a compile
        rechecks, so an object is never bound to a file's earlier content."""
        if not recheck:
            with self._lock:
                seen = self._latest.get(path)
            if seen is not None:
                return seen
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (path, st.st_size, st.st_mtime_ns)
        now = _stamp(st)
        with self._lock:
            found = self._memo.get(key)
            if found is None:
                entry = self._known().get(path)
                if entry is not None and trusted(tuple(entry[:5]), entry[5], now):
                    found = entry[6]
                    self._memo[key] = found
                    self._taken[path] = entry
            if found is not None:
                self._latest[path] = found
        if found is not None:
            return found
        if not stat.S_ISREG(st.st_mode):
            return None  # a FIFO or a device is never opened: its read could never end
        taken = time.time_ns()
        try:
            with open(path, "rb", opener=_nonblocking) as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped meanwhile
                    return None
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None
        with self._lock:
            self._memo[key] = digest
            self._latest[path] = digest
            self._taken[path] = [*now, taken, digest]
        return digest

    def all_match(self, wanted: Mapping[str, str]) -> bool:
        """Whether every file has the digest given, as ``digest(path, recheck=False)``
        tells, asked in order up to the first that differs. A lookup checks a few hundred
        headers, most of them taken already this run: those are read under one lock."""
        with self._lock:
            # Every file's digest taken already this run, and each the one wanted: asked
            # of both dicts at once (in C), as the loop below would answer it.
            if wanted.items() <= self._latest.items():
                return True
            seen = [self._latest.get(path) for path in wanted]
        for (path, digest), known in zip(wanted.items(), seen, strict=True):
            if (known or self.digest(path, recheck=False)) != digest:
                return False
        return True

    def save(self, write: Callable[[Path, bytes], bool]) -> None:
        """Write the manifest through ``write`` (atomic) when this run took a digest it
        did not hold: this run's entries, then the others it held, newest first, at most
        MAX_RECORDED_FILES."""
        if self._manifest is None:
            return
        with self._lock:
            known = self._known()
            if all(known.get(p) == e for p, e in self._taken.items()):
                return
            others = sorted(((p, e) for p, e in known.items() if p not in self._taken),
                            key=lambda item: -int(item[1][5]))
            kept = dict(self._taken)
            for p, e in others[:max(0, MAX_RECORDED_FILES - len(kept))]:
                kept[p] = e
            doc = {"digest": _bound(_DIGESTS_KEY, kept), "entries": kept}
            if write(self._manifest, canonical_json(doc)):
                self._recorded = kept


_DIGESTS_KEY = "file-digests"


def _nonblocking(path: str, flags: int) -> int:
    """open()'s opener: a FIFO put in a file's place meanwhile does not block the open."""
    return os.open(path, flags | os.O_NONBLOCK)


def _entry_ok(entry: Any) -> bool:
    """A manifest entry of the expected shape: six integers and a sha256 hex."""
    return (isinstance(entry, list) and len(entry) == 7
            and all(isinstance(v, int) and not isinstance(v, bool) for v in entry[:6])
            and isinstance(entry[6], str) and len(entry[6]) == 64)


@dataclass(frozen=True)
class Hit:
    data: bytes
    deps: tuple[str, ...]  # absolute paths the cached compile read
    sha256: str = ""  # of ``data``: the object's name, checked as it was read


def _print_warning(line: str) -> None:
    # sys.stderr looked up now: a live progress bar swaps it for a proxy printing above it
    print(line, file=sys.stderr, flush=True)


class CompileCache:
    """The cache folder; safe to share between concurrent packs (every write is a
    rename of a complete file, and a lost manifest entry only costs a compile).

    The first write that fails (any OSError) makes ``warn`` say so once; nothing is
    written after it. Reads go on: every record read is checked, so what can still be
    read is as good as before."""

    def __init__(self, folder: Path, digests: FileDigests | None = None,
                 warn: Callable[[str], None] = _print_warning) -> None:
        self.root = folder
        self.folder = folder / VERSION
        self._folder = os.fspath(self.folder)  # records' paths are joined as strings
        self.digests = digests or FileDigests(self.folder / "file-digests.json")
        self._lock = threading.Lock()
        self._warn_lock = threading.Lock()  # apart: a write under _lock may fail and warn
        self._warn = warn
        self.unusable: str | None = None  # why writes stopped, once one failed
        #: the record of the pack's hits (hits.py), read in place of their manifests
        self.hits: hits.HitsRecord | None = None

    def _write(self, path: Path, data: bytes) -> bool:
        """Write a record; False (after the one warning) when the folder cannot take it."""
        if self.unusable is not None:
            return False
        try:
            write_atomic(path, data)
        except OSError as e:
            self._give_up(e)
            return False
        return True

    def _give_up(self, e: OSError) -> None:
        if self.root.exists() and not self.root.is_dir():
            why = "it is a file, not a folder"
        else:
            why = f"cannot write to it: {e.strerror or e}"
        with self._warn_lock:
            if self.unusable is not None:
                return
            self.unusable = why
        self._warn(f"ukdpack: warning: compile cache {self.root}: {why}; packing without it")

    def save_digests(self) -> None:
        """Record the file digests this run took, so the next pack need not read the
        unchanged files again (FileDigests.save). Quietly skipped where the folder
        cannot take it: the manifest only saves reading time, and a read-only warm cache
        is still a cache that works without a word."""
        if self.unusable is None:
            self.digests.save(self._write_quietly)

    @staticmethod
    def _write_quietly(path: Path, data: bytes) -> bool:
        try:
            write_atomic(path, data)
        except OSError:
            return False
        return True

    # ------------------------------------------------------------ objects
    def _record(self, kind: str, name: str, suffix: str = "") -> str:
        """The path of a record: ``<kind>/<first two of name>/<name><suffix>``, joined as a
        string (a hit reads three records, and pathlib's joins were a tenth of a lookup)."""
        return os.path.join(self._folder, kind, name[:2], name + suffix)

    def _object_path(self, sha: str) -> Path:
        return Path(self._record("objects", sha))

    def get_object(self, sha: str) -> bytes | None:
        """The object stored under ``sha``, or None when absent or damaged."""
        path = self._record("objects", sha)
        try:
            data = _read_bytes(path)
        except OSError:
            return None
        if sha256_hex(data) != sha:
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        _mark_used(path)
        return data

    def put_object(self, data: bytes) -> str | None:
        """Store an object; its sha256, or None when it could not be written."""
        sha = sha256_hex(data)
        path = self._object_path(sha)
        if path.is_file():
            _mark_used(path)
        elif not self._write(path, data):
            return None
        return sha

    # ------------------------------------------------------------ manifests
    def _manifest_path(self, base_key: str) -> Path:
        return Path(self._record("manifests", base_key, ".json"))

    def has_manifest(self, base_key: str) -> bool:
        """Whether a manifest file of ``base_key`` is there (no lookup can hit without
        one); its entries are not read."""
        return os.path.isfile(self._record("manifests", base_key, ".json"))

    def _manifest(self, base_key: str) -> list[dict[str, Any]]:
        """The manifest's entries; none when it is unreadable or fails its digest (an
        altered entry could name another valid object, which the object check can't see)."""
        return self._manifest_read(base_key)[0]

    def _manifest_read(self, base_key: str) -> tuple[list[dict[str, Any]], hits.Stamp | None, int]:
        """``_manifest``, the stamp of the file read and when it was read (ns)."""
        read_ns = time.time_ns()
        try:
            with open(self._record("manifests", base_key, ".json"), "rb") as f:
                seen = _stamp(os.fstat(f.fileno()))
                raw = f.read()
            doc = json.loads(raw)
        except (OSError, ValueError, RecursionError):
            return [], None, read_ns
        entries = doc.get("entries") if isinstance(doc, dict) else None
        if not isinstance(entries, list) or (doc.get("digest") != _bound_text(base_key, raw)
                                             and doc.get("digest") != _bound(base_key, entries)):
            return [], None, read_ns
        return [e for e in entries if isinstance(e, dict) and isinstance(e.get("deps"), dict)
                and isinstance(e.get("object"), str)], seen, read_ns

    def lookup(self, base_key: str, root: Path) -> Hit | None:
        """A cached compile whose every input still has its recorded digest: the newest
        entry of its manifest that has, as the pack before remembered it (hits.py) where
        the manifest is unchanged, else as read."""
        record = self.hits
        if record is not None:
            found = record.remembered(base_key)
            if found is not None:
                hit = self._remembered(base_key, root, found)
                if hit is not None:
                    record.keep(base_key, found)
                    return hit
        entries, seen, read_ns = self._manifest_read(base_key)
        for entry in reversed(entries):
            deps = _absolute(entry["deps"], root)
            if self.digests.all_match(deps):
                data = self.get_object(entry["object"])
                if data is not None:
                    if record is not None and seen is not None and entry is entries[-1]:
                        shared, own = hits.split(entry["deps"])
                        record.keep(base_key, hits.Remembered(seen, read_ns, entry["object"],
                                                              shared, own))
                    return Hit(data, tuple(deps), entry["object"])
        return None

    def _remembered(self, base_key: str, root: Path, found: hits.Remembered) -> Hit | None:
        """The hit the pack before had, where its manifest is the very file it read then
        (so the entry is still its newest) and every input and the object still check."""
        try:
            now = _stamp(os.stat(self._record("manifests", base_key, ".json")))
        except OSError:
            return None
        if not trusted(found.manifest, found.read_ns, now):
            return None
        own = _absolute(found.own, root)
        if not (self.digests.all_match(found.shared) and self.digests.all_match(own)):
            return None
        data = self.get_object(found.object)
        if data is None:
            return None
        return Hit(data, (*found.shared, *own), found.object)

    def forget_hits(self) -> None:
        """Remove every record of packs' hits (hits.py), as far as the folder allows."""
        folder = os.path.join(self._folder, hits.RECORD_FOLDER)
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))

    def save_hits(self) -> None:
        """Write the record of this run's hits (hits.py) when it differs from the one
        read; quietly skipped where the folder cannot take it, as the digests are."""
        if self.hits is not None and self.unusable is None:
            data = self.hits.body()
            if data is not None:
                self._write_quietly(self.hits.path, data)

    def recorded_deps(self, base_key: str, root: Path) -> list[str] | None:
        """The files (absolute) the newest recorded compile of ``base_key`` read, whatever
        their digests now; None when none is recorded (remote execution's input root)."""
        entries = self._manifest(base_key)
        return list(_absolute(entries[-1]["deps"], root)) if entries else None

    def portable_deps(self, root: Path, deps: Iterable[str]) -> dict[str, str] | None:
        """Each file's digest by its recorded (root-relative when under ``root``) path;
        None when one cannot be read."""
        recorded: dict[str, str] = {}
        for p in deps:
            d = self.digests.digest(p)
            if d is None:
                return None
            recorded[_portable(p, root)] = d
        return recorded

    def store(self, base_key: str, root: Path, deps: Iterable[str], data: bytes,
              rerun: Mapping[str, Any] | None = None) -> None:
        """Record a compile: the object, the digest of every file it read and (``rerun``)
        what running it again takes: ``kind``, ``argv`` (key_argv), ``source`` (relative
        to ``root``, recorded too), ``compiler`` (identity) and ``compiler_path``."""
        if self.unusable is not None:
            return
        recorded = self.portable_deps(root, deps)
        if recorded is None:
            return  # an input vanished meanwhile: not worth caching
        sha = self.put_object(data)
        if sha is None:
            return
        entry: dict[str, Any] = {"deps": recorded, "object": sha}
        if rerun is not None:
            entry["rerun"] = {**rerun, "root": str(root)}
        with self._lock:
            entries = [e for e in self._manifest(base_key) if e["deps"] != recorded]
            entries.append(entry)
            kept = entries[-8:]
            doc = {"digest": _bound(base_key, kept), "entries": kept}
            self._write(self._manifest_path(base_key), canonical_json(doc))

    # ------------------------------------------------------------ object info
    def _info_path(self, sha: str) -> Path:
        return Path(self._record("info", sha, ".json"))

    def get_info(self, sha: str) -> dict[str, Any] | None:
        """What was read from the object ``sha`` (bound to it by a digest), or None."""
        try:
            raw = _read_bytes(self._record("info", sha, ".json"))
            doc = json.loads(raw)
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict):
            return None
        digest = doc.get("digest")
        if digest != _info_text_digest(sha, raw) and digest != _info_digest(sha, doc["info"]):
            return None
        info: dict[str, Any] = doc["info"]
        return info

    def put_info(self, sha: str, info: Mapping[str, Any]) -> None:
        doc = {"digest": _info_digest(sha, info), "info": info}
        self._write(self._info_path(sha), canonical_json(doc))

    # ------------------------------------------------------------ compilers
    def compiler_record(self, key: str) -> Mapping[str, Any] | None:
        """The fingerprint recorded under ``key`` (compiler.identify), or None."""
        doc = _read_json(self.folder / "compilers" / f"{key}.json")
        if not isinstance(doc, dict):
            return None
        record = {k: doc.get(k) for k in ("version", "identity", "watched", "includes")}
        watched, includes = record["watched"], record["includes"]
        if not (isinstance(record["version"], str) and isinstance(record["identity"], str)
                and isinstance(watched, dict)
                and all(isinstance(v, list) for v in watched.values())
                and isinstance(includes, list) and all(isinstance(v, str) for v in includes)):
            return None
        # Bound by a digest: an altered identity would change every key and the provenance.
        if doc.get("digest") != _bound(key, record):
            return None
        return record

    def put_compiler_record(self, key: str, record: Mapping[str, Any]) -> None:
        self._write(self.folder / "compilers" / f"{key}.json",
                    canonical_json({"digest": _bound(key, record), **record}))

    # ------------------------------------------------------------ whole cache
    def forget_objects(self, gone: set[str]) -> int:
        """Drop the manifest entries naming an object of ``gone`` (removed by eviction or
        prune); a manifest left empty goes. The bytes this freed."""
        freed = 0
        for path in (self.folder / "manifests").glob("*/*.json"):
            key = path.name.removesuffix(".json")
            entries = self._manifest(key)
            kept = [e for e in entries if e["object"] not in gone]
            if len(kept) == len(entries):
                continue
            try:
                before = path.lstat().st_size
                if kept:
                    write_atomic(path, canonical_json({"digest": _bound(key, kept),
                                                       "entries": kept}))
                    freed += before - path.lstat().st_size
                else:
                    path.unlink()
                    freed += before
            except FileNotFoundError:
                continue
        return freed

    def entries(self) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Every manifest's (base key, entry); (base key, None) for a manifest that fails
        its digest (packs ignore it)."""
        for path in sorted((self.folder / "manifests").glob("*/*.json")):
            key = path.name.removesuffix(".json")
            found = self._manifest(key)
            if not found:
                yield key, None
            for entry in found:
                yield key, entry


def _read_bytes(path: str) -> bytes:
    """``Path(path).read_bytes()`` without making the Path."""
    with open(path, "rb") as f:
        return f.read()


def _mark_used(path: str | Path) -> None:
    """An object's mtime is when a pack last used it: eviction removes the least recently
    used first (cache_admin). A cache that cannot be written keeps the old time."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _info_digest(sha: str, info: Mapping[str, Any]) -> str:
    return sha256_hex(sha.encode() + b"\0" + canonical_json(info))


#: How an info record is written: canonical JSON of {"digest", "info"}, so the info's
#: canonical text is the bytes between this prefix (and a digest) and the last brace.
_INFO_HEAD = b'{"digest":"'
_INFO_BODY = b'","info":'


def _info_text_digest(sha: str, raw: bytes) -> str | None:
    """``_info_digest`` of a record's info taken over the text it was written with (no
    second encoding of every kernel's signature per cache hit); None when the file is not
    laid out as written (``_info_digest`` of the parsed info then decides)."""
    start = len(_INFO_HEAD) + 64
    if not (raw.startswith(_INFO_HEAD) and raw.startswith(_INFO_BODY, start)
            and raw.endswith(b"}")):
        return None
    return sha256_hex(sha.encode() + b"\0" + raw[start + len(_INFO_BODY):-1])


def _bound(key: str, content: Any) -> str:
    """The digest binding a record's content to the key it is stored under."""
    return sha256_hex(key.encode() + b"\0" + canonical_json(content))


#: How a manifest is written: canonical JSON of {"digest", "entries"}, so the entries'
#: canonical text is the bytes between this prefix (and a digest) and the last brace.
_MANIFEST_HEAD = b'{"digest":"'
_MANIFEST_ENTRIES = b'","entries":'


def _bound_text(key: str, raw: bytes) -> str | None:
    """``_bound`` of a manifest's entries taken over the text it was written with (no
    second encoding of a few hundred dependency digests per lookup); None when the file
    is not laid out as written (``_bound`` of the parsed entries then decides)."""
    start = len(_MANIFEST_HEAD) + 64
    if not (raw.startswith(_MANIFEST_HEAD) and raw.startswith(_MANIFEST_ENTRIES, start)
            and raw.endswith(b"}")):
        return None
    return sha256_hex(key.encode() + b"\0" + raw[start + len(_MANIFEST_ENTRIES):-1])


def _read_json(path: Path) -> Any:
    """A record as parsed, or None when it cannot be read or parsed (a record so deeply
    nested that the parser gives up included)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def _portable(path: str, root: Path) -> str:
    """Files under the root are recorded root-relative, so checkouts share entries."""
    if os.path.isabs(path) and root.is_absolute():  # the answer depends on nothing else
        return _portable_once(path, root)
    return _portable_once.__wrapped__(path, root)  # a relative one: from the working folder


@functools.lru_cache(maxsize=4096)
def _portable_once(path: str, root: Path) -> str:
    """``_portable`` of a path, made once per process for absolute ones: a pack's compiles
    read the same few hundred headers (``relpath`` is about 7 us a path)."""
    rel = os.path.relpath(path, root)
    return "root:" + rel.replace(os.sep, "/") if not rel.startswith("..") else path


def _absolute(deps: Mapping[str, str], root: Path) -> dict[str, str]:
    return {(_under(root, p[5:]) if p.startswith("root:") else p): d for p, d in deps.items()}


@functools.lru_cache(maxsize=4096)
def _under(root: Path, rel: str) -> str:
    """``rel`` under ``root``, as a path string: the manifests of a tree name the same
    few sources, each joined once."""
    return str(root / rel)


def base_key(parts: Mapping[str, Any]) -> str:
    """The first-step key of a compile (see the module docstring)."""
    return sha256_hex(canonical_json(parts))


# ---------------------------------------------------------------- stats and verify
@dataclass(frozen=True)
class Stats:
    """What a cache folder holds (``ukdpack cache stats``)."""

    entries: int  # compiles recorded (manifest entries)
    unrerunnable: int  # of them, recorded before entries told how to rerun them
    manifests: int
    broken_manifests: int  # failing their digest: packs ignore them
    objects: int
    object_bytes: int
    files: int
    bytes: int  # every file under the folder
    oldest: float | None  # mtime of the least and most recently used object (a pack's
    # last hit or store of it)
    newest: float | None


def stats(cache: CompileCache) -> Stats:
    """Count what ``cache`` holds; reads every manifest, stats every file."""
    entries = unrerunnable = broken = 0
    keys: set[str] = set()
    for key, entry in cache.entries():
        keys.add(key)
        if entry is None:
            broken += 1
            continue
        entries += 1
        unrerunnable += _rerun(entry) is None
    files = total = objects = object_bytes = 0
    times: list[float] = []
    objects_folder = cache.folder / "objects"
    for path in cache.root.rglob("*"):
        with contextlib.suppress(OSError):
            st = path.lstat()
            if not path.is_file():
                continue
            files += 1
            total += st.st_size
            if path.parent.parent == objects_folder and not path.name.startswith("."):
                objects += 1
                object_bytes += st.st_size
                times.append(st.st_mtime)
    return Stats(entries, unrerunnable, len(keys), broken, objects, object_bytes, files, total,
                 min(times, default=None), max(times, default=None))


#: "differs": damage or poisoning, or the compile failed; "skipped": with a note why.
State = Literal["same", "differs", "skipped"]


@dataclass(frozen=True)
class Verdict:
    """What recompiling one entry showed."""

    state: State
    line: str  # for "differs" an error, for "skipped" a note, for "same" a label


@dataclass(frozen=True)
class VerifyReport:
    """``ukdpack cache verify``: each sampled entry's verdict and what was left out."""

    verdicts: tuple[Verdict, ...]
    candidates: int  # entries that record how to rerun them
    unrerunnable: int  # entries recorded before that (skipped)
    broken_manifests: int

    def count(self, state: State) -> int:
        return sum(v.state == state for v in self.verdicts)

    @property
    def ok(self) -> bool:
        return self.count("differs") == 0


def verify(cache: CompileCache, sample: int | None = None, jobs: int = 1,
           compilers: Mapping[str, str | None] | None = None,
           timeout: float = DEFAULT_JOB_TIMEOUT) -> VerifyReport:
    """Recompile ``sample`` entries picked at random (all when None) and compare the bytes
    with the cached object. Builds are reproducible, so a difference means the entry is
    damaged or poisoned. Entries whose source, headers or compiler are not as they were
    are skipped: a pack would not use them either. The records of packs' hits (hits.py)
    go first: a record is checked against no compile, so the next pack reads the
    manifests this checks, and records its hits again."""
    cache.forget_hits()
    rerunnable: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    unrerunnable = broken = 0
    for key, entry in cache.entries():
        if entry is None:
            broken += 1
            continue
        rerun = _rerun(entry)
        if rerun is None:
            unrerunnable += 1
        else:
            rerunnable.append((key, entry, rerun))
    picked = rerunnable if sample is None or sample >= len(rerunnable) else \
        random.sample(rerunnable, sample)

    found: dict[tuple[str, str], compiler.Compiler | None] = {}
    lock = threading.Lock()

    def compiler_with(kind: str, identity: str, recorded: str) -> compiler.Compiler | None:
        """A compiler of this identity here: the one given, the recorded one, the default."""
        with lock:
            if (kind, identity) not in found:
                found[(kind, identity)] = None
                for explicit in dict.fromkeys([(compilers or {}).get(kind), recorded, None]):
                    if explicit is not None and not os.path.isfile(explicit):
                        continue
                    try:
                        comp = compiler.identify(kind, compiler.locate(kind, explicit), cache,
                                                 timeout)
                    except UkdError:  # not there, or it cannot tell its version: no match
                        continue
                    if comp.identity == identity:
                        found[(kind, identity)] = comp
                        break
            return found[(kind, identity)]

    def one(item: tuple[str, dict[str, Any], dict[str, Any]]) -> Verdict:
        key, entry, rerun = item
        root = Path(rerun["root"])
        source = root / rerun["source"]
        arch = next((a.split("=", 1)[1] for a in rerun["argv"]
                     if a.startswith(("--offload-arch=", "-arch="))), "?")
        where = f"entry {key[:16]} ({source}, {arch})"
        if not source.is_file():
            return Verdict("skipped", f"{where}: its source is no longer there; skipped")
        for path, digest in _absolute(entry["deps"], root).items():
            if cache.digests.digest(path) != digest:
                return Verdict("skipped", f"{where}: {path} changed since it was compiled (a "
                                          "pack would not use the entry); skipped")
        source_digest = cache.digests.digest(str(source))
        if base_key({"compiler": rerun["compiler"], "argv": rerun["argv"],
                     "source": rerun["source"], "source_sha256": source_digest}) != key:
            return Verdict("differs", f"{where}: its record does not match the key it is "
                                      "filed under: the manifest was rewritten")
        comp = compiler_with(rerun["kind"], rerun["compiler"], rerun["compiler_path"])
        if comp is None:
            return Verdict("skipped", f"{where}: compiled by a compiler (or environment) this "
                                      "one does not have; skipped")
        sha = entry["object"]
        try:
            cached = cache._object_path(sha).read_bytes()
        except OSError:
            return Verdict("skipped", f"{where}: its object {sha[:16]} is gone (a pack "
                                      "compiles it again); skipped")
        if sha256_hex(cached) != sha:
            return Verdict("differs", f"{where}: its object {sha[:16]} is damaged (its bytes "
                                      "are not the digest they are stored under)")
        with scratch.Folder(scratch.VERIFY) as tmp:
            out, dep = Path(tmp) / "out.o", Path(tmp) / "out.d"
            argv = compiler.rerun_argv(comp, rerun["argv"], source, out, dep, root)
            outcome = compiler.run_compile(argv, out, dep, source.parent, timeout)
        if not outcome.ok:
            first = outcome.message.splitlines()[0] if outcome.message else ""
            return Verdict("differs", f"{where}: compiling it again failed: {first}")
        if outcome.data != cached:
            return Verdict("differs", f"{where}: its object {sha[:16]} differs from what "
                                      f"compiling {rerun['source']} again gives "
                                      f"({sha256_hex(outcome.data)[:16]}): the entry is "
                                      "damaged or poisoned; remove the cache folder")
        return Verdict("same", where)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        verdicts = tuple(pool.map(one, picked))
    return VerifyReport(verdicts, len(rerunnable), unrerunnable, broken)


def _rerun(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """An entry's ``rerun`` record when it is whole (entries made before it was recorded
    have none)."""
    rerun = entry.get("rerun")
    if not isinstance(rerun, dict):
        return None
    strings = ("kind", "source", "root", "compiler", "compiler_path")
    if not all(isinstance(rerun.get(k), str) for k in strings) or rerun["kind"] not in (
            of_producer("compile")):
        return None
    argv = rerun.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    return rerun
