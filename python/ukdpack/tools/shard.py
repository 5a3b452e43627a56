"""A packed shard as the shard tools read it (inspect, verify, desk-check, diff).

Descriptors are read by the packer's own reader (``tree.load_tree(shard,
authored=False)``), so a shard is held to the same shapes as an authored tree;
the archive a ``library`` names is located by the runtime's own rule
(``_runtime.resolve_library``: inside the shard, no symbolic link on the way) and
opened with the C++ runtime's kpack reader, so what a tool finds (or refuses) is
what the runtime would. A folder holding no shard is refused by the runtime's
judgement too (``_runtime.no_shard_reason``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ukdpack import _runtime, jsonpath
from ukdpack.authored.kinds import KINDS, PACKED
from ukdpack.authored.load import ARCHIVE_FOLDER, Member, Tree, load_tree
from ukdpack.authored.model import Kdp, Source, Ukd, id_key
from ukdpack.errors import Problem, UkdError, UsageError
from ukdpack.shard.runtime_check import RuntimeFinding, launch_finding, launch_findings

#: What a finding is about: ("launch", kernel id key, launch name or None) for one of a
#: kernel's launches, ("kernel", kernel id key, None) for a kernel as a whole, else
#: ("at", file, JSON path).
Subject = tuple[str, str, str | None]

#: The field of a packed source that names its archive, relative to the descriptor.
LIBRARY = "library"


# -- what the shard tools ask of a kind --------------------------------------------------
# In one place, read from the kinds table (the runtime's, through authored.kinds), so
# that the tools name no kind.


def _producer(kind_name: str) -> str | None:
    found = KINDS.get(kind_name)
    return found.producer if found is not None else None


def is_archive_member(kind_name: str) -> bool:
    """Whether a launch of this kind has its code object in the shard's archive (the
    packed form the packer writes)."""
    found = KINDS.get(kind_name)
    return found is not None and found.packed


def ships_as_authored(kind_name: str) -> bool:
    """Whether a launch of this kind has no code object: its source ships as authored."""
    return _producer(kind_name) == "none"


def is_prebuilt(kind_name: str) -> bool:
    """Whether the root holds a launch of this kind's code object as a file."""
    return _producer(kind_name) == "prebuilt"


#: The kind of every packed launch, for messages.
PACKED_KIND = PACKED


def kernel_label(ukd: Ukd) -> str:
    """``kernel 'x' (id I)`` for messages, worded by the runtime as its own diagnostics word it."""
    return _runtime.kernel_label(ukd.name, ukd.id)


def launch_label(ukd: Ukd, launch: str | None) -> str:
    """``kernel 'x' (id I) launch 'produce'`` (or ``kernel 'x' (id I, single launch)``) for
    messages, worded by the runtime as its own diagnostics word it."""
    return _runtime.launch_label(ukd.name, ukd.id, launch)


def describe_signature(signature: Sequence[Mapping[str, Any]]) -> str:
    """``(global_buffer 8@0, by_value 4@16)``: a signature on one line."""
    parts = []
    for arg in signature:
        name = f" {arg['name']}" if "name" in arg else ""
        parts.append(f"{arg.get('kind')}{name} {arg.get('size')}@{arg.get('offset')}")
    return f"({', '.join(parts)})"


@dataclass(frozen=True)
class ShardLaunch:
    """One launch of one kernel of a shard, with what its packed entry records."""

    member: Member
    name: str | None  # None for a single-launch kernel
    source: Source

    @property
    def ukd(self) -> Ukd:
        return self.member.ukd

    @property
    def packed(self) -> bool:
        """Whether the launch has a packed code object (its kind's are archive members)."""
        return is_archive_member(self.source.kind)

    @property
    def toc_key(self) -> str:
        return str(self.source.get("toc_key", ""))

    @property
    def symbol(self) -> str:
        return str(self.source.get("symbol", ""))

    @property
    def sha256(self) -> str:
        return str(self.source.get("sha256", ""))

    @property
    def signature(self) -> list[dict[str, Any]]:
        return [dict(a) for a in self.source.get("signature", [])]

    @property
    def json_path(self) -> str:
        return self.source.json_path

    def label(self) -> str:
        return launch_label(self.ukd, self.name)


@dataclass(frozen=True)
class Opened:
    """An archive of the shard: opened by the runtime's reader, or why it could not be."""

    rel: str  # shard-relative path
    archive: _runtime.KpackArchive | None
    error: str | None = None

    def entries(self) -> list[tuple[str, str]]:
        """Every (toc key, arch) the archive holds, sorted."""
        if self.archive is None:
            return []
        a = self.archive
        toc_keys, arches = a.keys(), a.arches()  # the C++ reader is not iterable
        return [(key, arch) for key in toc_keys for arch in arches
                if a.entry(key, arch) is not None]


@dataclass(frozen=True)
class Shard:
    """A packed shard: its folder, its arch, its descriptors and their problems."""

    root: Path
    arch: str | None
    tree: Tree
    problems: tuple[Problem, ...]
    _archives: dict[str, Opened] = field(default_factory=dict, repr=False, compare=False)
    #: each (folder, library) pair's answer: a shard's launches name a few archives
    _located: dict[tuple[str, str], tuple[str | None, str | None]] = field(
        default_factory=dict, repr=False, compare=False)
    #: The runtime's archive cache for loading launch code one launch at a time: each
    #: archive opened once.
    _loads: _runtime.ArchiveCache = field(default_factory=_runtime.ArchiveCache, repr=False,
                                          compare=False)

    @functools.cached_property
    def launches(self) -> tuple[ShardLaunch, ...]:
        """Every launch of every kernel, in file order, launches by name."""
        return tuple(ShardLaunch(m, name, src) for m in self.tree.members
                     for name, src in m.ukd.launches)

    @functools.cached_property
    def _launches_by_kernel(self) -> dict[str, dict[str | None, ShardLaunch]]:
        # Grouped once: a tool asks for every kernel's launches (a scan per kernel was
        # quadratic: 42 s to verify 10,000 kernels).
        out: dict[str, dict[str | None, ShardLaunch]] = {}
        for ln in self.launches:
            out.setdefault(ln.ukd.key, {})[ln.name] = ln
        return out

    def launches_of(self, ukd: Ukd) -> dict[str | None, ShardLaunch]:
        """The launches of one kernel by name (None for a single launch)."""
        return dict(self._launches_by_kernel.get(ukd.key, {}))

    def locate_archive(self, launch: ShardLaunch) -> tuple[str | None, str | None]:
        """(shard-relative path, None) of the archive a packed launch names, or (None, the
        runtime's refusal) when its ``library`` leaves the shard, goes through a symbolic
        link or names no file: the runtime's own rule, not a copy of it."""
        asked = (str(launch.ukd.folder), str(launch.source.get(LIBRARY, "")))
        found = self._located.get(asked)
        if found is None:
            found = self._located[asked] = _runtime.resolve_library(str(self.root), *asked)
        return found

    def open_archive(self, rel: str) -> Opened:
        """The archive at shard-relative ``rel`` (a path the runtime's rule accepted),
        opened once."""
        found = self._archives.get(rel)
        if found is None:
            try:
                found = Opened(rel, _runtime.KpackArchive(str(self.root / rel)))
            except ValueError as e:  # KpackError: the reader's own message
                found = Opened(rel, None, str(e))
            self._archives[rel] = found
        return found

    def archive_of(self, launch: ShardLaunch) -> Opened:
        """The archive a packed launch names; ``error`` says why there is none."""
        rel, refused = self.locate_archive(launch)
        if rel is None:
            return Opened(str(launch.source.get(LIBRARY, "")), None, refused)
        return self.open_archive(rel)

    def archive_files(self) -> list[str]:
        """Shard-relative paths of the ``*.kpack`` files in the shard's archive folder that
        the runtime could open: one reached through a symbolic link (the folder or the
        file) is left out, as the runtime refuses every library naming it."""
        folder = self.root / ARCHIVE_FOLDER
        if not folder.is_dir():
            return []
        found = []
        for p in folder.iterdir():
            rel = f"{ARCHIVE_FOLDER}/{p.name}"
            if p.name.endswith(".kpack") and \
                    _runtime.resolve_library(str(self.root), "", rel)[0] is not None:
                found.append(rel)
        return sorted(found)

    def arches_of(self, member: Member) -> tuple[str, ...]:
        """The arches a kernel's code is looked up for: the shard's, else the kernel's own
        (its UKD arch, else its pack's)."""
        if self.arch is not None:
            return (self.arch,)
        return tuple(member.ukd.arch or member.kdp.arch)

    def entry_targets(self, launch: ShardLaunch, archive: Any, arch: str) -> tuple[str, ...]:
        """The target IDs a launch's entries are filed under for ``arch``: each feature
        variant its ``targets`` records, else the first of the runtime's candidates
        (the arch, with fewer features, its generic family) the archive holds; the arch
        itself when none is held (for the message that says so)."""
        targets = launch.source.get("targets")
        if isinstance(targets, dict) and targets:
            return tuple(sorted(str(t) for t in targets))
        for target in _runtime.compatible_targets(arch):
            if (launch.toc_key, target) in archive:
                return (str(target),)
        return (arch,)

    def kdps(self) -> list[Kdp]:
        return self.tree.of_type(Kdp)

    @functools.cached_property
    def runtime_findings(self) -> tuple[RuntimeFinding, ...]:
        """What the runtime's state manager finds loading every launch's code for the
        shard's arch (drops, and the launches of each kept kernel: library, archive, toc
        entry, digest, target, symbol), each keyed by the kernel id and launch name it is
        about: the very check a consuming library's load makes, so a tool never passes
        what the runtime refuses."""
        if self.arch is None or self.tree.dset is None:
            return ()
        return tuple(launch_findings(self.tree.dset, self.arch, None))

    @functools.cached_property
    def every_launch_findings(self) -> tuple[RuntimeFinding, ...]:
        """``runtime_findings``, and what the same code (``_runtime.load_launch_code``)
        finds loading each launch the state manager does not load: a dropped kernel's, or
        every one when the shard's arch is unknown (then for each arch its kernel names).
        The tools that judge every launch's code (verify, desk-check) judge it so."""
        dset = self.tree.dset
        if dset is None:
            return ()
        found = list(self.runtime_findings)
        dropped = {id_key(f.kernel) for f in found if f.whole_kernel and f.kernel is not None}
        seen = {f.problem for f in found}
        for ln in self.launches:
            if not ln.packed or (self.arch is not None and ln.ukd.key not in dropped):
                continue
            for arch in self.arches_of(ln.member):
                refused = self._refusal(ln, arch)
                if refused is not None and refused.problem not in seen:
                    seen.add(refused.problem)
                    found.append(refused)
        return tuple(found)

    def launch_code(self, launch: ShardLaunch) -> bytes | None:
        """The code object of a packed launch as the runtime loads it for the shard's arch,
        every integrity check passed; None when it refuses (``every_launch_findings`` holds
        its finding) or the shard's arch is unknown."""
        dset = self.tree.dset
        if dset is None or self.arch is None:
            return None
        try:
            return bytes(_runtime.load_launch_code(dset, launch.ukd.id, launch.name, self.arch,
                                                   self._loads))
        except _runtime.RuntimeCheckError:
            return None

    def _refusal(self, launch: ShardLaunch, arch: str) -> RuntimeFinding | None:
        """The runtime's finding loading one launch's code for ``arch``, or None."""
        assert self.tree.dset is not None
        try:
            _runtime.load_launch_code(self.tree.dset, launch.ukd.id, launch.name, arch,
                                      self._loads)
        except _runtime.RuntimeCheckError as e:
            return launch_finding(e.diagnostic, launch.ukd.id, launch.name)
        return None

    def with_runtime(self, problems: Sequence[Problem], own: Sequence[Problem] = (),
                     every_launch: bool = False) -> list[Problem]:
        """``problems`` (the shard's reading and rules, and a tool's wording of a runtime
        refusal it asked for), a tool's ``own`` problems (none restates a runtime finding:
        the tools recompute none, so they stand beside the runtime's), then each of the
        runtime's findings that no problem already tells. A problem with a code (a rule's)
        tells one with its code about the same launch or kernel, or about what holds it
        (the kernel, its pack's kernel list, its launches, the file); a problem without
        one tells any finding about the same launch or kernel; an archive a problem finds
        unreadable tells the findings of the launches naming it. ``every_launch``: the
        findings are ``every_launch_findings``."""
        errors = [p for p in problems if p.severity == "error"]
        uncoded = {self.subject(p) for p in errors if not p.code}
        coded = {(self.subject(p), p.code) for p in errors if p.code}
        broken = {p.file for p in errors}  # an archive a tool found unreadable is one
        by_launch = {_subject("launch", ln.ukd.key, ln.name): ln for ln in self.launches
                     if ln.packed}

        def told(f: RuntimeFinding) -> bool:
            r, about = f.problem, self._finding_subject(f)
            # Two rules' findings about one launch (a toc key named with two digests, the
            # digest its archive entry does not have) are both the runtime's verdict.
            if about in uncoded or (about, r.code) in coded:
                return True
            holders = self._holders(about, r.file)
            if any(p.code == r.code and (p.file, p.path) in holders for p in errors if p.code):
                return True
            ln = by_launch.get(about)
            return ln is not None and self.archive_of(ln).rel in broken

        findings = self.every_launch_findings if every_launch else self.runtime_findings
        return [*problems, *own, *(f.problem for f in findings if not told(f))]

    def subject(self, problem: Problem) -> Subject:
        """What a problem is about: the launch whose source holds its path (the runtime's
        ``DescriptorSet.launch_at``: kernel id and launch name), else the kernel it names,
        else its own place (file, JSON path)."""
        dset = self.tree.dset
        at = dset.launch_at(problem.file, problem.path) if dset is not None else None
        if at is not None:
            return _subject("launch", id_key(at[0]), at[1])
        key = self._kernel_at.get((problem.file, problem.path))
        if key is not None:
            return _subject("kernel", key, None)
        return _subject("at", problem.file, problem.path)

    @functools.cached_property
    def _kernel_at(self) -> dict[tuple[str, str], str]:
        return {(m.ukd.file, m.ukd.json_path): m.ukd.key for m in self.tree.members}

    @functools.cached_property
    def _members(self) -> dict[str, Member]:
        return {m.ukd.key: m for m in self.tree.members}

    def _holders(self, about: Subject, file: str) -> set[tuple[str, str]]:
        """The places (file, JSON path) a finding with the same code tells a runtime
        finding about ``about`` from: its whole file; for a kernel's, also the kernel, the
        list of its pack holding it and, for one of its launches, its launches."""
        places = {(file, ""), (file, "$")}
        m = self._members.get(about[1]) if about[0] != "at" else None
        if m is not None:
            places.add((m.ukd.file, m.ukd.json_path))
            if m.ukd.inline:
                places.add((m.ukd.file, jsonpath.key("$", "kernelDescriptors")))
            if about[0] == "launch":
                places.add((m.ukd.file, m.ukd.launches_path))
        return places

    @staticmethod
    def _finding_subject(f: RuntimeFinding) -> Subject:
        """A runtime finding's subject, from the kernel id and launch name it comes with."""
        if f.kernel is None:
            return _subject("at", f.problem.file, f.problem.path)
        return _subject("kernel" if f.whole_kernel else "launch", id_key(f.kernel), f.launch)

    def kernel_ids(self) -> frozenset[str]:
        """Ids of every kernel the shard holds that loaded."""
        return frozenset(m.ukd.key for m in self.tree.members)


def _subject(what: str, key: str, detail: str | None) -> Subject:
    return (what, key, detail)


def _shard_arch(root: Path, tree: Tree, given: str | None) -> str | None:
    """The arch of the shard: ``given``, else the folder's name (``OUT/<arch>/``), else the
    one arch every pack names."""
    if given is not None:
        bare = str(_runtime.bare_arch(given.strip()))
        if not _runtime.is_arch_name(bare):
            raise UsageError(f"--arch {given}: expected a GPU arch such as gfx90a or sm_90")
        return bare
    name = root.resolve().name
    if _runtime.is_arch_name(name):
        return name
    named = {a for kdp in tree.of_type(Kdp) for a in kdp.arch}
    return next(iter(named)) if len(named) == 1 else None


def load_shard(path: Path, arch: str | None = None,
               exclude_folders: Sequence[str] = ()) -> Shard:
    """Read the shard at ``path``; its reading problems are in ``Shard.problems``."""
    if not path.is_dir():
        # Not there: a command line to fix (exit 2), not a finding about a shard.
        raise UsageError(Problem(str(path), "", "expected a shard folder (OUT_ROOT/<arch>/), "
                                 "found " + ("a file" if path.exists() else "nothing at that path"),
                                 code=UsageError.code))
    # An empty folder, or the out root instead of OUT_ROOT/<arch>/, would pass every check
    # with nothing checked: the runtime's validator refuses it, and so does every tool.
    reason = _runtime.no_shard_reason(str(path), list(exclude_folders))
    if reason is not None:
        raise UkdError(Problem(str(path), "", reason))
    tree = load_tree(path, exclude_folders, authored=False)
    return Shard(path, _shard_arch(path, tree, arch), tree, tree.problems)
