"""Archive records spooled to a file before their archive is written: what the producers
(which have the runtime's batch reader spool prebuilt objects' zstd frames) and the
archive writer (which copies the records from the spool, or adopts the spool as the
archive itself) share. A base module, so that the producers need not import the shard
layer: the kpack layout's record offset and the zstd level live here, and
``ukdpack.shard.archive`` reads them from here."""

from __future__ import annotations

from dataclasses import dataclass

from ukdpack.files import FileRange

#: Where a kpack archive's data (its frame count, then its records) starts: after the
#: 16-byte header and its padding.
DATA_OFFSET = 64
#: Where the first record (u32 frame length, then the frame) of a zstd archive starts:
#: after the header, its padding and the u32 frame count. A spool whose records start
#: here can become the archive itself.
RECORDS_OFFSET = DATA_OFFSET + 4
DEFAULT_LEVEL = 3  # zstd level of a pack's archives (and of the frames spooled for them)


@dataclass(frozen=True)
class SpooledRecord:
    """An archive record (u32 frame length, then the zstd frame) that the prebuilt batch
    reader already wrote to a spool file: the writer copies it from there."""

    where: FileRange
    content_size: int  # the image's size, as the frame's header records it
