"""The walk of an authored descriptor root (SPEC 2.1).

Only ``*.json`` files are descriptors, typed by the token before ``.json``.
Dot-prefixed paths, ``*.json`` files without a known type token, excluded
folders and symbolic links to folders are skipped, and each skip is reported.
Files are listed in sorted path order, so every run sees the same order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ukdpack.errors import Problem

DESCRIPTOR_TYPES: tuple[str, ...] = ("ukd", "kdp", "udd", "ued", "kmd", "umd", "uhd")

#: The folder of a shard that holds its archive; an authored root may not use it.
ARCHIVE_FOLDER = "kpack"


@dataclass(frozen=True)
class DescriptorFile:
    """One descriptor file: its root-relative POSIX path, absolute path and type."""

    rel: str
    path: Path
    type: str


@dataclass(frozen=True)
class Skipped:
    """A path the walk left out, and why."""

    rel: str
    why: str

    def line(self) -> str:
        return f"skipping {self.rel}: {self.why}"


@dataclass(frozen=True)
class WalkResult:
    files: tuple[DescriptorFile, ...]
    skipped: tuple[Skipped, ...]
    problems: tuple[Problem, ...]


def descriptor_type(name: str) -> str | None:
    """``foo.kdp.json`` -> ``kdp``; None when the name has no known type token."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[-1] == "json" and parts[-2] in DESCRIPTOR_TYPES and parts[0]:
        return parts[-2]
    return None


def walk(root: Path, exclude_folders: Iterable[str] = (), *, shard: bool = False) -> WalkResult:
    """List the descriptors under ``root`` (recursively, sorted) and what was skipped.
    In a shard (``shard``) the top-level ``kpack`` folder is the archive folder: not
    walked, not refused."""
    excluded = set(exclude_folders)
    files: list[DescriptorFile] = []
    skipped: list[Skipped] = []
    problems: list[Problem] = []
    if not root.is_dir():
        problems.append(Problem(str(root), "", "expected a descriptor root folder, found "
                                + ("a file" if root.exists() else "nothing at that path")))
        return WalkResult((), (), tuple(problems))

    def visit(folder: Path, rel_folder: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            problems.append(Problem(rel_folder or ".", "", f"cannot list folder: {e.strerror}"))
            return
        for entry in entries:
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.name.startswith("."):
                if is_dir or entry.name.endswith(".json"):
                    skipped.append(Skipped(rel, "dot-prefixed path"))
                continue
            if entry.is_symlink() and entry.is_dir():
                skipped.append(Skipped(rel, "symbolic link to a folder (not followed)"))
                continue
            if is_dir:
                if not rel_folder and entry.name == ARCHIVE_FOLDER:
                    if shard:
                        continue
                    problems.append(Problem(rel, "", f"a top-level folder named '{ARCHIVE_FOLDER}' "
                                            "would collide with the archive folder of a shard; "
                                            "rename it"))
                    continue
                if entry.name in excluded:
                    skipped.append(Skipped(rel, "excluded folder (--exclude-folder)"))
                    continue
                visit(Path(entry.path), rel)
                continue
            if not entry.name.endswith(".json"):
                continue
            dtype = descriptor_type(entry.name)
            if dtype is None:
                skipped.append(Skipped(rel, "no descriptor type token; name it "
                                       "<name>.<type>.json with type one of "
                                       + ", ".join(DESCRIPTOR_TYPES)))
                continue
            files.append(DescriptorFile(rel, Path(entry.path), dtype))

    visit(root, "")
    files.sort(key=lambda f: f.rel)
    return WalkResult(tuple(files), tuple(skipped), tuple(problems))
