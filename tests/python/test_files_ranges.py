"""``write_atomic`` with file ranges (how an archive takes the records the prebuilt
batch reader spooled): the bytes land in order whether the kernel copies them
(copy_file_range), copies part of them, or cannot (another file system)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ukdpack import files
from ukdpack.files import FileRange, read_range, write_atomic


def _spool(tmp_path: Path) -> tuple[int, bytes]:
    data = bytes(range(256)) * 4096  # 1 MiB, every offset distinguishable by content
    fd = os.open(tmp_path / "spool", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, data)
    return fd, data


def _chunks(fd: int) -> tuple[list[bytes | FileRange], bytes]:
    """Small and large bytes, adjacent ranges (copied as one), a range read backwards."""
    data = bytes(range(256)) * 4096
    big = b"B" * (1 << 17)
    chunks: list[bytes | FileRange] = [b"head", FileRange(fd, 10, 1000), FileRange(fd, 1010, 5),
                                       big, FileRange(fd, 500_000, 300_000), b"x",
                                       FileRange(fd, 0, 3), b"tail"]
    want = (b"head" + data[10:1015] + big + data[500_000:800_000] + b"x" + data[:3] + b"tail")
    return chunks, want


@pytest.mark.parametrize("kernel", ["copies", "copies part", "cannot"])
def test_ranges_land_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              kernel: str) -> None:
    fd, _ = _spool(tmp_path)
    real = os.copy_file_range
    calls: list[int] = []

    def partial(src: int, dst: int, count: int, offset_src: int | None = None,
                offset_dst: int | None = None) -> int:
        calls.append(count)
        return real(src, dst, min(count, 4097), offset_src, offset_dst)

    def refused(*_: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    if kernel == "copies part":
        monkeypatch.setattr(files.os, "copy_file_range", partial)
    elif kernel == "cannot":
        monkeypatch.setattr(files.os, "copy_file_range", refused)
    chunks, want = _chunks(fd)
    try:
        write_atomic(tmp_path / "out", chunks)
    finally:
        os.close(fd)
    assert (tmp_path / "out").read_bytes() == want
    if kernel == "copies part":
        assert calls[0] == 1005  # the two adjacent ranges went as one copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "spool"]


def test_a_range_past_the_end_of_its_file_fails_and_writes_nothing(tmp_path: Path) -> None:
    fd, data = _spool(tmp_path)
    try:
        with pytest.raises(OSError):
            read_range(FileRange(fd, len(data) - 10, 20))
        with pytest.raises(OSError):
            write_atomic(tmp_path / "out", [b"x", FileRange(fd, len(data) - 10, 20)])
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool"]  # no temporary file left
