"""kpack archives: the package's writer, the tests' independent Python reader
(kpack_oracle) and the C++ reader (through the extension), on real code objects and on
bytes assembled by hand."""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zstandard
from hip_objects import ARCHES
from kpack_oracle import Archive, OracleError

from ukdpack import _runtime
from ukdpack.produce import codeobject
from ukdpack.shard.archive import (
    ArchiveError,
    ArchiveWriter,
    archive_name,
    compress_frame,
)

SCHEMES = ("zstd-per-kernel", "none")
KpackError = _runtime.KpackError


def fs(text: str) -> bytes:
    """A msgpack fixstr, by hand."""
    raw = text.encode()
    assert len(raw) < 32
    return bytes([0xA0 | len(raw)]) + raw


def header(toc_offset: int) -> bytes:
    return b"KPAK" + struct.pack("<IQ", 1, toc_offset) + b"\0" * 48


# One zstd frame of b"hi" written out by hand: magic, frame header descriptor 0x20
# (single segment, 1-byte content size, no checksum, no dictionary), content size 2,
# then one raw last block of 2 bytes.
FRAME_HI = bytes.fromhex("28b52ffd" "20" "02" "110000") + b"hi"


def golden(scheme: str) -> bytes:
    """The archive of one entry ("k", gfx90a) = b"hi", spelled out byte by byte."""
    entry = (b"\x81" + fs("k") + b"\x81" + fs("gfx90a") + b"\x83" + fs("type") + fs("hsaco")
             + fs("ordinal") + b"\x00" + fs("original_size") + b"\x02")
    common = (fs("format_version") + b"\x01" + fs("group_name") + fs("g")
              + fs("gfx_arch_family") + fs("gfx90a") + fs("gfx_arches") + b"\x91" + fs("gfx90a")
              + fs("toc") + entry)
    if scheme == "zstd-per-kernel":
        blob = struct.pack("<II", 1, len(FRAME_HI)) + FRAME_HI
        toc = (b"\x88" + common + fs("compression_scheme") + fs("zstd-per-kernel")
               + fs("zstd_offset") + b"\x40" + fs("zstd_size") + bytes([len(blob)]))
    else:
        blob = b"hi"
        toc = (b"\x87" + common + fs("compression_scheme") + fs("none") + fs("blobs")
               + b"\x91\x82" + fs("offset") + b"\x40" + fs("size") + b"\x02")
    return header(64 + len(blob)) + blob + toc


def both_read(data: bytes) -> tuple[Archive, Any]:
    return Archive.from_bytes(data), _runtime.KpackArchive.from_bytes(data)


# ---------------------------------------------------------------------------
# Golden bytes


@pytest.mark.parametrize("scheme", SCHEMES)
def test_writer_produces_the_golden_bytes(scheme: str, tmp_path: Path) -> None:
    w = ArchiveWriter("g", ["gfx90a"], compression=scheme)  # type: ignore[arg-type]
    w.add("k", "gfx90a", b"hi")
    assert w.to_bytes() == golden(scheme)
    w.write(tmp_path / "a.kpack")
    assert (tmp_path / "a.kpack").read_bytes() == golden(scheme)


def test_precompressed_frame_is_stored_as_is() -> None:
    w = ArchiveWriter("g", ["gfx90a"])
    w.add("k", "gfx90a", b"hi", frame=FRAME_HI)
    assert w.to_bytes() == golden("zstd-per-kernel")
    assert compress_frame(b"hi") == FRAME_HI


def test_a_frame_made_elsewhere_is_kept_not_recompressed() -> None:
    data = os.urandom(512) * 20
    frame = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(data)
    assert frame != compress_frame(data)
    w = ArchiveWriter("g", ["gfx90a"])
    w.add("k", "gfx90a", data, frame=frame)
    raw = w.to_bytes()
    assert raw[64 + 8:64 + 8 + len(frame)] == frame
    assert Archive.from_bytes(raw).get("k", "gfx90a") == data


@pytest.mark.parametrize("scheme", SCHEMES)
def test_both_readers_read_the_golden_bytes(scheme: str) -> None:
    py, cpp = both_read(golden(scheme))
    assert (py.group, py.family, py.arches, py.scheme) == ("g", "gfx90a", ["gfx90a"], scheme)
    assert (cpp.group(), cpp.family(), cpp.arches(), cpp.scheme()) == \
        ("g", "gfx90a", ["gfx90a"], scheme)
    assert py.keys() == cpp.keys() == ["k"]
    assert py.get("k", "gfx90a") == cpp.get("k", "gfx90a") == b"hi"
    e = py.entry("k", "gfx90a")
    assert (e.type, e.ordinal, e.original_size, e.metadata) == ("hsaco", 0, 2, None)
    assert cpp.entry("k", "gfx90a") == {"type": "hsaco", "ordinal": 0, "original_size": 2,
                                        "metadata": None}


def test_rocm_kpack_style_archive_without_scheme_or_sizes_is_read_as_none() -> None:
    # rocm-kpack treats a missing scheme as "none" and original_size as optional.
    payload = b"abcdef"
    toc = msgpack.packb({"format_version": 1, "group_name": "blas", "gfx_arch_family": "gfx100X",
                         "gfx_arches": ["gfx1030", "gfx1031"],
                         "toc": {"lib/x.so": {"gfx1031": {"type": "hsaco", "ordinal": 0}}},
                         "blobs": [{"offset": 64, "size": len(payload)}]}, use_bin_type=True)
    data = header(64 + len(payload)) + payload + toc
    py, cpp = both_read(data)
    assert py.scheme == cpp.scheme() == "none"
    assert py.family == cpp.family() == "gfx100X"
    assert py.get("lib/x.so", "gfx1031") == cpp.get("lib/x.so", "gfx1031") == payload
    assert py.entry("lib/x.so", "gfx1031").original_size == 6


def test_zstd_entry_without_original_size_takes_the_frame_header() -> None:
    frame = compress_frame(b"x" * 1000)
    blob = struct.pack("<II", 1, len(frame)) + frame
    toc = msgpack.packb({"format_version": 1, "group_name": "g", "gfx_arch_family": "gfx90a",
                         "gfx_arches": ["gfx90a"],
                         "toc": {"k": {"gfx90a": {"type": "hsaco", "ordinal": 0}}},
                         "compression_scheme": "zstd-per-kernel", "zstd_offset": 64,
                         "zstd_size": len(blob)}, use_bin_type=True)
    py, cpp = both_read(header(64 + len(blob)) + blob + toc)
    assert py.entry("k", "gfx90a").original_size == cpp.entry("k", "gfx90a")["original_size"] \
        == 1000
    assert py.get("k", "gfx90a") == cpp.get("k", "gfx90a") == b"x" * 1000


# ---------------------------------------------------------------------------
# Real code objects through writer and both readers


@pytest.mark.parametrize("scheme", SCHEMES)
def test_real_objects_round_trip_byte_identical(signature_objects: dict[str, bytes],
                                                 scheme: str, tmp_path: Path) -> None:
    w = ArchiveWriter("lib", list(ARCHES), compression=scheme,  # type: ignore[arg-type]
                      family="mixed")
    stored: dict[tuple[str, str], bytes] = {}
    for i, arch in enumerate(ARCHES):
        for variant in ("signatures", "copy"):
            elf = codeobject.elf_image(signature_objects[arch])
            if variant == "copy":
                elf = elf + bytes([i])  # distinct payloads per key
            key = f"{variant}_{i:012x}"
            assert w.add(key, arch, elf, {"symbols": codeobject.kernels(elf)}) == len(stored)
            stored[(key, arch)] = elf
    path = tmp_path / archive_name("lib", "mixed")
    w.write(path)
    assert path.name == "lib_mixed.kpack"
    with Archive.open(path) as py:
        cpp = _runtime.KpackArchive(str(path))
        assert list(py) == list(stored)  # ordinal order
        assert py.arches == cpp.arches() == list(ARCHES)
        assert py.keys() == cpp.keys() == sorted({k for k, _ in stored})
        for (key, arch), elf in stored.items():
            got_py, got_cpp = py.get(key, arch), cpp.get(key, arch)
            assert got_py == got_cpp == elf
            assert _runtime.code_object_kernels(got_cpp) == codeobject.kernels(elf)
            meta = py.entry(key, arch).metadata
            assert meta == cpp.entry(key, arch)["metadata"] == {"symbols": codeobject.kernels(elf)}
    if scheme == "zstd-per-kernel":
        assert path.stat().st_size < sum(len(v) for v in stored.values())


def test_each_entry_is_an_independent_frame(signature_objects: dict[str, bytes]) -> None:
    w = ArchiveWriter("lib", ["gfx90a"])
    elf = codeobject.elf_image(signature_objects["gfx90a"])
    w.add("a", "gfx90a", elf)
    w.add("b", "gfx90a", elf[::-1])
    raw = w.to_bytes()
    (count,) = struct.unpack_from("<I", raw, 64)
    assert count == 2
    pos = 68
    for expected in (elf, elf[::-1]):
        (n,) = struct.unpack_from("<I", raw, pos)
        frame = raw[pos + 4:pos + 4 + n]
        params = zstandard.get_frame_parameters(frame)
        assert params.content_size == len(expected) and params.dict_id == 0
        assert zstandard.ZstdDecompressor().decompress(frame) == expected
        pos += 4 + n


def test_family_defaults_to_the_single_arch_and_arches_keep_declared_order() -> None:
    w = ArchiveWriter("g", ["gfx1030", "gfx90a", "gfx940"], family="fam")
    w.add("k", "gfx940", b"1")
    w.add("k", "gfx1030", b"2")
    a = Archive.from_bytes(w.to_bytes())
    assert a.arches == ["gfx1030", "gfx940"]  # used ones, declared order
    assert a.family == "fam"
    assert Archive.from_bytes(ArchiveWriter("g", ["gfx940"]).to_bytes()).family == "gfx940"
    with pytest.raises(ArchiveError, match="needs a family"):
        ArchiveWriter("g", ["gfx90a", "gfx940"])


def test_toc_keys_are_written_in_spec_order() -> None:
    for scheme in SCHEMES:
        w = ArchiveWriter("g", ["gfx90a"], compression=scheme)  # type: ignore[arg-type]
        w.add("k", "gfx90a", b"abc", {"m": 1})
        raw = w.to_bytes()
        (toc_offset,) = struct.unpack_from("<Q", raw, 8)
        toc = msgpack.unpackb(raw[toc_offset:])
        tail = ["zstd_offset", "zstd_size"] if scheme == "zstd-per-kernel" else ["blobs"]
        assert list(toc) == ["format_version", "group_name", "gfx_arch_family", "gfx_arches",
                             "toc", "compression_scheme", *tail]
        assert list(toc["toc"]["k"]["gfx90a"]) == ["type", "ordinal", "original_size",
                                                   "metadata"]
        assert raw[16:64] == b"\0" * 48


def test_writer_refusals() -> None:
    w = ArchiveWriter("g", ["gfx90a", "gfx940"], family="f")
    w.add("k", "gfx90a", b"x")
    with pytest.raises(ArchiveError, match=r"duplicate entry.*'k'.*gfx90a"):
        w.add("k", "gfx90a", b"y")
    with pytest.raises(ArchiveError, match=r"arch 'gfx1030'.*does not declare.*gfx90a, gfx940"):
        w.add("k", "gfx1030", b"y")
    with pytest.raises(ArchiveError, match=r"frame holds 2 bytes.*data has 3"):
        w.add("k2", "gfx940", b"abc", frame=FRAME_HI)
    with pytest.raises(ArchiveError, match="not zstd"):
        w.add("k2", "gfx940", b"abc", frame=b"nope")
    with pytest.raises(ArchiveError, match="metadata has a key that is not a string"):
        w.add("k2", "gfx940", b"abc", {1: 2})  # type: ignore[dict-item]
    with pytest.raises(ArchiveError, match="entry type 'elf'"):
        w.add("k2", "gfx940", b"abc", entry_type="elf")
    with pytest.raises(ArchiveError, match="unknown compression scheme"):
        ArchiveWriter("g", ["gfx90a"], compression="lz4")  # type: ignore[arg-type]
    with pytest.raises(ArchiveError, match="compression 'none'"):
        ArchiveWriter("g", ["gfx90a"], compression="none").add("k", "gfx90a", b"hi",
                                                                frame=FRAME_HI)
    assert w.add("k2", "gfx940", b"abc", entry_type="cubin") == 1


def test_compress_frame_from_many_threads_matches_serial() -> None:
    blobs = [os.urandom(1000) * (i % 7 + 1) + bytes([i]) * 5000 for i in range(64)]
    serial = [compress_frame(b) for b in blobs]
    start = threading.Barrier(8)

    def work(i: int) -> bytes:
        if i < 8:
            start.wait()
        return compress_frame(blobs[i])

    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(work, range(len(blobs))))
    assert threaded == serial


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out" / "g_gfx90a.kpack"
    w = ArchiveWriter("g", ["gfx90a"])
    w.add("k", "gfx90a", b"first")
    w.write(path)
    old = path.read_bytes()
    w2 = ArchiveWriter("g", ["gfx90a"])
    w2.add("k", "gfx90a", b"second")

    def boom(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        w2.write(path)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert sorted(p.name for p in path.parent.iterdir()) == ["g_gfx90a.kpack"]
    w2.write(path)
    with Archive.open(path) as a:
        assert a.get("k", "gfx90a") == b"second"
    assert oct(path.stat().st_mode & 0o777) == "0o644"


# ---------------------------------------------------------------------------
# Reader refusals: both readers, with a message


def refused_by_both(data: bytes, fragment: str = "", *, on_get: tuple[str, str] | None = None
                    ) -> tuple[str, str]:
    """Both readers refuse ``data`` (at open, or at get of ``on_get``); returns the messages."""
    messages = []
    for opener, err in ((Archive.from_bytes, OracleError),
                        (_runtime.KpackArchive.from_bytes, KpackError)):
        with pytest.raises(err) as caught:
            archive = opener(data)
            if on_get is not None:
                archive.get(*on_get)
        msg = str(caught.value)
        assert msg.startswith("<memory>: ") and len(msg) > 20
        assert fragment in msg, (fragment, msg)
        messages.append(msg)
    return messages[0], messages[1]


def small_archive(scheme: str) -> bytes:
    w = ArchiveWriter("grp", ["gfx90a", "gfx1030"], compression=scheme,  # type: ignore[arg-type]
                      family="fam")
    w.add("alpha", "gfx90a", b"A" * 50, {"n": 1})
    w.add("alpha", "gfx1030", b"B" * 30)
    w.add("beta", "gfx90a", b"")
    return w.to_bytes()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_truncation_is_refused_by_both(scheme: str) -> None:
    data = small_archive(scheme)
    for n in range(len(data)):
        refused_by_both(data[:n])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_missing_entry_names_key_arch_and_what_is_held(scheme: str) -> None:
    data = small_archive(scheme)
    py, cpp = refused_by_both(data, "no entry for toc key 'alpha' and arch 'gfx940'",
                              on_get=("alpha", "gfx940"))
    assert "gfx1030, gfx90a" in py and "gfx1030, gfx90a" in cpp
    py, cpp = refused_by_both(data, "toc key 'gamma'", on_get=("gamma", "gfx90a"))
    assert "alpha, beta" in py and "alpha, beta" in cpp


def rebuild(data: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """The archive with its TOC decoded, edited and encoded again."""
    (toc_offset,) = struct.unpack_from("<Q", data, 8)
    toc = msgpack.unpackb(data[toc_offset:])
    edit(toc)
    return data[:toc_offset] + msgpack.packb(toc, use_bin_type=True)


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(toc: dict[str, Any]) -> None:
        node = toc
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return edit


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda toc: toc.pop(key)


ENTRY = ["toc", "alpha", "gfx90a"]
CORRUPTIONS: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    ("zstd-per-kernel", "format_version", _set(["format_version"], 2), "format_version is 2"),
    ("none", "scheme", _set(["compression_scheme"], "lz4"), "unknown compression scheme"),
    ("none", "blob offset", _set(["blobs", 0], {"offset": 10**9, "size": 50}),
     "outside the data region"),
    ("none", "blob size", _set(["blobs", 0], {"offset": 64, "size": 10**6}),
     "outside the data region"),
    ("zstd-per-kernel", "zstd size", _set(["zstd_size"], 10**6), "outside the data region"),
    ("zstd-per-kernel", "zstd offset", _set(["zstd_offset"], 8), "outside the data region"),
    ("zstd-per-kernel", "ordinal", _set([*ENTRY, "ordinal"], 7), "ordinal 7 is out of range"),
    ("none", "negative ordinal", _set([*ENTRY, "ordinal"], -1), "out of range"),
    ("zstd-per-kernel", "original size over cap", _set([*ENTRY, "original_size"], 1 << 31),
     "over the limit"),
    ("none", "original size vs blob", _set([*ENTRY, "original_size"], 49),
     "differs from its blob"),
    ("zstd-per-kernel", "toc not a map", _set(["toc"], [1, 2]), "'toc' is not a map"),
    ("zstd-per-kernel", "group", _drop("group_name"), "group_name"),
    ("zstd-per-kernel", "arches", _set(["gfx_arches"], "gfx90a"), "gfx_arches"),
    ("none", "metadata", _set([*ENTRY, "metadata"], [1]), "metadata is not a map"),
    ("none", "metadata value", _set([*ENTRY, "metadata"], {"b": b"\x00"}),
     "which JSON cannot hold"),
]


@pytest.mark.parametrize("scheme, label, edit, fragment", CORRUPTIONS,
                         ids=[c[1] for c in CORRUPTIONS])
def test_corrupted_toc_is_refused_by_both(scheme: str, label: str,
                                          edit: Callable[[dict[str, Any]], None],
                                          fragment: str) -> None:
    refused_by_both(rebuild(small_archive(scheme), edit), fragment)


def test_size_mismatch_between_frame_and_toc_is_refused_at_get() -> None:
    data = rebuild(small_archive("zstd-per-kernel"), _set([*ENTRY, "original_size"], 49))
    refused_by_both(data, "original_size 49", on_get=("alpha", "gfx90a"))
    py, cpp = both_read(data)
    assert py.get("beta", "gfx90a") == cpp.get("beta", "gfx90a") == b""  # the rest still reads


def test_caller_cap_on_original_size() -> None:
    data = small_archive("zstd-per-kernel")
    with pytest.raises(OracleError, match="original_size 50 is over the limit of 40"):
        Archive.from_bytes(data, max_original_size=40)
    with pytest.raises(KpackError, match="original_size 50 is over the limit of 40"):
        _runtime.KpackArchive.from_bytes(data, max_original_size=40)


def test_header_refusals() -> None:
    data = small_archive("none")
    refused_by_both(b"KPAX" + data[4:], "not a kpack archive")
    refused_by_both(data[:4] + struct.pack("<I", 2) + data[8:], "format version 2")
    refused_by_both(data[:8] + struct.pack("<Q", len(data)) + data[16:], "TOC offset")
    refused_by_both(data[:8] + struct.pack("<Q", 16) + data[16:], "TOC offset 16")
    refused_by_both(data + b"\0", "1 trailing bytes after the TOC")
    refused_by_both(data + msgpack.packb({}), "trailing bytes")


def test_corrupt_frame_is_refused_at_get() -> None:
    data = bytearray(small_archive("zstd-per-kernel"))
    frame_start = 64 + 4 + 4
    data[frame_start:frame_start + 4] = b"XXXX"  # break the first frame's magic
    refused_by_both(bytes(data), "not a zstd frame", on_get=("alpha", "gfx90a"))


def test_extra_bytes_after_a_frame_are_refused() -> None:
    frame = compress_frame(b"q" * 100) + compress_frame(b"")  # two frames in one slot
    blob = struct.pack("<II", 1, len(frame)) + frame
    toc = msgpack.packb({"format_version": 1, "group_name": "g", "gfx_arch_family": "gfx90a",
                         "gfx_arches": ["gfx90a"],
                         "toc": {"k": {"gfx90a": {"type": "hsaco", "ordinal": 0,
                                                  "original_size": 100}}},
                         "compression_scheme": "zstd-per-kernel", "zstd_offset": 64,
                         "zstd_size": len(blob)}, use_bin_type=True)
    refused_by_both(header(64 + len(blob)) + blob + toc, "corrupt zstd frame",
                    on_get=("k", "gfx90a"))


def test_hostile_container_sizes_do_not_allocate() -> None:
    # A TOC claiming a 4-billion-element array in five bytes, nested: refused, fast.
    toc = b"\x81" + fs("toc") + b"\xdd\xff\xff\xff\xff" * 40
    refused_by_both(header(64) + toc, "not a msgpack document")
    refused_by_both(header(64) + b"\xdf\xff\xff\xff\xff", "not a msgpack document")


GETS = [("alpha", "gfx90a"), ("alpha", "gfx1030"), ("beta", "gfx90a")]


def _open_outcome(opener: Callable[[bytes], Any], data: bytes) -> Any:
    # The oracle raises OracleError, the C++ reader KpackError (a ValueError).
    expected = ValueError if opener is _runtime.KpackArchive.from_bytes else OracleError
    try:
        archive = opener(data)
    except expected:
        return "refused"
    out: list[Any] = []
    for key, arch in GETS:
        try:
            out.append(archive.get(key, arch))
        except (OracleError, ValueError):
            out.append("refused")
    return out


def _frame_bodies(data: bytes) -> list[range]:
    """Where each frame's compressed blocks lie (after magic, descriptor, 1-byte size)."""
    (count,) = struct.unpack_from("<I", data, 64)
    pos, out = 68, []
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(range(pos + 4 + 6, pos + 4 + n))
        pos += 4 + n
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
def test_readers_agree_on_every_single_byte_corruption(scheme: str) -> None:
    # Differential: the two readers give the same verdict and the same bytes. The one
    # tolerated difference: inside a frame's compressed blocks, the two zstd builds
    # (Python's bundled one, the system's) may differ on what they call corrupt; then
    # the reader that answers must still give the original bytes or refuse.
    data = small_archive(scheme)
    bodies = _frame_bodies(data) if scheme == "zstd-per-kernel" else []
    original = _open_outcome(Archive.from_bytes, data)
    tolerated = 0
    for i in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= mask
            py = _open_outcome(Archive.from_bytes, bytes(bad))
            cpp = _open_outcome(_runtime.KpackArchive.from_bytes, bytes(bad))
            if py == cpp:
                continue
            assert py != "refused" and cpp != "refused", (i, mask)
            for slot, (a, b) in enumerate(zip(py, cpp, strict=True)):
                if a != b:
                    assert any(i in body for body in bodies), (i, mask, slot)
                    assert {a, b} <= {"refused", original[slot]}, (i, mask, slot)
                    tolerated += 1
    assert tolerated < len(data)
