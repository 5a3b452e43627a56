"""Python's cycle collector, paused while the packer builds and walks its large object
graphs. A tree of 100,000 kernels is millions of objects, and each full collection
walks them all: collections grew a pack's time faster than its tree (measured at
100,000 kernels: 19.6 s with the collector, 14.6 s without). What the packer makes
holds few reference cycles, and its process ends with the pack."""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused(*, freeze: bool = False) -> Iterator[None]:
    """The collector off inside, and on again after if it was on. ``freeze`` moves what
    is alive at the end into the permanent generation, which later collections skip."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


#: The free heap below which a trim hands nothing back. The next phase faults those
#: pages in again, so a trim of little costs more than it saves: an edit of a
#: 1,000-kernel tree had 2-8 MiB free at each of its three trims (about 1,100 page
#: faults, 25 ms of CPU). A 10,000-kernel pack has 19-27 MiB free at each of its trims.
TRIM_FROM_BYTES = 16 << 20


def trim() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing) when they are ``TRIM_FROM_BYTES`` or more (``mallinfo2``, every arena; where
    glibc lacks it, always). Memory a thread's arena freed (the runtime's set, loaded on
    the loader's threads) is otherwise kept for those threads, and a pack's next phases
    grow its peak on top of it."""
    libc = _libc()
    if libc.malloc_trim is not None and (libc.free_bytes is None
                                         or libc.free_bytes() >= TRIM_FROM_BYTES):
        libc.malloc_trim(0)


class _Libc:
    """glibc's ``malloc_trim`` and the free bytes of ``mallinfo2``, each None where the C
    library lacks it."""

    def __init__(self) -> None:
        import ctypes  # here: only a pack that has freed its large parts trims

        class MallInfo2(ctypes.Structure):
            _fields_ = [(name, ctypes.c_size_t) for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                "uordblks", "fordblks", "keepcost")]

        c = ctypes.CDLL(None)
        self.malloc_trim = getattr(c, "malloc_trim", None)
        info = getattr(c, "mallinfo2", None)
        if info is not None:
            info.restype = MallInfo2
        self.free_bytes = (lambda: int(info().fordblks)) if info is not None else None


@functools.lru_cache(maxsize=1)
def _libc() -> _Libc:
    return _Libc()
