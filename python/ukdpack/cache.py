"""The content-addressed compile cache (SPEC 5).

A compile is keyed in two steps, because the headers it reads are known only
after it ran: a *base key* (compiler identity, the command line without paths,
arch, the source's root-relative path and bytes) names a manifest listing, for
each earlier compile, the digest of every file it read and the object it
produced. A lookup that finds an entry whose files all still have those digests
is a hit. Objects are stored under their own sha256 and checked on every read:
a damaged entry is dropped and rebuilt, never packed.

Layout under the cache folder: ``v1/objects/<ab>/<sha256>``,
``v1/manifests/<ab>/<base key>.json``, ``v1/info/<ab>/<sha256>.json`` (what was
read from an object: kernels, target, signatures) and ``v1/compilers/`` (each
compiler's version text). Every record carries a digest binding it to its key: a
record that fails it is ignored and rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack.digest import canonical_json, sha256_hex

VERSION = "v1"


def default_cache_dir() -> Path:
    """``$UKDPACK_CACHE_DIR``, else ``$XDG_CACHE_HOME/ukdpack``, else ``~/.cache/ukdpack``."""
    if os.environ.get("UKDPACK_CACHE_DIR"):
        return Path(os.environ["UKDPACK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ukdpack"


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder, then rename over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileDigests:
    """sha256 of files, each read once per run (keyed by path, size and mtime)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int, int], str] = {}
        self._latest: dict[str, str] = {}  # path -> the digest last taken this run
        self._lock = threading.Lock()

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
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._latest[path] = found
        if found is not None:
            return found
        try:
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None
        with self._lock:
            self._memo[key] = digest
            self._latest[path] = digest
        return digest


@dataclass(frozen=True)
class Hit:
    data: bytes
    deps: tuple[str, ...]  # absolute paths the cached compile read


class CompileCache:
    """The cache folder; safe to share between concurrent packs (every write is a
    rename of a complete file, and a lost manifest entry only costs a compile)."""

    def __init__(self, folder: Path, digests: FileDigests | None = None) -> None:
        self.folder = folder / VERSION
        self.digests = digests or FileDigests()
        self._lock = threading.Lock()

    # ------------------------------------------------------------ objects
    def _object_path(self, sha: str) -> Path:
        return self.folder / "objects" / sha[:2] / sha

    def get_object(self, sha: str) -> bytes | None:
        """The object stored under ``sha``, or None when absent or damaged."""
        path = self._object_path(sha)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if sha256_hex(data) != sha:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return data

    def put_object(self, data: bytes) -> str:
        sha = sha256_hex(data)
        path = self._object_path(sha)
        if not path.is_file():
            write_atomic(path, data)
        return sha

    # ------------------------------------------------------------ manifests
    def _manifest_path(self, base_key: str) -> Path:
        return self.folder / "manifests" / base_key[:2] / f"{base_key}.json"

    def _manifest(self, base_key: str) -> list[dict[str, Any]]:
        """The manifest's entries; none when it is unreadable or fails its digest (an
        altered entry could name another valid object, which the object check can't see)."""
        try:
            doc = json.loads(self._manifest_path(base_key).read_bytes())
        except (OSError, ValueError):
            return []
        entries = doc.get("entries") if isinstance(doc, dict) else None
        if not isinstance(entries, list) or doc.get("digest") != _bound(base_key, entries):
            return []
        return [e for e in entries if isinstance(e, dict)
                and isinstance(e.get("deps"), dict) and isinstance(e.get("object"), str)]

    def lookup(self, base_key: str, root: Path) -> Hit | None:
        """A cached compile whose every input still has its recorded digest."""
        for entry in reversed(self._manifest(base_key)):
            deps = _absolute(entry["deps"], root)
            if all(self.digests.digest(p, recheck=False) == d for p, d in deps.items()):
                data = self.get_object(entry["object"])
                if data is not None:
                    return Hit(data, tuple(deps))
        return None

    def store(self, base_key: str, root: Path, deps: Iterable[str], data: bytes) -> None:
        """Record a compile: the object and the digest of every file it read."""
        recorded: dict[str, str] = {}
        for p in deps:
            d = self.digests.digest(p)
            if d is None:
                return  # an input vanished meanwhile: not worth caching
            recorded[_portable(p, root)] = d
        sha = self.put_object(data)
        with self._lock:
            entries = [e for e in self._manifest(base_key) if e["deps"] != recorded]
            entries.append({"deps": recorded, "object": sha})
            kept = entries[-8:]
            doc = {"digest": _bound(base_key, kept), "entries": kept}
            write_atomic(self._manifest_path(base_key), canonical_json(doc))

    # ------------------------------------------------------------ object info
    def _info_path(self, sha: str) -> Path:
        return self.folder / "info" / sha[:2] / f"{sha}.json"

    def get_info(self, sha: str) -> dict[str, Any] | None:
        """What was read from the object ``sha`` (bound to it by a digest), or None."""
        try:
            doc = json.loads(self._info_path(sha).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict):
            return None
        if doc.get("digest") != _info_digest(sha, doc["info"]):
            return None
        info: dict[str, Any] = doc["info"]
        return info

    def put_info(self, sha: str, info: Mapping[str, Any]) -> None:
        doc = {"digest": _info_digest(sha, info), "info": info}
        write_atomic(self._info_path(sha), canonical_json(doc))

    # ------------------------------------------------------------ compilers
    def compiler_version(self, path: str) -> str | None:
        """The version text recorded for the compiler file at ``path``, as it is now."""
        key = _stat_key(path)
        if key is None:
            return None
        try:
            doc = json.loads((self.folder / "compilers" / f"{key}.json").read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), str):
            return None
        # Bound by a digest: an altered version would change every key and the provenance.
        record = {"path": doc.get("path"), "version": doc["version"]}
        if doc.get("digest") != _bound(key, record):
            return None
        version: str = doc["version"]
        return version

    def put_compiler_version(self, path: str, version: str) -> None:
        key = _stat_key(path)
        if key is not None:
            record = {"path": path, "version": version}
            write_atomic(self.folder / "compilers" / f"{key}.json",
                         canonical_json({"digest": _bound(key, record), **record}))


def _info_digest(sha: str, info: Mapping[str, Any]) -> str:
    return sha256_hex(sha.encode() + b"\0" + canonical_json(info))


def _bound(key: str, content: Any) -> str:
    """The digest binding a record's content to the key it is stored under."""
    return sha256_hex(key.encode() + b"\0" + canonical_json(content))


def _stat_key(path: str) -> str | None:
    """The compiler file's path, size and mtime stand for its version between runs."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return sha256_hex(f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}".encode())


def _portable(path: str, root: Path) -> str:
    """Files under the root are recorded root-relative, so checkouts share entries."""
    rel = os.path.relpath(path, root)
    return "root:" + rel.replace(os.sep, "/") if not rel.startswith("..") else path


def _absolute(deps: Mapping[str, str], root: Path) -> dict[str, str]:
    return {(str(root / p[5:]) if p.startswith("root:") else p): d for p, d in deps.items()}


def base_key(parts: Mapping[str, Any]) -> str:
    """The first-step key of a compile (see the module docstring)."""
    return sha256_hex(canonical_json(parts))
