"""kpack archives (KPAK version 1, SPEC 7): writer and reader.

Byte-compatible with ROCm's rocm-kpack: a 16-byte header (``KPAK``, u32 version,
u64 TOC offset), zero padding to 64 where the data starts, then one msgpack TOC
map written last and running to the end of the file.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgpack  # type: ignore[import-untyped]
import zstandard

MAGIC = b"KPAK"
FORMAT_VERSION = 1
HEADER_SIZE = 16
DATA_OFFSET = 64
SCHEMES = ("zstd-per-kernel", "none")
ENTRY_TYPES = ("hsaco", "cubin")
DEFAULT_MAX_ORIGINAL_SIZE = 1 << 30
MAX_TOC_SIZE = 256 << 20
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<4sIQ")

Scheme = Literal["zstd-per-kernel", "none"]


class ArchiveError(Exception):
    """A kpack archive that cannot be written or read as asked; the message says why."""


def archive_name(group: str, arch: str) -> str:
    """The file name of a group's archive for one arch: ``<group>_<arch>.kpack``."""
    return f"{group}_{arch}.kpack"


# zstandard's (de)compressor objects are not thread-safe; one per thread and level.
_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return comp


def _decompressor() -> zstandard.ZstdDecompressor:
    dec: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if dec is None:
        dec = _local.decompressor = zstandard.ZstdDecompressor()
    return dec


def compress_frame(data: bytes, level: int = 3) -> bytes:
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
    payload: bytes  # the frame (zstd) or the data itself (none)


class ArchiveWriter:
    """Collects entries in memory and writes one archive atomically."""

    def __init__(self, group: str, arches: Sequence[str],
                 compression: Scheme = "zstd-per-kernel", level: int = 3,
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

    def add(self, toc_key: str, arch: str, data: bytes, metadata: Mapping[str, Any] | None = None,
            *, entry_type: str = "hsaco", frame: bytes | None = None) -> int:
        """Adds one entry and returns its ordinal.

        ``frame``, when given, is ``compress_frame(data)`` computed beforehand (e.g. in a
        thread pool) and is stored as is.
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
        if self.compression == "none":
            if frame is not None:
                raise ArchiveError("a precompressed frame was given to an archive "
                                   "with compression 'none'")
            payload = bytes(data)
        elif frame is None:
            payload = compress_frame(data, self.level)
        else:
            try:
                size = zstandard.frame_content_size(frame)
            except zstandard.ZstdError as e:
                raise ArchiveError(f"entry {toc_key!r}/{arch}: the frame is not zstd ({e})") from e
            if size != len(data):
                raise ArchiveError(
                    f"entry {toc_key!r}/{arch}: the frame holds {size} bytes by its header but "
                    f"the data has {len(data)}; was it compressed from other data?")
            payload = bytes(frame)
        self._seen.add((toc_key, arch))
        self._entries.append(_Pending(toc_key, arch, entry_type, len(data),
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

    def chunks(self) -> Iterator[bytes]:
        """The archive's bytes, piece by piece, in file order."""
        if self.compression == "zstd-per-kernel":
            size = 4 + sum(4 + len(e.payload) for e in self._entries)
            fields: dict[str, Any] = {"zstd_offset": DATA_OFFSET, "zstd_size": size}
        else:
            blobs, pos = [], DATA_OFFSET
            for e in self._entries:
                blobs.append({"offset": pos, "size": len(e.payload)})
                pos += len(e.payload)
            size = pos - DATA_OFFSET
            fields = {"blobs": blobs}
        toc = msgpack.packb(self._toc(fields), use_bin_type=True)
        yield _HEADER.pack(MAGIC, FORMAT_VERSION, DATA_OFFSET + size).ljust(DATA_OFFSET, b"\0")
        if self.compression == "zstd-per-kernel":
            yield _U32.pack(len(self._entries))
            for e in self._entries:
                if len(e.payload) > 0xFFFFFFFF:
                    raise ArchiveError(f"entry {e.toc_key!r}/{e.arch}: a frame of "
                                       f"{len(e.payload)} bytes does not fit a u32 length")
                yield _U32.pack(len(e.payload))
                yield e.payload
        else:
            for e in self._entries:
                yield e.payload
        yield toc

    def to_bytes(self) -> bytes:
        """The whole archive in memory."""
        return b"".join(self.chunks())

    def write(self, path: str | os.PathLike[str]) -> None:
        """Writes the archive atomically: a temporary file beside ``path``, fsync, rename."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in self.chunks():
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes it 0600; archives are shipped files
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not every platform or filesystem allows it.
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ---------------------------------------------------------------------------
# Reader


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
            raise ArchiveError(f"{self.name}: {what} at {offset}+{size} lies outside the "
                               f"{self.size}-byte file (truncated or corrupt archive)")
        if self._data is not None:
            return self._data[offset:offset + size]
        if self._fd is None:
            raise ArchiveError(f"{self.name}: the archive is closed")
        out = os.pread(self._fd, size, offset)
        if len(out) != size:
            raise ArchiveError(f"{self.name}: {what}: the file shrank while it was read")
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


MAX_METADATA_DEPTH = 512


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is no JSON value (metadata is JSON on both readers), or None."""
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
            raise ArchiveError(f"{os.fspath(path)}: cannot open archive: {e.strerror}") from e
        try:
            src = _Source(os.fspath(path), fd=fd)
        except OSError as e:
            os.close(fd)
            raise ArchiveError(f"{os.fspath(path)}: cannot stat archive: {e.strerror}") from e
        return cls(src, max_original_size)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>",
                   max_original_size: int = DEFAULT_MAX_ORIGINAL_SIZE) -> Archive:
        """The same over bytes in memory; ``name`` labels messages."""
        return cls(_Source(name, data=bytes(data)), max_original_size)

    # -- loading -------------------------------------------------------------

    def _fail(self, message: str) -> ArchiveError:
        return ArchiveError(f"{self.name}: {message}")

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
        scheme = toc.get("compression_scheme", "none")  # SPEC 7: a missing scheme is none
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
