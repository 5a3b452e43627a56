"""The record of one pack's cache hits, read in place of their manifests.

A warm repack looks up every compile of its tree: it reads the compile's manifest (the
digests of the few hundred files the compile read, nearly the same headers for every
compile of a tree), parses it and checks every digest. The record keeps, for the last
pack of one command (source root, out root, group and arches), each hit it had: the
manifest's stamp as it was read, and its newest entry's object and files (those outside
the source root as one set shared by the hits). ``CompileCache.lookup``
takes a remembered hit only where the manifest is still that very file, unchanged for a
while before it was read (``cache.trusted``: a manifest is only ever replaced whole), so
the entry is still its newest and the answer is the one reading it would give. Every
file is still checked against this run's digests, and the object against its sha256.
Anything else reads the manifest.

The record sits in the compile cache (``v1/hits/``) and is bound to its content by a
digest, as the cache's other records are: a damaged one is ignored and rewritten. It
holds this run's hits alone, so it does not grow.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.files import read_regular

#: Changes whenever what a record holds changes (an older one is then ignored).
HITS_FORMAT = "ukdpack-hits-1"

#: The records' folder in the compile cache's version folder.
RECORD_FOLDER = "hits"

#: A file's (size, mtime_ns, ctime_ns, inode, device): what must match for a digest or a
#: remembered hit to be reused (``cache.trusted``).
Stamp = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Remembered:
    """One hit of the pack before: what ``lookup`` checks before it answers with it."""

    manifest: Stamp  # the manifest's stamp when it was read
    read_ns: int  # when it was read
    object: str  # the sha256 of the newest entry's object
    shared: Mapping[str, str]  # its files outside the source root (absolute) -> digest
    own: Mapping[str, str]  # its files under the source root ("root:" paths) -> digest


def record_path(cache_folder: Path, root: Path, out_root: Path, group: str,
                arches: Sequence[str]) -> Path:
    """The record of the packs of ``root`` into ``out_root`` for ``group`` and ``arches``:
    one a command line, so the per-arch packs of a build do not overwrite each other's."""
    name = hashlib.sha256("\0".join([str(root), str(out_root), group, *arches])
                          .encode()).hexdigest()[:32]
    return cache_folder / RECORD_FOLDER / f"{name}.json"


# A record is canonical JSON whose first keys are "digest" and "format": the digest is
# taken over the text after them (the record's name first), so reading it encodes nothing.
_DIGEST_AT = b'{"digest":"'


def _head(digest: str) -> bytes:
    return _DIGEST_AT + digest.encode("ascii", "replace") + b'","format":"' + \
        HITS_FORMAT.encode() + b'",'


def _text_digest(name: str, rest: bytes) -> str:
    """The digest of a record named ``name`` whose text after its head is ``rest``."""
    return sha256_hex(name.encode() + b"\0" + rest)


def _stamp_ok(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 6
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def _digests_ok(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


class HitsRecord:
    """The record at ``path``: read once (``remembered``), and this run's hits kept
    (``keep``) for ``body``. Safe to use from the pool's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._loaded = False
        self._before: dict[str, Remembered] = {}
        self._kept: dict[str, Remembered] = {}
        self._raw: bytes | None = None  # the record as read: not written again unchanged

    def _load(self) -> None:
        """Read the record (with the lock held); nothing when it is missing, or fails its
        format, its digest or its shape."""
        self._loaded = True
        try:
            raw = self._raw = read_regular(self.path)  # a FIFO in its place is not waited on
        except OSError:
            return
        digest = raw[len(_DIGEST_AT):len(_DIGEST_AT) + 64].decode("ascii", "replace")
        head = _head(digest)
        if not raw.startswith(head) or digest != _text_digest(self.path.name, raw[len(head):]):
            return
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            return
        sets, hits = doc.get("sets"), doc.get("hits")
        if not (isinstance(sets, list) and all(_digests_ok(s) for s in sets)
                and isinstance(hits, dict)):
            return
        for key, hit in hits.items():
            if not (isinstance(hit, list) and len(hit) == 4 and _stamp_ok(hit[0])
                    and isinstance(hit[1], str) and isinstance(hit[2], int)
                    and 0 <= hit[2] < len(sets) and _digests_ok(hit[3])):
                continue
            stamp = hit[0]
            self._before[key] = Remembered(tuple(stamp[:5]), stamp[5], hit[1],
                                           sets[hit[2]], hit[3])

    def remembered(self, base_key: str) -> Remembered | None:
        """The hit of ``base_key`` in the pack before, or None."""
        with self._lock:
            if not self._loaded:
                self._load()
            return self._before.get(base_key)

    def keep(self, base_key: str, hit: Remembered) -> None:
        """Record a hit of this run."""
        with self._lock:
            self._kept[base_key] = hit

    def body(self) -> bytes | None:
        """The record of this run's hits as it is written, or None when it would be the
        one read (nothing to write)."""
        with self._lock:
            kept = dict(sorted(self._kept.items()))
        # A tree's hits share one or two sets: each compared (in C) with those found so far.
        sets: list[Mapping[str, str]] = []
        hits: dict[str, list[Any]] = {}
        for key, hit in kept.items():
            at = next((i for i, s in enumerate(sets) if s is hit.shared or s == hit.shared),
                      len(sets))
            if at == len(sets):
                sets.append(hit.shared)
            hits[key] = [[*hit.manifest, hit.read_ns], hit.object, at, hit.own]
        text = canonical_json({"hits": hits, "sets": sets})
        data = _head(_text_digest(self.path.name, text[1:])) + text[1:]
        return None if data == self._raw else data


def split(deps: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """A manifest entry's files as (outside the source root, under it): the first shared
    by most compiles of a tree, the second their own."""
    shared: dict[str, str] = {}
    own: dict[str, str] = {}
    for path, digest in deps.items():
        (own if path.startswith("root:") else shared)[path] = digest
    return shared, own

