"""``ukdpack validate``: every authored-tree rule, no compile."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ukdpack import _runtime
from ukdpack.authored import rules
from ukdpack.authored.load import Tree, load_tree
from ukdpack.errors import Problem
from ukdpack.words import count


@dataclass(frozen=True)
class Validation:
    """The verdict on a root: every problem, notes included."""

    tree: Tree
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def valid(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        packs, kernels = self.tree.counts()
        counts = (f"{count(len(self.tree.files), 'descriptor')}, {count(packs, 'pack')}, "
                  f"{count(kernels, 'kernel')}")
        if self.valid:
            return f"valid: {counts}"
        n = len(self.errors)
        return f"invalid: {n} error{'s' if n != 1 else ''} ({counts})"


def check_tree(tree: Tree, missing_prebuilt: rules.MissingPrebuilt = "error") -> list[Problem]:
    """Every problem of the tree (the runtime's and the packer's), sorted by file."""
    problems = rules.check(tree, missing_prebuilt)
    order = {f.rel: i for i, f in enumerate(tree.files)}
    return sorted(problems, key=lambda p: (order.get(p.file, -1), p.path))


def validate(root: Path, exclude_folders: Iterable[str] = ()) -> Validation:
    """Read ``root`` and check every rule over every arch it names."""
    tree = load_tree(root, exclude_folders)
    # validate judges descriptors: an object DVC has not fetched yet is a warning here
    # (pack fails the arches that need it).
    problems = check_tree(tree, missing_prebuilt="warning")
    if not tree.files and not any(p.severity == "error" for p in problems):
        # A root with nothing to judge is a wrong path, not a pass (ukdpack-validate agrees).
        problems.append(Problem(".", "", "holds no descriptor file (<name>.<type>.json): nothing "
                                "to validate; name the folder that holds the descriptors",
                                code=_runtime.Code.NO_DESCRIPTORS))
    # Reachability means little while descriptors fail: say it of valid trees only.
    if not any(p.severity == "error" for p in problems):
        problems += tree.unreachable_note()
    return Validation(tree, tuple(problems))
