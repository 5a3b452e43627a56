"""The batch reader of prebuilt objects (``_runtime.read_prebuilt_objects``) takes only
what the packer's own reader takes, and finds what it finds: for real objects, bundles
and every truncation and byte flip of them, it either declines (the packer then reads
the file on its own path, which words the problem) or gives the same ELF image, its
sha256 and a metadata note that parses to the same metadata."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import pytest

from ukdpack import _runtime
from ukdpack.produce import codeobject
from ukdpack.produce.codeobject import CodeObjectError

OBJECTS = Path(__file__).resolve().parents[1] / "data" / "objects"


def _cases() -> list[bytes]:
    cases = []
    for name in ("split_kv.gfx90a.hsaco", "split_kv.gfx1030.bundle.hsaco"):
        data = (OBJECTS / name).read_bytes()
        cases.append(data)
        cases += [data[:n] for n in range(0, len(data), 13)]
        for i in range(0, len(data), 5):
            flipped = bytearray(data)
            flipped[i] ^= 0xFF
            cases.append(bytes(flipped))
    cases.append((OBJECTS / "split_kv.sm_90.cubin").read_bytes())  # not for the batch
    return cases


def _slow(data: bytes) -> tuple[str, object, object]:
    """What the packer's own path reads: the ELF image and metadata, or its refusal."""
    try:
        return "read", codeobject.elf_image(data), codeobject.metadata(data)
    except CodeObjectError as e:
        return "refused", str(e), None


def _fast(elf: bytes, note: bytes) -> tuple[str, object, object]:
    """What the pack reads from the batch's answer: the same, from the note it found."""
    try:
        return "read", elf, codeobject.note_metadata(note)
    except CodeObjectError as e:
        return "refused", str(e), None


def test_batch_agrees_with_the_packers_reader(tmp_path: Path) -> None:
    cases = _cases()
    paths = []
    for i, data in enumerate(cases):
        path = tmp_path / f"{i}.hsaco"
        path.write_bytes(data)
        paths.append(str(path))
    taken = 0
    for data, got in zip(cases, _runtime.read_prebuilt_objects(paths, 2), strict=True):
        if got is None:
            continue  # the packer reads it on its own path
        taken += 1
        elf, sha, note, _ = got
        assert elf is not None
        assert sha == hashlib.sha256(elf).hexdigest()
        # The same ELF and metadata, or the same refusal (a note that is no msgpack
        # document is refused alike, in the same words).
        assert _fast(elf, note) == _slow(data)
    # The real objects and most byte flips (in code and data) are taken: the fast path
    # is the path a good object goes.
    assert taken > len(cases) // 3
    assert _runtime.read_prebuilt_objects(paths[:1], 1)[0] is not None


def test_batch_declines_what_is_no_readable_file(tmp_path: Path) -> None:
    good = tmp_path / "good.hsaco"
    good.write_bytes((OBJECTS / "split_kv.gfx90a.hsaco").read_bytes())
    fifo = tmp_path / "fifo.hsaco"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.hsaco"
    folder.mkdir()
    missing = tmp_path / "missing.hsaco"
    got = _runtime.read_prebuilt_objects([str(fifo), str(folder), str(missing), str(good)], 2)
    assert got[:3] == [None, None, None]  # declined without blocking on the FIFO
    assert got[3] is not None


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_batch_keeps_the_order_of_its_paths(tmp_path: Path, threads: int) -> None:
    names = ["split_kv.gfx90a.hsaco", "split_kv.gfx1030.hsaco", "split_kv.gfx90a.bundle.hsaco"]
    paths = []
    for i in range(12):
        path = tmp_path / f"{i}.hsaco"
        path.write_bytes((OBJECTS / names[i % 3]).read_bytes())
        paths.append(str(path))
    got = _runtime.read_prebuilt_objects(paths, threads)
    for path, item in zip(paths, got, strict=True):
        assert item is not None
        assert item[0] == codeobject.elf_image(Path(path).read_bytes())


def test_frames_hold_the_image_the_archive_stores(tmp_path: Path) -> None:
    import zstandard

    paths = []
    for name in ("split_kv.gfx90a.hsaco", "split_kv.gfx1030.bundle.hsaco"):
        path = tmp_path / name
        path.write_bytes((OBJECTS / name).read_bytes())
        paths.append(str(path))
    plain = _runtime.read_prebuilt_objects(paths, 1)
    framed = _runtime.read_prebuilt_objects(paths, 2, 3)
    for a, b in zip(plain, framed, strict=True):
        assert a is not None and b is not None
        elf, sha, note, frame = b
        assert elf is None and a[3] is None  # the image or its frame, not both
        assert frame is not None and zstandard.frame_content_size(frame) == len(a[0] or b"")
        assert zstandard.ZstdDecompressor().decompress(frame) == a[0]
        assert (sha, note) == (a[1], a[2])


def test_spooled_records_are_the_frames_the_archive_stores(tmp_path: Path) -> None:
    """With a spool, each object's archive record (u32 length, then the frame) is in the
    spool at the offset it names, the records follow one another in the order of the
    paths, and nothing is returned in memory but the note."""
    import struct

    import zstandard

    paths = []
    for i in range(9):
        name = ("split_kv.gfx90a.hsaco", "split_kv.gfx1030.bundle.hsaco")[i % 2]
        path = tmp_path / f"{i}.hsaco"
        path.write_bytes((OBJECTS / name).read_bytes())
        paths.append(str(path))
    plain = _runtime.read_prebuilt_objects(paths, 1)
    spool = tmp_path / "spool"
    with spool.open("w+b") as f:
        f.write(b"earlier")  # records go after what the spool holds
        f.flush()
        spooled = _runtime.read_prebuilt_objects(paths, 3, 3, f.fileno())
    data = spool.read_bytes()
    spans = []
    for a, b in zip(plain, spooled, strict=True):
        assert a is not None and b is not None and a[0] is not None
        elf, sha, note, where = b
        assert elf is None and isinstance(where, tuple)
        offset, size, content = where
        assert offset >= len(b"earlier") and content == len(a[0])
        (length,) = struct.unpack_from("<I", data, offset)
        assert length == size - 4
        frame = data[offset + 4:offset + size]
        assert zstandard.ZstdDecompressor().decompress(frame) == a[0]
        assert (sha, note) == (a[1], a[2])
        spans.append((offset, offset + size))
    # One after another in the order of the paths, from the end of what was there.
    assert spans[0][0] == len(b"earlier")
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(spans))
    assert data[:7] == b"earlier" and spans[-1][1] == len(data)


def test_a_spooled_archive_is_the_archive_of_frames_in_memory(tmp_path: Path) -> None:
    """The archive written from spooled records is byte for byte the one written from
    the same frames in memory, across adjacent, reordered and mixed entries."""
    from ukdpack.files import FileRange
    from ukdpack.shard.archive import ArchiveWriter
    from ukdpack.spool import SpooledRecord

    paths = []
    for i, name in enumerate(("split_kv.gfx90a.hsaco", "split_kv.gfx90a.bundle.hsaco",
                              "split_kv.gfx90a.hsaco")):
        path = tmp_path / f"{i}.hsaco"
        path.write_bytes((OBJECTS / name).read_bytes())
        paths.append(str(path))
    framed = _runtime.read_prebuilt_objects(paths, 1, 3)
    spool = tmp_path / "spool"
    with spool.open("w+b") as f:
        spooled = _runtime.read_prebuilt_objects(paths, 1, 3, f.fileno())
        plain, ranged = ArchiveWriter("g", ["gfx90a"]), ArchiveWriter("g", ["gfx90a"])
        extra = codeobject.elf_image((OBJECTS / "split_kv.gfx90a.hsaco").read_bytes())
        # Entries in an order other than the spool's, one compressed by the writer.
        for key, i in (("k2", 2), ("k0", 0), ("k1", 1)):
            a, b = framed[i], spooled[i]
            assert a is not None and b is not None and isinstance(b[3], tuple)
            assert isinstance(a[3], bytes)
            plain.add(key, "gfx90a", None, frame=a[3])
            offset, size, content = b[3]
            ranged.add(key, "gfx90a", None,
                       frame=SpooledRecord(FileRange(f.fileno(), offset, size), content))
        plain.add("k3", "gfx90a", extra)
        ranged.add("k3", "gfx90a", extra)
        plain.write(tmp_path / "plain.kpack")
        ranged.write(tmp_path / "ranged.kpack")
        assert ranged.to_bytes() == plain.to_bytes()
    assert (tmp_path / "ranged.kpack").read_bytes() == (tmp_path / "plain.kpack").read_bytes()
    archive = _runtime.KpackArchive(str(tmp_path / "ranged.kpack"))
    assert archive.get("k1", "gfx90a") == codeobject.elf_image(Path(paths[1]).read_bytes())


@pytest.mark.parametrize("unnamed", [True, False])
def test_a_spool_of_one_archive_becomes_that_archive(tmp_path: Path, unnamed: bool) -> None:
    """A spool holding exactly one archive's records, in order, after room for its
    header is made that archive (the same inode, nothing copied) when it has no name;
    a spool that had a name is copied. The bytes are the same either way."""
    from ukdpack.files import FileRange
    from ukdpack.shard.archive import ArchiveWriter
    from ukdpack.spool import RECORDS_OFFSET, SpooledRecord

    paths = []
    for i, name in enumerate(("split_kv.gfx90a.hsaco", "split_kv.gfx90a.bundle.hsaco")):
        path = tmp_path / f"{i}.hsaco"
        path.write_bytes((OBJECTS / name).read_bytes())
        paths.append(str(path))
    framed = _runtime.read_prebuilt_objects(paths, 1, 3)
    plain = ArchiveWriter("g", ["gfx90a"])
    for i, got in enumerate(framed):
        assert got is not None and isinstance(got[3], bytes)
        plain.add(f"k{i}", "gfx90a", None, frame=got[3])
    plain.write(tmp_path / "plain.kpack")
    if unnamed:
        fd = os.open(tmp_path, os.O_RDWR | os.O_TMPFILE, 0o600)
    else:
        fd = os.open(tmp_path / "spool", os.O_RDWR | os.O_CREAT, 0o600)
        os.unlink(tmp_path / "spool")
    try:
        os.truncate(fd, RECORDS_OFFSET)
        spooled = _runtime.read_prebuilt_objects(paths, 2, 3, fd)
        ranged = ArchiveWriter("g", ["gfx90a"])
        for i, got in enumerate(spooled):
            assert got is not None and isinstance(got[3], tuple)
            offset, size, content = got[3]
            ranged.add(f"k{i}", "gfx90a", None,
                       frame=SpooledRecord(FileRange(fd, offset, size), content))
        ranged.write(tmp_path / "out" / "g.kpack")  # its folder made as it is named
        became = os.stat(tmp_path / "out" / "g.kpack").st_ino == os.fstat(fd).st_ino
    finally:
        os.close(fd)
    assert became == unnamed
    assert (tmp_path / "out" / "g.kpack").read_bytes() == (tmp_path / "plain.kpack").read_bytes()
    assert os.stat(tmp_path / "out" / "g.kpack").st_mode & 0o777 == 0o644
    assert sorted(os.listdir(tmp_path / "out")) == ["g.kpack"]  # no temporary name left
