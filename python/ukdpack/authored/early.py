"""A tree's runtime load, started before the packer's modules are imported.

The load is the runtime's, on threads of its own with the GIL released; the imports
are Python's. ``ukdpack pack`` starts it as soon as it knows the root, and
``load_tree`` takes it when it asks for exactly the same load (else it loads again).
This module imports nothing but the extension, so starting costs no imports.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ukdpack import _runtime

_Key = tuple[str, tuple[str, ...], bool, tuple[str, ...]]


class _Started:
    def __init__(self, key: _Key) -> None:
        self.key = key
        self.dset: _runtime.DescriptorSet | None = None
        # A daemon, so that nothing but discard() waits for it.
        self.thread = threading.Thread(target=self._load, name="ukdpack-early-load",
                                       daemon=True)
        self.thread.start()

    def _load(self) -> None:
        root, exclude, authored, arches = self.key
        try:
            self.dset = _runtime.load_shard(root, exclude_folders=list(exclude),
                                            authored=authored, arches=list(arches))
        except Exception:  # whatever it was, load_tree loads again and says it
            self.dset = None


_started: _Started | None = None


def start(root: str, exclude_folders: Sequence[str], authored: bool,
          arches: Sequence[str]) -> None:
    """Start loading the tree at ``root`` as ``load_shard`` would with these arguments."""
    global _started
    _started = _Started((root, tuple(exclude_folders), authored, tuple(arches)))


def take(root: str, exclude_folders: Sequence[str], authored: bool,
         arches: Sequence[str]) -> _runtime.DescriptorSet | None:
    """The load started with exactly these arguments, once finished; None when none was
    (or it failed). A load is taken once."""
    global _started
    started, _started = _started, None
    if started is None or started.key != (root, tuple(exclude_folders), authored,
                                          tuple(arches)):
        return None
    started.thread.join()
    return started.dset


def discard() -> None:
    """Forget a load not taken (the command that started it ended without it), so no
    later load in this process takes a tree read before it. A load still running is
    waited for: a process that ends while the runtime's threads read the tree is
    aborted by their C++ teardown (a stop signal early in ``validate`` did that)."""
    global _started
    started, _started = _started, None
    if started is not None:
        started.thread.join()
