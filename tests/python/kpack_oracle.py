"""An independent kpack reader (KPAK version 1), for the tests only: the package reads
archives with the C++ runtime's reader (``_runtime.KpackArchive``) and never with this one.

Tests read what ``ukdpack.shard.archive.ArchiveWriter`` writes back with this oracle and with the
C++ reader, and hand-made broken bytes through both, so the writer is not checked by a
reader that shares its code. It takes none of the format from ``ukdpack.shard.archive``:
the format's constants are spelled out here again (only the check that entry metadata is
JSON is shared).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack
import zstandard

from ukdpack.shard.archive import json_problem  # a JSON check, not format code

MAGIC = b"KPAK"
FORMAT_VERSION = 1
HEADER_SIZE = 16
DATA_OFFSET = 64
SCHEMES = ("zstd-per-kernel", "none")
DEFAULT_MAX_ORIGINAL_SIZE = 1 << 30
MAX_TOC_SIZE = 256 << 20
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<4sIQ")


class OracleError(Exception):
    """An archive the oracle cannot read as asked; the message says why."""


# zstandard's decompressor objects are not thread-safe: one per thread.
_local = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
    dec: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if dec is None:
        dec = _local.decompressor = zstandard.ZstdDecompressor()
    return dec


@dataclass(frozen=True)
class Entry:
    """One TOC entry: what the archive says about (toc key, arch)."""

    type: str
    ordinal: int
    original_size: int
    metadata: Mapping[str, Any] | None


class _Source:
    """Bounded reads from a file (pread) or from bytes in memory."""

    def __init__(self, name: str, data: bytes | None = None, fd: int | None = None) -> None:
        self.name = name
        self._data = data
        self._fd = fd
        self.size = len(data) if data is not None else os.fstat(fd).st_size if fd is not None else 0

    def read(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset > self.size or size > self.size - offset:
            raise OracleError(f"{self.name}: {what} at {offset}+{size} lies outside the "
                              f"{self.size}-byte file (truncated or corrupt archive)")
        if self._data is not None:
            return self._data[offset:offset + size]
        if self._fd is None:
            raise OracleError(f"{self.name}: the archive is closed")
        out = os.pread(self._fd, size, offset)
        if len(out) != size:
            raise OracleError(f"{self.name}: {what}: the file shrank while it was read")
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Archive:
    """A kpack archive opened for reading; every offset is checked before it is used."""

    def __init__(self, source: _Source, max_original_size: int) -> None:
        self._src = source
        self._max = max_original_size
        self.name = source.name
        try:
            self._load()
        except BaseException:
            source.close()
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str],
             max_original_size: int = DEFAULT_MAX_ORIGINAL_SIZE) -> Archive:
        """Opens ``path`` and checks its header and TOC."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise OracleError(f"{os.fspath(path)}: cannot open archive: {e.strerror}") from e
        try:
            src = _Source(os.fspath(path), fd=fd)
        except OSError as e:
            os.close(fd)
            raise OracleError(f"{os.fspath(path)}: cannot stat archive: {e.strerror}") from e
        return cls(src, max_original_size)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>",
                   max_original_size: int = DEFAULT_MAX_ORIGINAL_SIZE) -> Archive:
        """The same over bytes in memory; ``name`` labels messages."""
        return cls(_Source(name, data=bytes(data)), max_original_size)

    # -- loading -------------------------------------------------------------

    def _fail(self, message: str) -> OracleError:
        return OracleError(f"{self.name}: {message}")

    def _load(self) -> None:
        src = self._src
        if src.size < HEADER_SIZE:
            raise self._fail(f"truncated archive: {src.size} bytes, shorter than the "
                             f"{HEADER_SIZE}-byte KPAK header")
        magic, version, toc_offset = _HEADER.unpack(src.read(0, HEADER_SIZE, "the header"))
        if magic != MAGIC:
            raise self._fail(f"not a kpack archive: expected magic b'KPAK', found {magic!r}")
        if version != FORMAT_VERSION:
            raise self._fail(f"kpack format version {version}; this reader reads version "
                             f"{FORMAT_VERSION}")
        if toc_offset < DATA_OFFSET or toc_offset >= src.size:
            raise self._fail(f"TOC offset {toc_offset} lies outside the data of the "
                             f"{src.size}-byte file (expected {DATA_OFFSET}..{src.size - 1})")
        if src.size - toc_offset > MAX_TOC_SIZE:
            raise self._fail(f"TOC of {src.size - toc_offset} bytes is over the "
                             f"{MAX_TOC_SIZE}-byte limit")
        self._toc_offset = toc_offset
        raw = src.read(toc_offset, src.size - toc_offset, "the TOC")
        try:
            toc = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except msgpack.ExtraData as e:
            raise self._fail(f"{len(e.extra)} trailing bytes after the TOC; the TOC must run "
                             f"to the end of the file") from None
        except (ValueError, TypeError, msgpack.UnpackException) as e:
            raise self._fail(f"the TOC at offset {toc_offset} is not a msgpack document "
                             f"(truncated or corrupt): {e}") from None
        self._parse_toc(toc)

    def _parse_toc(self, toc: Any) -> None:
        if not isinstance(toc, dict):
            raise self._fail(f"the TOC is a {type(toc).__name__}, expected a map")
        fv = toc.get("format_version")
        if fv != FORMAT_VERSION or isinstance(fv, bool):
            raise self._fail(f"TOC format_version is {fv!r}; this reader reads "
                             f"{FORMAT_VERSION}")
        self.group: str = self._str(toc, "group_name")
        self.family: str = self._str(toc, "gfx_arch_family")
        arches = toc.get("gfx_arches")
        if not isinstance(arches, list) or not all(isinstance(a, str) for a in arches):
            raise self._fail("TOC gfx_arches is not a list of strings")
        self.arches: list[str] = arches
        scheme = toc.get("compression_scheme", "none")  # a missing scheme means uncompressed
        if scheme not in SCHEMES:
            raise self._fail(f"unknown compression scheme {scheme!r}; this reader reads "
                             f"{', '.join(SCHEMES)}")
        self.scheme: str = scheme
        self._slots = self._zstd_index(toc) if scheme == "zstd-per-kernel" else self._blobs(toc)
        body = toc.get("toc")
        if not isinstance(body, dict):
            raise self._fail("TOC 'toc' is not a map")
        self._entries: dict[str, dict[str, Entry]] = {}
        for key, per_arch in body.items():
            if not isinstance(key, str) or not isinstance(per_arch, dict):
                raise self._fail(f"TOC entry {key!r} is not a map from arch to entry")
            out: dict[str, Entry] = {}
            for arch, raw in per_arch.items():
                if not isinstance(arch, str):
                    raise self._fail(f"TOC entry {key!r} has a non-string arch {arch!r}")
                out[arch] = self._entry(key, arch, raw)
            self._entries[key] = out

    def _str(self, toc: dict[Any, Any], key: str) -> str:
        value = toc.get(key)
        if not isinstance(value, str):
            raise self._fail(f"TOC {key} is {type(value).__name__}, expected a string")
        return value

    def _region(self, offset: Any, size: Any, what: str) -> tuple[int, int]:
        # Data lies between the header padding and the TOC.
        if not _int(offset) or not _int(size):
            raise self._fail(f"{what}: offset and size must be non-negative integers, "
                             f"found {offset!r} and {size!r}")
        if offset < DATA_OFFSET or offset > self._toc_offset or size > self._toc_offset - offset:
            raise self._fail(f"{what} at {offset}+{size} lies outside the data region "
                             f"{DATA_OFFSET}..{self._toc_offset} of the file")
        return offset, size

    def _zstd_index(self, toc: dict[Any, Any]) -> list[tuple[int, int]]:
        start, size = self._region(toc.get("zstd_offset"), toc.get("zstd_size"), "the zstd blob")
        if size < 4:
            raise self._fail(f"the zstd blob of {size} bytes is too short for its frame count")
        (count,) = _U32.unpack(self._src.read(start, 4, "the zstd frame count"))
        end = start + size
        if count > (size - 4) // 4:
            raise self._fail(f"the zstd blob claims {count} frames, more than its {size} "
                             f"bytes can hold")
        frames: list[tuple[int, int]] = []
        pos = start + 4
        for i in range(count):
            if end - pos < 4:
                raise self._fail(f"zstd frame {i}: its length runs past the end of the blob")
            (flen,) = _U32.unpack(self._src.read(pos, 4, f"zstd frame {i} length"))
            pos += 4
            if flen > end - pos:
                raise self._fail(f"zstd frame {i} of {flen} bytes at {pos} runs past the end of "
                                 f"the blob ({end})")
            frames.append((pos, flen))
            pos += flen
        if pos != end:
            raise self._fail(f"the zstd blob has {end - pos} bytes after its last frame")
        return frames

    def _blobs(self, toc: dict[Any, Any]) -> list[tuple[int, int]]:
        blobs = toc.get("blobs", [])
        if not isinstance(blobs, list):
            raise self._fail("TOC blobs is not a list")
        out = []
        for i, b in enumerate(blobs):
            if not isinstance(b, dict):
                raise self._fail(f"TOC blobs[{i}] is not a map")
            out.append(self._region(b.get("offset"), b.get("size"), f"blob {i}"))
        return out

    def _entry(self, key: str, arch: str, raw: Any) -> Entry:
        where = f"entry {key!r} for {arch}"
        if not isinstance(raw, dict):
            raise self._fail(f"{where} is not a map")
        etype: Any = raw.get("type")
        raw_ordinal: Any = raw.get("ordinal")
        if not isinstance(etype, str):
            raise self._fail(f"{where}: type is not a string")
        if not _int(raw_ordinal) or raw_ordinal >= len(self._slots):
            raise self._fail(f"{where}: ordinal {raw_ordinal!r} is out of range (the archive "
                             f"holds {len(self._slots)} payloads)")
        ordinal: int = raw_ordinal
        size: Any = raw.get("original_size")
        if size is None:  # optional in rocm-kpack: fall back on what the payload says
            size = self._payload_size(where, ordinal)
        if not _int(size):
            raise self._fail(f"{where}: original_size {size!r} is not a non-negative integer")
        if size > self._max:
            raise self._fail(f"{where}: original_size {size} is over the limit of "
                             f"{self._max} bytes")
        if self.scheme == "none" and self._slots[ordinal][1] != size:
            raise self._fail(f"{where}: original_size {size} differs from its blob's "
                             f"{self._slots[ordinal][1]} bytes")
        metadata = raw.get("metadata")
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise self._fail(f"{where}: metadata is not a map")
            if (why := json_problem(metadata)) is not None:
                raise self._fail(f"{where}: metadata {why}")
        return Entry(etype, ordinal, size, metadata)

    def _payload_size(self, where: str, ordinal: int) -> int:
        offset, size = self._slots[ordinal]
        if self.scheme == "none":
            return size
        return self._frame_size(where, self._src.read(offset, min(size, 18), f"{where} frame"))

    def _frame_size(self, where: str, frame: bytes) -> int:
        try:
            fcs = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as e:
            raise self._fail(f"{where}: not a zstd frame ({e})") from None
        if fcs < 0:
            raise self._fail(f"{where}: the zstd frame records no content size in its header")
        return int(fcs)

    # -- queries -------------------------------------------------------------

    def keys(self) -> list[str]:
        """The toc keys, sorted."""
        return sorted(self._entries)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """(toc key, arch) pairs in ordinal order (the order they were added)."""
        pairs = [(e.ordinal, k, a) for k, per in self._entries.items() for a, e in per.items()]
        return iter([(k, a) for _, k, a in sorted(pairs)])

    def __len__(self) -> int:
        return sum(len(per) for per in self._entries.values())

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        return item[1] in self._entries.get(item[0], {})

    def entry(self, toc_key: str, arch: str) -> Entry:
        """The TOC entry of (toc key, arch); exact lookup."""
        per_arch = self._entries.get(toc_key)
        if per_arch is None:
            held = self.keys()
            shown = ", ".join(held[:20]) + (f", … ({len(held)} in all)" if len(held) > 20 else "")
            raise self._fail(f"no entry for toc key {toc_key!r} (arch {arch}); the archive "
                             f"holds keys: {shown or 'none'}")
        found = per_arch.get(arch)
        if found is None:
            raise self._fail(f"no entry for toc key {toc_key!r} and arch {arch!r}; for that "
                             f"key the archive holds arches: {', '.join(sorted(per_arch))}")
        return found

    def get(self, toc_key: str, arch: str) -> bytes:
        """The stored (decompressed) bytes of (toc key, arch)."""
        e = self.entry(toc_key, arch)
        where = f"entry {toc_key!r} for {arch}"
        offset, size = self._slots[e.ordinal]
        payload = self._src.read(offset, size, where)
        if self.scheme == "none":
            return payload
        fcs = self._frame_size(where, payload)
        if fcs != e.original_size:
            raise self._fail(f"{where}: the frame decompresses to {fcs} bytes but the TOC "
                             f"says original_size {e.original_size}")
        try:
            data = _decompressor().decompress(payload, max_output_size=fcs,
                                              allow_extra_data=False)
        except zstandard.ZstdError as e2:
            raise self._fail(f"{where}: corrupt zstd frame: {e2}") from None
        if len(data) != e.original_size:
            raise self._fail(f"{where}: decompressed {len(data)} bytes, the TOC says "
                             f"original_size {e.original_size}")
        return data

    def close(self) -> None:
        """Closes the file; later reads fail."""
        self._src.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        src = getattr(self, "_src", None)
        if src is not None:
            src.close()
