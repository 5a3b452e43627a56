"""Paths named by descriptors: relative to the descriptor's folder, never
falling back to the root, never leaving it (directly or through a link)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Resolved:
    """A path inside the root: root-relative POSIX form and absolute path."""

    rel: str
    path: Path


class PathRefused(ValueError):
    """A path that is absolute, leaves the root, or names nothing (then ``missing`` is the
    path that was looked for)."""

    def __init__(self, message: str, missing: Path | None = None) -> None:
        super().__init__(message)
        self.missing = missing


def _realpath(path: str, memo: dict[str, str] | None) -> str:
    if memo is None:
        return os.path.realpath(path)
    found = memo.get(path)
    if found is None:
        found = memo[path] = os.path.realpath(path)
    return found


def resolve(root: Path, folder: PurePosixPath | str, name: str, *, must_exist: bool = True,
            what: str = "file", realpaths: dict[str, str] | None = None) -> Resolved:
    """Resolve ``name`` against the root-relative ``folder``; raise PathRefused when refused.
    ``realpaths`` memoizes the real paths of folders across calls (one tree's walk: a
    tree names thousands of files in a few folders)."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise PathRefused(f"expected a path relative to the descriptor's folder, found an "
                          f"absolute path '{name}'")
    joined = posixpath.normpath(posixpath.join(str(folder), name.replace("\\", "/")))
    if joined == ".." or joined.startswith("../"):
        raise PathRefused(f"path '{name}' leaves the descriptor root")
    candidate = root / joined
    real_root = _realpath(str(root), realpaths)
    parent, base = posixpath.split(joined)
    if os.path.islink(candidate):
        real = os.path.realpath(candidate)
    else:  # not a link itself: its real path is its folder's (normpath left no . or ..)
        real = os.path.join(_realpath(str(root / parent), realpaths) if parent else real_root,
                            base)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise PathRefused(f"path '{name}' leaves the descriptor root through a symbolic link")
    if must_exist and not candidate.is_file():
        where = f"'{folder}'" if str(folder) not in ("", ".") else "the root"
        found = "a folder" if candidate.is_dir() else "nothing"
        raise PathRefused(f"{what} '{name}' not found: expected {joined} (paths are relative "
                          f"to the descriptor's folder, {where}), found {found} there",
                          missing=candidate)
    return Resolved(joined, candidate)
