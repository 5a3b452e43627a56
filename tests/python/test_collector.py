"""The cycle collector is paused while a tree loads and a pack runs, and is on again
after, as it was: a library that calls the packer keeps its collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ukdpack import collector


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_turns_it_off_and_back_on() -> None:
    gc.enable()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause found it off and leaves it so
    assert gc.isenabled()


def test_paused_leaves_an_off_collector_off_even_when_raising() -> None:
    gc.disable()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_freeze_moves_what_is_alive_out_of_collections() -> None:
    gc.unfreeze()
    with collector.paused(freeze=True):
        kept = [[i] for i in range(1000)]
    assert gc.get_freeze_count() >= len(kept)


def test_a_pack_runs_with_it_off_and_gives_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from ukdpack.shard import pack as packing

    seen: list[bool] = []

    def inner(opts: object, reporter: object) -> packing.PackReport:
        seen.append(gc.isenabled())
        return packing.PackReport()

    monkeypatch.setattr(packing, "_pack", inner)
    gc.enable()
    packing.pack(None, None)  # type: ignore[arg-type]
    assert seen == [False] and gc.isenabled()


def test_trim_hands_back_only_a_large_free_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trim of a few free MiB would be faulted in again by the next phase: it is
    skipped below ``TRIM_FROM_BYTES`` and done from there on (and always where the C
    library cannot say how much is free)."""
    trims: list[int] = []
    free = [0]

    class Libc:
        def __init__(self, knows: bool) -> None:
            self.malloc_trim = trims.append
            self.free_bytes = (lambda: free[0]) if knows else None

    monkeypatch.setattr(collector, "_libc", lambda: Libc(True))
    for free[0] in (0, 2 << 20, collector.TRIM_FROM_BYTES - 1):
        collector.trim()
    assert trims == []
    free[0] = collector.TRIM_FROM_BYTES
    collector.trim()
    assert trims == [0]
    monkeypatch.setattr(collector, "_libc", lambda: Libc(False))
    collector.trim()
    assert trims == [0, 0]


def test_trim_reads_this_c_librarys_free_heap() -> None:
    """On glibc (this machine's), both functions are found and the free heap reads as a
    byte count, so the threshold is really applied."""
    libc = collector._libc()
    assert libc.malloc_trim is not None and libc.free_bytes is not None
    assert 0 <= libc.free_bytes() < 1 << 40
    collector.trim()
