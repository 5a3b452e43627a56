"""Reusing the previous shard's unchanged files when a shard is packed again.

A one-kernel edit changes one packed KDP file and its sidecar per arch; the other
files of the shard come out as they were. Two things let a repack skip their work:

* **Parts**: each pack (one KDP file with its sidecar and the standalone UKD files it
  names) has a key, the sha256 of everything its packed files are made from (the
  descriptors' authored JSON, the code objects' digests, toc keys, symbols and
  signatures, the compiler versions, the arch and archive name, and the packer's own
  code). A small record in the compile cache (``v1/shard-parts/``) maps each key to the
  sha256 of every file made from it. A record entry is a fact about the packer ("these
  inputs make files with these digests"), whichever shard it was written for.
* **The previous shard** holds those files. A part is taken from it only when every
  file of the part there has the recorded digest, read and hashed now: a shard edited,
  truncated or replaced by hand is never reused (its part is made anew). A file taken,
  or made anew with the very bytes the previous shard holds, is hard-linked into the
  staging folder rather than written: no write, and no fsync or block freeing for it
  when the previous shard is removed.

What is staged is byte for byte what a pack from scratch stages; the runtime check then
checks the staged shard as ever.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import stat
import sys
import tempfile
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ukdpack import _runtime
from ukdpack.authored.model import Ukd, plain

if TYPE_CHECKING:
    from ukdpack.produce.cache import FileDigests

#: Changes whenever what a part's key covers changes.
PARTS_FORMAT = "ukdpack-shard-parts-4"

#: The record's folder in the compile cache's version folder.
RECORD_FOLDER = "shard-parts"


#: ``code_identity``'s value, once made in this process
_identity: str | None = None
_identity_lock = threading.Lock()


def code_identity(digests: FileDigests | None = None) -> str:
    """sha256 of what turns a part's inputs into its bytes besides the inputs: the
    packer's Python source (every module of the package), its extension (the runtime's
    reading of the descriptors, the kernels' launches and toc keys), the interpreter (its
    ``json``) and zlib (the sidecars' gzip). Made once per process. With ``digests`` (the
    compile cache's, as a pack passes them) each file's sha256 is the one recorded for
    its unchanged stat, as for a compile's headers: a pack reads none of the 3.5 MB again
    (about 9 ms)."""
    global _identity
    with _identity_lock:
        if _identity is None:
            _identity = _code_identity(digests)
        return _identity


def forget_code_identity() -> None:
    """Make ``code_identity`` anew at its next call (tests that change the code)."""
    global _identity
    with _identity_lock:
        _identity = None


def _code_identity(digests: FileDigests | None) -> str:
    def file_sha256(path: str) -> bytes:
        known = digests.digest(path) if digests is not None else None
        if known is not None:
            return bytes.fromhex(known)
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).digest()

    h = hashlib.sha256()
    h.update(f"{PARTS_FORMAT}\0{sys.version}\0{zlib.ZLIB_RUNTIME_VERSION}\0".encode())
    package = Path(__file__).resolve().parents[1]
    for folder, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                h.update(os.path.relpath(path, package).encode() + b"\0")
                h.update(file_sha256(path))
    # Where it is loaded from: beside the modules, or a build folder's in a superbuild.
    h.update(b"_runtime\0" + file_sha256(str(_runtime.__file__)))
    return h.hexdigest()


def digest_value(doc: Any) -> str:
    """sha256 of a JSON-able value (key order kept: the packed form keeps it), by its
    pickle: one value, one byte string (types kept apart, as JSON keeps them), made
    about 7 times faster than its JSON text (the interpreter's version is in
    ``code_identity``). Without the pickler's memo the bytes follow the value alone, not
    which of its parts are one object."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.fast = True
    pickler.dump(doc)
    return hashlib.sha256(out.getbuffer()).hexdigest()


def raw_digest(ukd: Ukd) -> str:
    """What a part's key holds of a kernel's authored JSON: the sha256 of the bytes it was
    read from (the runtime's, taken as it read them), which determine ``raw``; else
    ``digest_value`` of ``raw`` itself. About a tenth of the Python's cost per kernel."""
    return "text:" + ukd.raw_sha256 if ukd.raw_sha256 else digest_value(plain(ukd.raw))


def part_key(inputs: Sequence[Any]) -> str:
    """The key of a part: ``code_identity`` and its JSON-able ``inputs``."""
    return digest_value([code_identity(), *inputs])


def record_path(cache_folder: Path, out_root: Path, group: str, arch: str) -> Path:
    """The record of the shard of ``arch`` and ``group`` in ``out_root``."""
    name = hashlib.sha256(f"{out_root}\0{group}\0{arch}".encode()).hexdigest()[:32]
    return cache_folder / RECORD_FOLDER / f"{name}.json"


Record = dict[str, list[tuple[str, str]]]  # part key -> [(shard-relative path, sha256)]


@dataclass(frozen=True)
class RecordFile:
    """A shard's record: its parts, and the sha256 of the shard index (``index.ukdx``)
    that the pack which made them confirmed and published (None: it had none)."""

    parts: Record
    index: str | None = None


def read_record(path: Path) -> RecordFile:
    """The record at ``path``; empty when there is none or it is not one (a miss, never a
    failure: every part is then made anew, every kernel read back)."""
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("format") != PARTS_FORMAT:
            return RecordFile({})
        index = doc.get("index")
        return RecordFile({str(k): [(str(rel), str(sha)) for rel, sha in v]
                           for k, v in doc["parts"].items()},
                          index if isinstance(index, str) else None)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return RecordFile({})


def write_record(path: Path, record: Mapping[str, Sequence[tuple[str, str]]],
                 index: bytes | None = None) -> None:
    """Replace the record at ``path`` (atomically; not fsynced: a lost record costs a
    repack its reuse, nothing else), with the sha256 of the shard's ``index`` (its
    bytes) when it has one. Failing to write it is no failure of the pack."""
    doc: dict[str, Any] = {"format": PARTS_FORMAT, "parts": record}
    if index is not None:
        doc["index"] = hashlib.sha256(index).hexdigest()
    data = json.dumps(doc, sort_keys=True).encode()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


class PreviousShard:
    """The shard being replaced, read only through content checks: a file of it is
    offered for reuse only when its bytes are the ones asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.present = root.is_dir() and not root.is_symlink()
        #: shard-relative path -> (dev, inode, size, mtime_ns) of a file whose bytes were
        #: checked: what a link made later must still be
        self._checked: dict[str, tuple[int, int, int, int]] = {}
        self._taken: dict[str, bytes] = {}  # what part() gave, by path
        self._regular: set[str] | None = None  # its files, links not followed (_files)

    def _files(self) -> set[str]:
        """The shard-relative paths of the previous shard's files, found without following
        a link: a file reached through a linked folder is never taken (a hard link to it
        would share its inode with a file outside the shard)."""
        if self._regular is None:
            self._regular = {os.path.relpath(os.path.join(folder, name), self.root)
                             for folder, _, names in os.walk(self.root) for name in names}
        return self._regular

    def _read(self, rel: str, size: int | None = None) -> bytes | None:
        """The bytes of the regular file at ``rel`` (no link followed), or None (absent,
        not a regular file, unreadable, or not ``size`` bytes long)."""
        if not self.present or rel not in self._files():
            return None
        try:
            # O_NONBLOCK: a FIFO in a file's place does not block the open.
            fd = os.open(self.root / rel,
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            # One name only: a file also linked elsewhere could change through that name.
            if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1
                    or (size is not None and st.st_size != size)):
                return None
            chunks = []
            while chunk := os.read(fd, max(st.st_size, 1 << 16)):
                chunks.append(chunk)
            data = b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) != st.st_size:
            return None
        self._checked[rel] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        return data

    def part(self, files: Sequence[tuple[str, str]]) -> dict[str, bytes] | None:
        """The files of a part, each by path, when the previous shard holds every one
        with its digest; else None."""
        out: dict[str, bytes] = {}
        for rel, sha in files:
            data = self._read(rel)
            if data is None or hashlib.sha256(data).hexdigest() != sha:
                return None
            out[rel] = data
        self._taken.update(out)
        return out

    def has(self, rel: str, sha: str) -> bool:
        """Whether the previous shard's file at ``rel`` has the sha256 ``sha``."""
        data = self._read(rel)
        return data is not None and hashlib.sha256(data).hexdigest() == sha

    def holds(self, rel: str, data: bytes) -> bool:
        """Whether the previous shard's file at ``rel`` holds exactly ``data``."""
        if self._taken.get(rel) is data:  # given by part(), checked then
            return True
        return self._read(rel, len(data)) == data

    def release(self) -> None:
        """Drop what was read (the bytes given by ``part``): the shard is staged."""
        self._taken.clear()
        self._checked.clear()

    def link_into(self, staging: Path, rel: str) -> bool:
        """Hard-link the checked file at ``rel`` into ``staging``; False (nothing left
        there) when it cannot be, or the file is no longer the one checked."""
        seen = self._checked.get(rel)
        if seen is None:
            return False
        dst = staging / rel
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.link(self.root / rel, dst, follow_symlinks=False)
        except OSError:
            return False
        try:
            st = os.lstat(dst)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == seen:
                return True
        except OSError:
            pass
        with contextlib.suppress(OSError):
            os.unlink(dst)
        return False


def stage_files(staging: Path, files: Mapping[str, bytes], previous: PreviousShard | None,
                write: Any) -> int:
    """Put every file of ``files`` into ``staging``: linked from the previous shard where
    it holds the same bytes, else written by ``write(staging, rel, data)``. Returns how
    many were linked."""
    linked = 0
    for rel, data in files.items():
        if previous is not None and previous.holds(rel, data) and previous.link_into(staging,
                                                                                     rel):
            linked += 1
        else:
            write(staging, rel, data)
    if previous is not None:
        previous.release()
    return linked


class Parts:
    """What one arch's assembly knows of reuse: the previous shard, the record of its
    parts, the record being made for the new shard, and digests shared by the arches."""

    def __init__(self, previous: PreviousShard, record: RecordFile,
                 raw_digests: dict[tuple[str, str], str]) -> None:
        self.previous = previous
        self.record = record.parts
        self.made: Record = {}
        #: each descriptor's ``digest_value(raw)`` by (file, JSON path), made once a pack
        self.raw_digests = raw_digests
        #: the sha256 of the previous shard's index, as the pack that made it confirmed it
        self.confirmed_index = record.index
        #: the KDP files of the parts taken from the previous shard as they were
        self.taken: set[str] = set()

    def previous_index(self) -> tuple[str, list[str]]:
        """(the previous shard, the KDP files taken from it) for ``shard_index_draft``:
        its index's records of those files need not be read back again when the index
        is the one the pack that made the taken parts confirmed (their keys hold this
        code's identity, and the record that index's sha256); ("", []) otherwise."""
        if not self.taken or self.confirmed_index is None or not self.previous.present:
            return "", []
        if not self.previous.has(_runtime.SHARD_INDEX_FILE, self.confirmed_index):
            return "", []
        return str(self.previous.root), sorted(self.taken)
