"""``python kill_runner.py ARGS...``: ``ukdpack ARGS...`` that SIGKILLs itself at a named
point, so the kill tests reach the narrow publish windows a timer rarely hits.

``UKDPACK_TEST_KILL_AT=<point>:<n>`` kills on the n-th (1-based) call of the point:
``before``-points die on entry, ``after``-points once the call returned, ``partial``
ones after removing one file of the tree they were asked to remove."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ukdpack.cli import main
from ukdpack.shard import archive as kpack
from ukdpack.shard import publish

#: point -> (object holding the function, its name, die before or after the call)
POINTS: dict[str, tuple[Any, str, str]] = {
    "archive-write": (kpack.ArchiveWriter, "write", "before"),
    "archive-written": (kpack.ArchiveWriter, "write", "after"),
    "staging-write": (publish, "write_file", "after"),
    "fsync": (publish, "_fsync_tree", "before"),
    "exchange": (publish, "_exchange", "before"),
    "exchanged": (publish, "_exchange", "after"),
    "rmtree": (publish, "_rmtree", "before"),
    "rmtree-partial": (publish, "_rmtree", "partial"),
}


def _arm(point: str, nth: int) -> None:
    owner, name, when = POINTS[point]
    real: Callable[..., Any] = getattr(owner, name)
    calls = 0

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if when == "before" and calls == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        if when == "partial" and calls == nth:  # a kill halfway through removing a tree
            victim = next((p for p in sorted(Path(args[0]).rglob("*")) if p.is_file()), None)
            if victim is not None:
                victim.unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if when == "after" and calls == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapper)


if __name__ == "__main__":
    spec = os.environ.get("UKDPACK_TEST_KILL_AT")
    if spec:
        point, nth = spec.rsplit(":", 1)
        _arm(point, int(nth))
    raise SystemExit(main(sys.argv[1:]))
