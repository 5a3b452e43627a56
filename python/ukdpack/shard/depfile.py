"""Makefile-style depfiles for CMake: every file a pack read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ukdpack.files import write_atomic


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def write_depfile(path: Path, target: str, deps: Iterable[str]) -> None:
    """``target: dep \\`` one dependency per line, sorted, each once."""
    unique = sorted(set(deps))
    lines = [f"{_escape(target)}:"] + [f" {_escape(d)}" for d in unique]
    write_atomic(path, (" \\\n".join(lines) + "\n").encode())
