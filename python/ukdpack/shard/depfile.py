"""Makefile-style depfiles for CMake: every file a pack read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ukdpack.files import write_atomic


class UnwritablePath(ValueError):
    """A path a Makefile depfile cannot express (one holding a line break)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _escape(path: str) -> str:
    if "\n" in path or "\r" in path:  # Make and Ninja have no escape for a line break
        raise UnwritablePath(path)
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def write_depfile(path: Path, target: str, deps: Iterable[str]) -> None:
    """``target: dep \\`` one dependency per line, sorted, each once; UnwritablePath (and
    nothing written) for a path holding a line break, which no depfile can name."""
    unique = sorted(set(deps))
    lines = [f"{_escape(target)}:"] + [f" {_escape(d)}" for d in unique]
    write_atomic(path, (" \\\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
