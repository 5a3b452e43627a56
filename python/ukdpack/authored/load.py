"""A descriptor root read into models through the C++ runtime's loader.

The runtime is the one reader and the one judge: it walks the root, reads every
file with one set of limits, checks every descriptor and every whole-set rule
(ids, references, arch subsets, metadata, paths, launch sets, toc keys of a
packed shard) and returns what loaded with a diagnostic for everything else.
This module turns that typed view into frozen models for the packer; it reads
no descriptor JSON itself.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ukdpack import _runtime, collector
from ukdpack.authored import early
from ukdpack.authored.model import (
    Descriptor,
    Kdp,
    Kmd,
    Slot,
    Udd,
    Ued,
    Ukd,
    generics_from_runtime,
    id_key,
    kdp_from_runtime,
)
from ukdpack.errors import Problem, escape_controls, from_runtime, quote_name

D = TypeVar("D", bound=Descriptor)

#: The folder of a shard that holds its archive; an authored root may not use it.
ARCHIVE_FOLDER: str = _runtime.ARCHIVE_FOLDER


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
        return f"skipping {quote_name(self.rel)}: {escape_controls(self.why)}"


@dataclass(frozen=True)
class Member:
    """A kernel as a pack holds it: the KDP and the (inline or standalone) UKD."""

    kdp: Kdp
    ukd: Ukd


@dataclass(frozen=True)
class SlotCatalog:
    """One slot of a slotted engine and what fills it in a tree: the KDPs naming it and
    their kernels (the slot's catalog, in file order)."""

    slot: Slot
    index: int  # its position in the engine's run order, from 0
    kdps: tuple[Kdp, ...]
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Shipped:
    """What the shard of one arch ships: its packs and the generic descriptors they
    reach (reachability is the runtime's rule)."""

    kdps: tuple[Kdp, ...]
    generics: tuple[Descriptor, ...]


@dataclass(frozen=True)
class Tree:
    """What a root holds, and every problem the runtime found reading it."""

    root: Path
    authored: bool
    files: tuple[DescriptorFile, ...]
    skipped: tuple[Skipped, ...]
    loaded: tuple[Problem, ...]  # the load's problems; ``problems`` adds the whole-set rules'
    dset: Any = field(repr=False, compare=False, default=None)  # _runtime.DescriptorSet
    set_rules: SetRules | None = field(repr=False, compare=False, default=None)

    @functools.cached_property
    def problems(self) -> tuple[Problem, ...]:
        """Every problem the runtime found: the load's, then the whole-set rules'
        (waited for here: they run on a thread of their own while the packer's rules
        start)."""
        return self.loaded + (self.set_rules.result() if self.set_rules else ())

    @functools.cached_property
    def descriptors(self) -> tuple[Descriptor, ...]:
        """Every descriptor's model, sorted by file: made when first asked (the rules
        and ``validate`` read the runtime's set; a pack's plans read these)."""
        # A large tree's models are a million objects: the collector stays off while
        # they are made, and frozen they are left out of it (measured: a tenth of a
        # warm pack of 10,000 kernels).
        with collector.paused(freeze=True):
            return _models(self.dset)

    def counts(self) -> tuple[int, int]:
        """(packs, kernels): ``Kdp`` models and ``members``, counted without making them
        where the runtime's set gives the same (a tree without errors)."""
        if "descriptors" in self.__dict__ or any(p.severity == "error" for p in self.problems):
            return len(self.of_type(Kdp)), len(self.members)
        packs, kernels = self.dset.counts
        return int(packs), int(kernels)

    @functools.cached_property
    def failed_files(self) -> frozenset[str]:
        """Files with an error: what they hold is reported there, not again as missing."""
        return frozenset(p.file for p in self.problems if p.severity == "error")

    @functools.cached_property
    def toc_keys(self) -> dict[tuple[str, str], str]:
        """The toc key of each launch by (file, JSON path) (``tockey.keyed`` fills it)."""
        return {}

    def of_type(self, cls: type[D]) -> list[D]:
        return [d for d in self.descriptors if type(d) is cls]

    @functools.cached_property
    def by_id(self) -> dict[str, Descriptor]:
        """Every file-backed descriptor by id key."""
        return {d.key: d for d in self.descriptors}

    @functools.cached_property
    def by_file(self) -> dict[str, Descriptor]:
        return {d.file: d for d in self.descriptors}

    def lookup(self, ref: str | None, cls: type[D]) -> D | None:
        found = self.by_id.get(id_key(ref)) if ref is not None else None
        return found if isinstance(found, cls) else None

    @functools.cached_property
    def members(self) -> tuple[Member, ...]:
        """Every kernel of every KDP, in file order."""
        out: list[Member] = []
        for kdp in self.of_type(Kdp):
            for ref in kdp.kernels:
                ukd = ref.inline if ref.inline is not None else self.lookup(ref.ref, Ukd)
                if ukd is not None:
                    out.append(Member(kdp, ukd))
        return tuple(out)

    def members_on(self, arch: str) -> list[Member]:
        """The kernels in the shard of ``arch``, in file order (the runtime's rule)."""
        ids = {id_key(k) for k in self._contents(arch)["kernels"]}
        return [m for m in self.members if m.ukd.key in ids]

    def _contents(self, arch: str | None) -> dict[str, list[str]]:
        found = self._kept_contents.get(arch or "")
        return found if found is not None else _runtime.shard_contents(self.dset, arch or "")

    @functools.cached_property
    def _kept_contents(self) -> dict[str, dict[str, list[str]]]:
        return {}

    def release_set(self, arches: Sequence[str]) -> None:
        """Free the runtime's set once the rules and plans are done with it, keeping what
        the shards of ``arches`` ship: a pack's later phases (its shards' descriptors and
        their runtime check, which loads a set of its own) then reuse its memory. The
        models are made first if nothing asked for them yet: they are read from the set."""
        _ = self.descriptors
        _ = self.problems  # the whole-set rules' thread is done with the set too
        for arch in arches:
            self._kept_contents[arch] = self._contents(arch)
        object.__setattr__(self, "dset", None)  # frozen: this is the one late change

    def udd_of(self, kdp: Kdp) -> Udd | None:
        return self.lookup(kdp.dispatch, Udd)

    def ued_of(self, kdp: Kdp) -> Ued | None:
        return self.lookup(kdp.engine, Ued)

    def kmd_of(self, ued: Ued) -> Kmd | None:
        return self.lookup(ued.metadata, Kmd)

    def kdps_of(self, ued: Ued) -> list[Kdp]:
        """The KDPs of an engine, in file order."""
        return [k for k in self.of_type(Kdp) if id_key(k.engine or "") == ued.key]

    def slot_catalogs(self, ued: Ued) -> list[SlotCatalog]:
        """Each slot of a slotted engine in run order with the KDPs naming it and their
        kernels (empty for an unslotted engine)."""
        kdps = self.kdps_of(ued)
        out = []
        for i, slot in enumerate(ued.slots):
            mine = tuple(k for k in kdps if k.slot == slot.name)
            keys = {k.key for k in mine}
            out.append(SlotCatalog(slot, i, mine,
                                   tuple(m for m in self.members if m.kdp.key in keys)))
        return out

    def shipped(self, arch: str | None) -> Shipped:
        """What the shard of ``arch`` ships (None: any shard)."""
        found = self._contents(arch)
        kdps = tuple(d for f in found["packs"] if isinstance(d := self.by_file[f], Kdp))
        return Shipped(kdps, tuple(self.by_file[f] for f in found["generics"]))

    def unreachable_note(self) -> list[Problem]:
        """The runtime's note on generic descriptors no pack reaches (none when every
        one ships somewhere)."""
        return [from_runtime(d) for d in _runtime.unreachable_note(self.dset)]


class SetRules:
    """The runtime's whole-set rules over a loaded set, on a thread of their own: the
    runtime releases the GIL while it checks, so the packer's toc-key rule runs beside
    them (``validate`` at 100,000 kernels: 0.15 s beside 0.26 s)."""

    def __init__(self, dset: Any, arches: list[str]) -> None:
        self._found: tuple[Problem, ...] = ()
        self._failure: BaseException | None = None
        # Not a daemon: a process ending meanwhile waits for it rather than tear the
        # set down under it.
        self._thread = threading.Thread(target=self._check, args=(dset, arches),
                                        name="ukdpack-set-rules")
        self._thread.start()

    def _check(self, dset: Any, arches: list[str]) -> None:
        try:
            self._found = tuple(from_runtime(d) for d in _runtime.check_set_rules(dset, arches))
        except BaseException as e:  # raised again where the result is asked for
            self._failure = e

    def result(self) -> tuple[Problem, ...]:
        """The rules' problems, once they are checked."""
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        return self._found


def load_tree(root: Path, exclude_folders: Iterable[str] = (), *, authored: bool = True,
              arches: Sequence[str] | None = None) -> Tree:
    """Read every descriptor under ``root`` through the runtime's loader; every problem
    it finds, whole-set rules included (for the shards of ``arches``; None: every
    arch), is in ``Tree.problems``."""
    # A tree lives as long as the command that read it: the collector stays off while it
    # is made, and frozen it is left out of later collections (its models likewise).
    with collector.paused(freeze=True):
        return _load(root, exclude_folders, authored, list(arches or ()))


def _load(root: Path, exclude_folders: Iterable[str], authored: bool, asked: list[str]) -> Tree:
    exclude = list(exclude_folders)
    dset = early.take(str(root), exclude, authored, asked)
    if dset is None:
        dset = _runtime.load_shard(str(root), exclude_folders=exclude, authored=authored,
                                   arches=asked)
    set_rules = SetRules(dset, asked)
    problems = [from_runtime(d) for d in dset.diagnostics if d["code"] != _runtime.Code.SKIPPED]
    files = tuple(DescriptorFile(rel, root / rel, dtype) for rel, dtype, _ in dset.files)
    skipped = tuple(Skipped(rel, why) for rel, why in dset.skipped)
    return Tree(root=root, authored=authored, files=files, skipped=skipped,
                loaded=tuple(problems), dset=dset, set_rules=set_rules)


def _models(dset: Any) -> tuple[Descriptor, ...]:
    """The models of every descriptor of a loaded set, sorted by file."""
    descriptors: list[Descriptor] = []
    for p in dset.model_packs():  # the keys the models read, no more
        kdp, standalone = kdp_from_runtime(p)
        descriptors.append(kdp)
        descriptors += standalone
    descriptors += generics_from_runtime(dset)
    descriptors.sort(key=lambda d: d.file)
    return tuple(descriptors)


def inline_and_standalone_ukds(tree: Tree) -> list[Ukd]:
    """Every UKD of the tree, inline ones included, in file order."""
    return [m.ukd for m in tree.members]
