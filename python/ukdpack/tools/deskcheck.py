"""``ukdpack desk-check SHARD``: the whole-set rules over a packed shard.

The shard is read by the C++ runtime's loader (``tree.load_tree(shard,
authored=False)``), which applies every rule it applies to an authored root; rule
4.4 takes its packed form there (one toc key, one sha256). On top, what only a
packed shard can get wrong: every launch is in packed form; every launch's code loads
as the runtime loads it (its library, the toc key and arch in that archive, the
digest, the symbol: the runtime's findings, ``Shard.every_launch_findings``, in its
words); archive entries no launch claims are noted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ukdpack import jsonpath
from ukdpack.errors import Problem, errors_only
from ukdpack.tools.shard import PACKED_KIND, Shard, load_shard, ships_as_authored
from ukdpack.words import count


@dataclass(frozen=True)
class DeskCheck:
    """The verdict on one shard: every problem, notes included."""

    shard: Shard
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not errors_only(self.problems)

    def summary(self) -> str:
        t = self.shard.tree
        counts = (f"{count(len(self.shard.kdps()), 'pack')}, {count(len(t.members), 'kernel')}, "
                  f"{count(len(self.shard.launches), 'launch')}")
        if self.ok:
            return f"desk-check passed: {counts}"
        n = len(errors_only(self.problems))
        return f"desk-check failed: {n} error{'s' if n != 1 else ''} ({counts})"


def _archive_problems(shard: Shard) -> list[Problem]:
    """Every launch packed; what no launch claims, noted. Whether a launch's archive holds
    its toc key is the runtime's finding, not judged here."""
    problems: list[Problem] = []
    claimed: set[tuple[str, str, str]] = set()
    named: set[str] = set()
    for ln in shard.launches:
        if ships_as_authored(ln.source.kind):
            continue  # no code object
        if not ln.packed:
            problems.append(Problem(ln.ukd.file, jsonpath.key(ln.json_path, "kind"),
                                    f"{ln.label()}: kind '{ln.source.kind}' in a packed shard; "
                                    f"the packer writes every code object as kind '{PACKED_KIND}'"))
            continue
        opened = shard.archive_of(ln)
        if opened.archive is None:
            continue  # the runtime's finding at the launch says why
        named.add(opened.rel)
        claimed.update((opened.rel, ln.toc_key, t) for a in shard.arches_of(ln.member)
                       for t in shard.entry_targets(ln, opened.archive, a))
    for rel in sorted(set(shard.archive_files()) | named):
        opened = shard.open_archive(rel)
        if opened.archive is None:
            if rel not in named:  # a named one was reported at its launches
                problems.append(Problem(rel, "", str(opened.error)))
            continue
        if rel not in named:
            problems.append(Problem(rel, "", "no launch of the shard names this archive; it "
                                    "ships for nothing", "note"))
            continue
        for key, arch in opened.entries():
            if (rel, key, arch) not in claimed:
                problems.append(Problem(rel, "", f"entry '{key}' for {arch} is claimed by no "
                                        "launch; it ships for nothing", "note"))
    return problems


def desk_check(shard_path: Path, arch: str | None = None,
               exclude_folders: Sequence[str] = ()) -> DeskCheck:
    """Every whole-set problem of the packed shard at ``shard_path``."""
    shard = load_shard(shard_path, arch, exclude_folders)
    problems = shard.with_runtime(shard.problems, _archive_problems(shard), every_launch=True)
    order = {f.rel: i for i, f in enumerate(shard.tree.files)}
    problems.sort(key=lambda p: (order.get(p.file, len(order)), p.file, p.path))
    return DeskCheck(shard, tuple(problems))
