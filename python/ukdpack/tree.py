"""A descriptor root read into models: walk, parse, schema, per-kernel rules.

Every problem of every file is collected (nothing stops at the first); only
documents that pass their schema become models. Kernel rules beyond the schema
(one kind per sources map, hsaco arch) come from the C++ runtime's parser.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ukdpack import _runtime, jsonc, schema
from ukdpack.errors import Problem, from_runtime
from ukdpack.model import Descriptor, Kdp, Kmd, Udd, Ued, Ukd, build, id_key
from ukdpack.walk import DescriptorFile, Skipped, walk

D = TypeVar("D", bound=Descriptor)


@dataclass(frozen=True)
class Member:
    """A kernel as a pack holds it: the KDP and the (inline or standalone) UKD."""

    kdp: Kdp
    ukd: Ukd

    def on_arch(self, arch: str | None) -> bool:
        """Whether the kernel is in the shard of ``arch``; None stands for an arch no
        descriptor names, which holds only the kernels that name no arch at all."""
        if arch is None:
            return not self.kdp.arch and not self.ukd.arch
        return ((not self.kdp.arch or arch in self.kdp.arch)
                and (not self.ukd.arch or arch in self.ukd.arch))


@dataclass(frozen=True)
class Tree:
    """What a root holds, and every problem found reading it."""

    root: Path
    authored: bool
    files: tuple[DescriptorFile, ...]
    skipped: tuple[Skipped, ...]
    descriptors: tuple[Descriptor, ...]
    problems: tuple[Problem, ...]
    docs: Mapping[str, Any] = field(repr=False, default_factory=dict)

    @functools.cached_property
    def path_memo(self) -> dict[tuple[str, str, str, bool], Any]:
        """Resolved paths of this tree (``rules.source_file`` fills it)."""
        return {}

    @functools.cached_property
    def toc_keys(self) -> dict[tuple[str, str], str]:
        """Toc key of each launch by (file, JSON path) (``rules.launch_toc_key`` fills it)."""
        return {}

    @functools.cached_property
    def realpaths(self) -> dict[str, str]:
        """Real paths of this tree's folders, for ``paths.resolve``."""
        return {}

    @functools.cached_property
    def unread_ids(self) -> frozenset[str]:
        """Id keys of documents that failed their checks: references to them are not
        reported again (the document's own problems explain them)."""
        read = {d.key for d in self.descriptors}
        ids: set[str] = set()
        for doc in self.docs.values():
            if (isinstance(doc, Mapping) and isinstance(doc.get("id"), str)
                    and id_key(doc["id"]) not in read):
                ids.add(id_key(doc["id"]))
        return frozenset(ids)

    def of_type(self, cls: type[D]) -> list[D]:
        return [d for d in self.descriptors if type(d) is cls]

    @functools.cached_property
    def by_id(self) -> dict[str, Descriptor]:
        """Every file-backed descriptor by id key (the first one, when ids repeat)."""
        out: dict[str, Descriptor] = {}
        for d in self.descriptors:
            out.setdefault(d.key, d)
        return out

    def lookup(self, ref: str | None, cls: type[D]) -> D | None:
        found = self.by_id.get(id_key(ref)) if ref is not None else None
        return found if isinstance(found, cls) else None

    @functools.cached_property
    def members(self) -> tuple[Member, ...]:
        """Every kernel of every KDP whose reference resolves, in file order."""
        out: list[Member] = []
        for kdp in self.of_type(Kdp):
            for ref in kdp.kernels:
                ukd = ref.inline if ref.inline is not None else self.lookup(ref.ref, Ukd)
                if ukd is not None:
                    out.append(Member(kdp, ukd))
        return tuple(out)

    def members_on(self, arch: str | None) -> list[Member]:
        return [m for m in self.members if m.on_arch(arch)]

    @functools.cached_property
    def named_arches(self) -> tuple[str, ...]:
        """Every arch some KDP or UKD names, sorted."""
        names: set[str] = set()
        for kdp in self.of_type(Kdp):
            names.update(kdp.arch)
        for m in self.members:
            names.update(m.ukd.arch or ())
        return tuple(sorted(names))

    def udd_of(self, kdp: Kdp) -> Udd | None:
        return self.lookup(kdp.dispatch, Udd)

    def ued_of(self, kdp: Kdp) -> Ued | None:
        return self.lookup(kdp.engine, Ued)

    def kmd_of(self, ued: Ued) -> Kmd | None:
        return self.lookup(ued.metadata, Kmd)


def _kernel_objects(dtype: str, doc: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(JSON path, UKD object) of each kernel a (mostly) schema-valid document holds."""
    if dtype == "ukd":
        yield "$", doc
    elif dtype == "kdp":
        for i, item in enumerate(doc.get("kernelDescriptors", [])):
            if isinstance(item, Mapping):
                yield f"$.kernelDescriptors[{i}]", item


def _authored_kernel_problems(rel: str, path: str, ukd: Mapping[str, Any]) -> list[Problem]:
    """An authored tree names what to build; the packed form is the packer's to write."""
    problems = []
    entries = ([("kernel_source", ukd["kernel_source"])] if "kernel_source" in ukd
               else [(f"sources.{n}", s) for n, s in sorted(ukd.get("sources", {}).items())])
    for where, src in entries:
        if src.get("kind") == "kpack":
            problems.append(Problem(rel, f"{path}.{where}.kind",
                                    "kind 'kpack' is the packed form written by the packer; an "
                                    "authored tree names what to build (hip, hsaco, "
                                    "embedded_source, cuda or builder)"))
    return problems


_KERNEL_PATH = re.compile(r"^\$\.kernelDescriptors\[(\d+)\](?=$|[.\[])")


def _kernel_index(path: str) -> int | None:
    m = _KERNEL_PATH.match(path)
    return int(m.group(1)) if m else None


def _read(f: DescriptorFile, authored: bool) -> tuple[Any, Descriptor | None, list[Problem]]:
    """Parse and check one file. A KDP whose only problems sit inside some of its
    kernels still becomes a model without those kernels, so the rules can go on
    to check the rest of the tree."""
    try:
        doc = jsonc.load_file(f.path.read_bytes())
    except OSError as e:
        return None, None, [Problem(f.rel, "", f"cannot read file: {e.strerror}")]
    except jsonc.JsoncError as e:
        return None, None, [Problem(f.rel, "", str(e))]
    problems = [Problem(f.rel, p, m) for p, m in schema.check(doc, f.type)]
    if f.type == "kdp" and problems:
        bad = {_kernel_index(p.path) for p in problems}
        if None in bad or not isinstance(doc.get("kernelDescriptors"), list):
            return doc, None, problems
    elif problems:
        return doc, None, problems
    if f.type in ("udd", "ued", "kmd", "umd", "uhd"):
        # Rules beyond the schema (a KMD field named twice, ...) are the runtime's.
        found = [from_runtime(d) for d in _runtime.check_descriptor(f.type, doc, f.rel)]
        if any(p.severity == "error" for p in found):
            return doc, None, found
        problems += found
    bad_kernels = {i for p in problems if (i := _kernel_index(p.path)) is not None}
    for path, ukd in _kernel_objects(f.type, doc):
        index = _kernel_index(path)
        if index in bad_kernels:
            continue
        found = [from_runtime(d) for d in _runtime.check_kernel(ukd, f.rel, path)]
        if authored:
            found += _authored_kernel_problems(f.rel, path, ukd)
        if any(p.severity == "error" for p in found):
            if index is None:
                return doc, None, problems + found
            bad_kernels.add(index)
        problems += found
    return doc, build(f.type, f.rel, doc, frozenset(bad_kernels)), problems


def load_tree(root: Path, exclude_folders: Iterable[str] = (), *, authored: bool = True) -> Tree:
    """Read every descriptor under ``root``; per-file problems are in ``Tree.problems``."""
    walked = walk(root, exclude_folders, shard=not authored)
    problems = list(walked.problems)
    descriptors: list[Descriptor] = []
    docs: dict[str, Any] = {}
    for f in walked.files:
        doc, model, found = _read(f, authored)
        docs[f.rel] = doc
        problems.extend(found)
        if model is not None:
            descriptors.append(model)
    return Tree(root=root, authored=authored, files=walked.files, skipped=walked.skipped,
                descriptors=tuple(descriptors), problems=tuple(problems), docs=docs)


def inline_and_standalone_ukds(tree: Tree) -> list[Ukd]:
    """Every UKD of the tree, inline ones included, in file order."""
    out: list[Ukd] = []
    for d in tree.descriptors:
        if isinstance(d, Ukd):
            out.append(d)
        elif isinstance(d, Kdp):
            out.extend(ref.inline for ref in d.kernels if ref.inline is not None)
    return out

