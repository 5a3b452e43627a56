"""kpack archives (KPAK version 1, docs/shards.md): the writer.

Byte-compatible with ROCm's rocm-kpack: a 16-byte header (``KPAK``, u32 version,
u64 TOC offset), zero padding to 64 where the data starts, then one msgpack TOC
map written last and running to the end of the file. The package reads archives
with the C++ runtime's reader only (``_runtime.KpackArchive``), so what a tool finds
in an archive is what the runtime would; the tests keep an independent Python reader
(tests/python/kpack_oracle.py).
"""

from __future__ import annotations

import os
import re
import struct
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgpack  # type: ignore[import-untyped]
import zstandard

from ukdpack import _runtime
from ukdpack.errors import UkdError
from ukdpack.files import (
    FileRange,
    fsync_dir,
    link_unnamed,
    pwrite_all,
    read_range,
    write_atomic,
)

# The layout facts the producers' spool shares (a base module: see ukdpack.spool).
from ukdpack.spool import DATA_OFFSET, DEFAULT_LEVEL, RECORDS_OFFSET, SpooledRecord

MAGIC = b"KPAK"
FORMAT_VERSION = 1
HEADER_SIZE = 16
SCHEMES = ("zstd-per-kernel", "none")
ENTRY_TYPES = ("hsaco", "cubin")
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<4sIQ")

Scheme = Literal["zstd-per-kernel", "none"]


class ArchiveError(UkdError):
    """A kpack archive that cannot be written as asked; the message says why."""

    code = _runtime.Code.ARCHIVE


#: A group names the archive file ``kpack/<group>_<arch>.kpack``, so it is one plain file
#: name: letters, digits and ``_ . + -`` (a CMake target name's characters), starting
#: with a letter or digit (nothing hidden, no option-like ``-``), no ``..``, no separator,
#: and short enough that the whole file name fits every file system's 255 bytes.
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")


def group_problem(group: str) -> str | None:
    """Why ``group`` cannot name an archive file, or None."""
    if GROUP_NAME.fullmatch(group) and ".." not in group:
        return None
    return (f"expected an archive group name of at most 128 letters, digits and '_.+-', "
            f"starting with a letter or digit and holding no '..' (it names the file "
            f"kpack/<group>_<arch>.kpack), found {group!r}")


def archive_name(group: str, arch: str) -> str:
    """The file name of a group's archive for one arch: ``<group>_<arch>.kpack``."""
    why = group_problem(group)
    if why is not None:  # pack checks --group before anything is written; this is a guard
        raise ArchiveError(f"group: {why}")
    return f"{group}_{arch}.kpack"


# zstandard's compressor objects are not thread-safe; one per thread and level.
_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return comp


def compress_frame(data: bytes, level: int = DEFAULT_LEVEL) -> bytes:
    """One independent zstd frame of ``data``: content size in the header, no dictionary.

    Safe to call from several threads at once (zstandard releases the GIL while it works).
    """
    return _compressor(level).compress(data)


# ---------------------------------------------------------------------------
# Writer


@dataclass
class _Pending:
    toc_key: str
    arch: str
    entry_type: str
    size: int
    metadata: Mapping[str, Any] | None
    payload: bytes | SpooledRecord  # the frame (zstd), its spooled record, or the data (none)


class ArchiveWriter:
    """Collects entries in memory and writes one archive atomically."""

    def __init__(self, group: str, arches: Sequence[str],
                 compression: Scheme = "zstd-per-kernel", level: int = DEFAULT_LEVEL,
                 family: str | None = None) -> None:
        if compression not in SCHEMES:
            raise ArchiveError(
                f"unknown compression scheme {compression!r}; expected one of {', '.join(SCHEMES)}")
        if isinstance(arches, str):
            raise ArchiveError("arches must be a sequence of arch names, not one string")
        if len(set(arches)) != len(arches):
            raise ArchiveError(f"arches list an arch twice: {list(arches)}")
        if family is None:
            if len(arches) != 1:
                raise ArchiveError(
                    f"an archive for {len(arches)} arches needs a family name (family=...)")
            family = arches[0]
        self.group = group
        self.arches = list(arches)
        self.family = family
        self.compression: Scheme = compression
        self.level = level
        self._entries: list[_Pending] = []
        self._seen: set[tuple[str, str]] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, toc_key: str, arch: str, data: bytes | None,
            metadata: Mapping[str, Any] | None = None,
            *, entry_type: str = "hsaco", frame: bytes | SpooledRecord | None = None) -> int:
        """Adds one entry and returns its ordinal.

        ``frame``, when given, is ``compress_frame(data)`` computed beforehand (e.g. in a
        thread pool), or its record already in a spool file, and is stored as is; ``data``
        may then be None (the entry's size is the content size the frame records).
        """
        if arch not in self.arches:
            raise ArchiveError(
                f"entry {toc_key!r} is for arch {arch!r}, which this archive does not declare "
                f"(declared: {', '.join(self.arches) or 'none'})")
        if (toc_key, arch) in self._seen:
            raise ArchiveError(f"duplicate entry: toc key {toc_key!r} for arch {arch!r} "
                               f"was already added")
        if entry_type not in ENTRY_TYPES:
            raise ArchiveError(
                f"entry type {entry_type!r} is unknown; expected one of {', '.join(ENTRY_TYPES)}")
        if metadata is not None and (why := json_problem(dict(metadata))) is not None:
            raise ArchiveError(f"entry {toc_key!r}/{arch}: metadata {why}")
        if data is None and frame is None:
            raise ArchiveError(f"entry {toc_key!r}/{arch}: neither data nor a frame was given")
        payload: bytes | SpooledRecord
        if self.compression == "none":
            if frame is not None or data is None:
                raise ArchiveError("a precompressed frame was given to an archive "
                                   "with compression 'none'")
            size = len(data)
            payload = bytes(data)
        elif frame is None:
            assert data is not None
            size = len(data)
            payload = compress_frame(data, self.level)
        elif isinstance(frame, SpooledRecord):
            size = frame.content_size
            if data is not None and size != len(data):
                raise ArchiveError(f"entry {toc_key!r}/{arch}: the spooled frame holds {size} "
                                   f"bytes but the data has {len(data)}")
            payload = frame
        else:
            try:
                size = zstandard.frame_content_size(frame)
            except zstandard.ZstdError as e:
                raise ArchiveError(f"entry {toc_key!r}/{arch}: the frame is not zstd ({e})") from e
            if data is None and size < 0:
                raise ArchiveError(f"entry {toc_key!r}/{arch}: the frame does not record its "
                                   "content size, and no data was given")
            if data is not None and size != len(data):
                raise ArchiveError(
                    f"entry {toc_key!r}/{arch}: the frame holds {size} bytes by its header but "
                    f"the data has {len(data)}; was it compressed from other data?")
            payload = bytes(frame)
        self._seen.add((toc_key, arch))
        self._entries.append(_Pending(toc_key, arch, entry_type, size,
                                      dict(metadata) if metadata else None, payload))
        return len(self._entries) - 1

    def _toc(self, scheme_fields: dict[str, Any]) -> dict[str, Any]:
        toc: dict[str, dict[str, dict[str, Any]]] = {}
        for ordinal, e in enumerate(self._entries):
            item: dict[str, Any] = {"type": e.entry_type, "ordinal": ordinal,
                                    "original_size": e.size}
            if e.metadata:  # as rocm-kpack: only a non-empty metadata map is written
                item["metadata"] = e.metadata
            toc.setdefault(e.toc_key, {})[e.arch] = item
        used = {e.arch for e in self._entries}
        return {"format_version": FORMAT_VERSION, "group_name": self.group,
                "gfx_arch_family": self.family,
                "gfx_arches": [a for a in self.arches if a in used], "toc": toc,
                "compression_scheme": self.compression, **scheme_fields}

    def _framing(self) -> tuple[bytes, bytes]:
        """The bytes before the entries' data (header, padding and, for zstd, the frame
        count) and the TOC after it."""
        if self.compression == "zstd-per-kernel":
            size = 4 + sum(e.payload.where.size if isinstance(e.payload, SpooledRecord)
                           else 4 + len(e.payload) for e in self._entries)
            fields: dict[str, Any] = {"zstd_offset": DATA_OFFSET, "zstd_size": size}
            count = _U32.pack(len(self._entries))
        else:
            blobs, pos = [], DATA_OFFSET
            for e in self._entries:
                assert isinstance(e.payload, bytes)  # add() spools only zstd frames
                blobs.append({"offset": pos, "size": len(e.payload)})
                pos += len(e.payload)
            size = pos - DATA_OFFSET
            fields = {"blobs": blobs}
            count = b""
        toc = msgpack.packb(self._toc(fields), use_bin_type=True)
        head = _HEADER.pack(MAGIC, FORMAT_VERSION, DATA_OFFSET + size).ljust(DATA_OFFSET, b"\0")
        return head + count, toc

    def chunks(self) -> Iterator[bytes | FileRange]:
        """The archive's bytes, piece by piece, in file order: a spooled record as the
        range of its spool file."""
        head, toc = self._framing()
        yield head
        for e in self._entries:
            if isinstance(e.payload, SpooledRecord):
                yield e.payload.where
            elif self.compression == "zstd-per-kernel":
                if len(e.payload) > 0xFFFFFFFF:
                    raise ArchiveError(f"entry {e.toc_key!r}/{e.arch}: a frame of "
                                       f"{len(e.payload)} bytes does not fit a u32 length")
                yield _U32.pack(len(e.payload))
                yield e.payload
            else:
                yield e.payload
        yield toc

    def to_bytes(self) -> bytes:
        """The whole archive in memory."""
        return b"".join(c if isinstance(c, bytes) else read_range(c) for c in self.chunks())

    def write(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        """Writes the archive atomically: a temporary file beside ``path``, fsync (unless
        ``durable`` is False: the caller fsyncs it, as publishing a shard does), rename.
        When every entry is a spooled record and together, in order, they are all their
        spool holds after RECORDS_OFFSET, the spool itself becomes the archive: nothing
        is copied."""
        spool = self._whole_spool()
        if spool is not None and self._finish_spool(spool, Path(path), durable):
            return
        write_atomic(Path(path), self.chunks(), durable=durable)

    def _whole_spool(self) -> int | None:
        """The spool whose records are this archive's data, as above, or None."""
        if self.compression != "zstd-per-kernel" or not self._entries:
            return None
        fd, pos = -1, RECORDS_OFFSET
        for e in self._entries:
            if not isinstance(e.payload, SpooledRecord):
                return None
            where = e.payload.where
            if (fd != -1 and where.fd != fd) or where.offset != pos:
                return None
            fd, pos = where.fd, pos + where.size
        try:
            return fd if os.fstat(fd).st_size == pos else None
        except OSError:
            return None

    def _finish_spool(self, fd: int, path: Path, durable: bool) -> bool:
        """Writes the framing around the records of the spool ``fd`` and names it
        ``path``; False when it cannot be named there (the records are left as they
        were, for the copy)."""
        head, toc = self._framing()
        pwrite_all(fd, head, 0)
        pwrite_all(fd, toc, _HEADER.unpack_from(head)[2])  # the TOC offset it records
        if durable:
            os.fsync(fd)
        if not link_unnamed(fd, path):
            return False
        if durable:
            fsync_dir(path.parent)
        return True


MAX_METADATA_DEPTH = 512


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is no JSON value (readers take entry metadata as JSON), or None."""
    if depth > MAX_METADATA_DEPTH:
        return "nests too deep"
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (list, tuple)):
        for item in value:
            if (why := json_problem(item, depth + 1)) is not None:
                return why
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return "has a key that is not a string"
            if (why := json_problem(v, depth + 1)) is not None:
                return why
        return None
    return f"holds {type(value).__name__}, which JSON cannot hold"
