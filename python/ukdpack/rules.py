"""Whole-set rules (SPEC 4), checked before anything compiles.

1. ids unique; references resolve to the right type;
2. a UKD's arch is a subset of its KDP's;
3. per arch shard, one launch set per dispatch handler (launch sets come from
   the C++ runtime's ``launch_names_of``: the runtime's own reading);
4. toc keys shared only by kernels that share the code object (in a packed shard:
   the same sha256, see ``_packed_toc_keys``);
5. metadata fills the engine's KMD and is unique per engine and arch.

Plus the file rules of SPEC 2-3: paths named by descriptors exist inside the
root, and UHD artifacts ship from inside it.
"""

from __future__ import annotations

import json
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ukdpack import _runtime, dvc, jsonpath, tockey
from ukdpack.errors import Problem, from_runtime
from ukdpack.model import (
    Descriptor,
    Kdp,
    Kmd,
    Source,
    Udd,
    Ued,
    Uhd,
    Ukd,
    Umd,
    id_key,
)
from ukdpack.paths import PathRefused, resolve
from ukdpack.tree import Member, Tree, inline_and_standalone_ukds

#: The fields of each kind that name a file, relative to the descriptor's folder.
FILE_FIELDS: dict[str, tuple[str, str]] = {
    "hip": ("source", "source"),
    "cuda": ("source", "source"),
    "hsaco": ("file", "prebuilt object"),
}


MissingPrebuilt = Literal["error", "warning", "skip"]


def check(tree: Tree, arches: Sequence[str] | None = None,
          missing_prebuilt: MissingPrebuilt = "error") -> list[Problem]:
    """Every whole-set problem of ``tree``; ``arches`` limits the per-arch rules to
    those shards (None: every arch the tree names, and any other). A prebuilt object
    that is a DVC output not pulled yet is reported with ``missing_prebuilt`` severity
    (``skip``: not at all, for the packer, which fails only the arches needing it)."""
    shards: list[str | None] = list(arches) if arches is not None else [None, *tree.named_arches]
    problems: list[Problem] = []
    problems += _unique_ids(tree)
    problems += _references(tree)
    problems += _arch_subsets(tree)
    problems += _files(tree, missing_prebuilt)
    problems += _launch_sets(tree, shards)
    problems += _toc_keys(tree) if tree.authored else _packed_toc_keys(tree)
    problems += _metadata(tree, shards)
    return problems


# --------------------------------------------------------------------------- 1


def _all_with_ids(tree: Tree) -> list[Descriptor]:
    out: list[Descriptor] = []
    for d in tree.descriptors:
        out.append(d)
        if isinstance(d, Kdp):
            out.extend(ref.inline for ref in d.kernels if ref.inline is not None)
    return out


def _unique_ids(tree: Tree) -> list[Problem]:
    seen: dict[str, Descriptor] = {}
    problems = []
    for d in _all_with_ids(tree):
        first = seen.setdefault(d.key, d)
        if first is not d:
            where = first.file if first.json_path == "$" else f"{first.file} ({first.json_path})"
            problems.append(Problem(d.file, jsonpath.key(d.json_path, "id"),
                                    f"id '{d.id}' is already used by {where}; ids are unique "
                                    "across every descriptor type of a root"))
    return problems


_TYPE_NAMES: dict[type[Descriptor], str] = {
    Kdp: "KDP", Ukd: "UKD", Udd: "UDD", Ued: "UED", Kmd: "KMD", Umd: "UMD", Uhd: "UHD"}


def _ref_problem(tree: Tree, owner: Descriptor, path: str, ref: str,
                 cls: type[Descriptor]) -> Problem | None:
    found = tree.by_id.get(id_key(ref))
    want = _TYPE_NAMES[cls]
    if isinstance(found, cls) or (found is None and id_key(ref) in tree.unread_ids):
        return None
    if found is not None:
        return Problem(owner.file, path, f"'{ref}' is a {_TYPE_NAMES[type(found)]} "
                       f"({found.file}), expected the id of a {want}")
    inline = next((u for u in inline_and_standalone_ukds(tree)
                   if u.inline and u.key == id_key(ref)), None)
    if inline is not None and cls is Ukd:
        return Problem(owner.file, path, f"'{ref}' is an inline UKD of {inline.file}; only "
                       "standalone UKDs (*.ukd.json) are referenced by id")
    return Problem(owner.file, path,
                   f"'{ref}' names no descriptor of this root; expected the id of a {want}")


def _references(tree: Tree) -> list[Problem]:
    problems: list[Problem | None] = []
    owners: dict[str, list[tuple[Kdp, str]]] = defaultdict(list)
    for kdp in tree.of_type(Kdp):
        for i, m in enumerate(kdp.matchers):
            problems.append(_ref_problem(tree, kdp, f"$.matchers[{i}]", m, Umd))
        if kdp.engine is not None:
            problems.append(_ref_problem(tree, kdp, "$.engine", kdp.engine, Ued))
        if kdp.dispatch is not None:
            problems.append(_ref_problem(tree, kdp, "$.dispatch", kdp.dispatch, Udd))
        for ref in kdp.kernels:
            if ref.ref is not None:
                p = _ref_problem(tree, kdp, ref.json_path, ref.ref, Ukd)
                problems.append(p)
                if p is None:
                    owners[id_key(ref.ref)].append((kdp, ref.json_path))
    for ukd in tree.of_type(Ukd):
        holders = owners.get(ukd.key, [])
        if not holders:
            problems.append(Problem(ukd.file, "", "not referenced by any KDP; this kernel "
                                    "ships in no shard", "note"))
        for kdp, path in holders[1:]:
            problems.append(Problem(kdp.file, path, f"UKD '{ukd.id}' ({ukd.file}) is already "
                                    f"in pack {holders[0][0].file}; a kernel belongs to one "
                                    "pack"))
    for ued in tree.of_type(Ued):
        problems.append(_ref_problem(tree, ued, "$.metadata", ued.metadata, Kmd))
        kmd = tree.kmd_of(ued)
        if kmd is not None:
            names = [f.name for f in kmd.fields]
            for i, knob in enumerate(ued.knobs):
                if knob not in names:
                    problems.append(Problem(ued.file, f"$.knobs[{i}]", f"knob '{knob}' is no "
                                            f"field of KMD '{kmd.name}' ({kmd.file}); expected "
                                            f"one of {_names(names)}"))
        for role, table in ued.heuristics.items():
            for arch, ids in table.items():
                for j, uhd in enumerate(ids):
                    path = jsonpath.key(jsonpath.key("$", role), arch)
                    if isinstance(ued.raw[role][arch], list):
                        path = jsonpath.index(path, j)
                    problems.append(_ref_problem(tree, ued, path, uhd, Uhd))
    return [p for p in problems if p is not None]


def _names(names: Iterable[str]) -> str:
    listed = ", ".join(f"'{n}'" for n in names)
    return listed or "(none)"


# --------------------------------------------------------------------------- 2


def _arch_subsets(tree: Tree) -> list[Problem]:
    problems = []
    for m in tree.members:
        if not m.kdp.arch or not m.ukd.arch:
            continue
        extra = [a for a in m.ukd.arch if a not in m.kdp.arch]
        if extra:
            problems.append(Problem(
                m.ukd.file, jsonpath.key(m.ukd.json_path, "arch"),
                f"arch {_names(extra)} not in its KDP's arch [{', '.join(m.kdp.arch)}] "
                f"({m.kdp.file}); a kernel's arch is a subset of its pack's"))
    return problems


# --------------------------------------------------------------------------- files


def source_file(tree: Tree, ukd: Ukd, src: Source, must_exist: bool = True) -> str | None:
    """Root-relative path of the file a source names (None for kinds without one).
    Raises PathRefused when the path is refused."""
    spec = FILE_FIELDS.get(src.kind)
    if spec is None:
        return None
    field_name, what = spec
    # Kernels of one tree name the same few files many times: resolve each once.
    key = (str(ukd.folder), str(src.fields[field_name]), what, must_exist)
    found = tree.path_memo.get(key)
    if found is None:
        try:
            found = resolve(tree.root, ukd.folder, key[1], what=what, must_exist=must_exist,
                            realpaths=tree.realpaths).rel
        except PathRefused as e:
            found = e
        tree.path_memo[key] = found
    if isinstance(found, PathRefused):
        raise found
    return found


def launch_toc_key(tree: Tree, ukd: Ukd, src: Source, rel: str | None) -> str:
    """The toc key of one launch, computed once per tree (the rules and every arch's plan
    ask for it; it costs a canonical JSON and a digest)."""
    where = (ukd.file, src.json_path)
    key = tree.toc_keys.get(where)
    if key is None:
        key = tree.toc_keys[where] = tockey.toc_key(src.kind, src.fields, rel)
    return key


def _files(tree: Tree, missing_prebuilt: MissingPrebuilt) -> list[Problem]:
    problems = []
    outputs: list[dvc.Output] | None = None
    for ukd in inline_and_standalone_ukds(tree):
        for _, src in ukd.launches:
            spec = FILE_FIELDS.get(src.kind)
            if spec is None:
                continue
            try:
                source_file(tree, ukd, src)
            except PathRefused as e:
                path = jsonpath.key(src.json_path, spec[0])
                hint = None
                if e.missing is not None and src.kind == "hsaco":
                    outputs = dvc.tracked_outputs(tree.root) if outputs is None else outputs
                    hint = dvc.missing_hint(tree.root, e.missing, outputs)
                if hint is None:
                    problems.append(Problem(ukd.file, path, str(e)))
                elif missing_prebuilt != "skip":
                    problems.append(Problem(ukd.file, path, f"prebuilt object "
                                            f"'{src.fields['file']}' is not there: {hint}",
                                            missing_prebuilt))
    for uhd in tree.of_type(Uhd):
        if uhd.artifact is None:
            continue
        try:
            resolve(tree.root, uhd.folder, uhd.artifact, what="artifact")
        except PathRefused as e:
            problems.append(Problem(uhd.file, f"$.{uhd.adapter}.artifact", str(e)))
    return problems


# --------------------------------------------------------------------------- 3


def launch_names(ukd: Ukd) -> frozenset[str]:
    """The kernel's launch set, as the runtime reads it."""
    return frozenset(_runtime.launch_names_of(dict(ukd.raw)))


def describe_set(names: Iterable[str]) -> str:
    return str(_runtime.describe_launch_set(sorted(names)))


@dataclass
class _Finding:
    """A per-arch finding, merged across the arches where it holds."""

    file: str
    path: str
    message: str  # with "{on}" where the arch note goes
    arches: list[str | None]


def _merge(findings: list[tuple[str | None, str, str, str]]) -> list[Problem]:
    merged: dict[tuple[str, str, str], _Finding] = {}
    for arch, file, path, message in findings:
        f = merged.setdefault((file, path, message), _Finding(file, path, message, []))
        f.arches.append(arch)
    out = []
    for f in merged.values():
        on = "" if None in f.arches else " on " + ", ".join(a for a in f.arches if a)
        out.append(Problem(f.file, f.path, f.message.replace("{on}", on)))
    return out


def _kernel_list(members: Sequence[Member], sets: dict[int, frozenset[str]]) -> str:
    by_kdp: dict[str, list[str]] = defaultdict(list)
    for m in sorted(members, key=lambda m: (m.kdp.file, m.ukd.name, m.ukd.id)):
        by_kdp[m.kdp.file].append(f"'{m.ukd.name}' {describe_set(sets[id(m)])}")
    return "; ".join(f"{kdp}: {', '.join(ks)}" for kdp, ks in by_kdp.items())


def _launch_sets(tree: Tree, shards: Sequence[str | None]) -> list[Problem]:
    findings: list[tuple[str | None, str, str, str]] = []
    names: dict[str, frozenset[str]] = {}
    for arch in shards:
        groups: dict[tuple[str, str], list[Member]] = defaultdict(list)
        for m in tree.members_on(arch):
            if m.kdp.dispatch is None:
                groups[("kdp", m.kdp.key)].append(m)
                continue
            udd = tree.udd_of(m.kdp)
            if udd is not None:
                groups[("symbol", udd.dispatch_symbol)].append(m)
        for (how, label), members in groups.items():
            sets = {}
            for m in members:
                if m.ukd.key not in names:
                    names[m.ukd.key] = launch_names(m.ukd)
                sets[id(m)] = names[m.ukd.key]
            first = min(members, key=lambda m: m.kdp.file).kdp
            declared = {}
            if how == "symbol":
                for m in members:
                    udd = tree.udd_of(m.kdp)
                    if udd is not None and udd.launches is not None:
                        declared[udd.file] = frozenset(udd.launches)
            if len(set(declared.values())) > 1:
                listed = "; ".join(f"{f} {describe_set(s)}" for f, s in sorted(declared.items()))
                findings.append((arch, first.file, "$.dispatch",
                                 f"UDDs naming dispatch symbol '{label}' declare different "
                                 f"launches{{on}}: {listed}; one handler runs one set"))
                continue
            if declared:
                want = next(iter(declared.values()))
                odd = [m for m in members if sets[id(m)] != want]
                if odd:
                    udd_file = next(iter(sorted(declared)))
                    findings.append((arch, odd[0].kdp.file, "$.kernelDescriptors",
                                     f"dispatch symbol '{label}' runs launches "
                                     f"{describe_set(want)} (declared by {udd_file}), but "
                                     f"kernels it serves have other launch sets{{on}}: "
                                     f"{_kernel_list(odd, sets)}; make each kernel's sources "
                                     "keys exactly the declared launches"))
                continue
            if len(set(sets.values())) <= 1:
                continue
            if how == "symbol":
                findings.append((arch, first.file, "$.kernelDescriptors",
                                 f"dispatch symbol '{label}' serves kernels with different "
                                 f"launch sets{{on}}, and its handler declares one set: "
                                 f"{_kernel_list(members, sets)}; put kernels with another "
                                 "launch set in a KDP with its own UDD and dispatch symbol"))
            else:
                findings.append((arch, first.file, "$.kernelDescriptors",
                                 f"KDP '{first.name}' has no dispatch and holds kernels with "
                                 f"different launch sets{{on}}: {_kernel_list(members, sets)}; "
                                 "a pack's kernels share one launch set"))
    return _merge(findings)


# --------------------------------------------------------------------------- 4


def _toc_keys(tree: Tree) -> list[Problem]:
    seen: dict[str, tuple[Any, Ukd]] = {}
    problems = []
    for ukd in inline_and_standalone_ukds(tree):
        for _, src in ukd.launches:
            if src.kind not in ("hip", "cuda", "hsaco", "builder"):
                continue
            try:
                rel = source_file(tree, ukd, src, must_exist=False)
            except PathRefused:
                continue  # reported by _files
            key = launch_toc_key(tree, ukd, src, rel)
            ident = tockey.identity(src.kind, src.fields, rel)
            first = seen.setdefault(key, (ident, ukd))
            if first[0] != ident:
                problems.append(Problem(
                    ukd.file, src.json_path,
                    f"toc key '{key}' is also the toc key of kernel '{first[1].name}' "
                    f"({first[1].where()}), built from other inputs (a collision of the "
                    "48-bit digest); change either kernel's build inputs"))
    return problems


def _packed_launch_label(ukd: Ukd, launch: str | None) -> str:
    return (f"kernel '{ukd.name}' (single launch)" if launch is None
            else f"kernel '{ukd.name}' launch '{launch}'")


def _packed_toc_keys(tree: Tree) -> list[Problem]:
    """Rule 4.4 on a packed shard (``desk-check``): there "the same code object" means
    the same sha256, since the archive holds one object per toc key. Every launch of
    every kernel counts: a launch of one kernel and a launch of another may name one toc
    key (of one archive) only with one digest; the launches of one kernel may share a
    module, and then name one digest too."""
    first: dict[tuple[str, str], tuple[str, Ukd, str | None]] = {}
    reported: set[tuple[str, str, str, str]] = set()  # one problem per key and kernel pair
    problems = []
    for ukd in inline_and_standalone_ukds(tree):
        for name, src in ukd.launches:
            if src.kind != "kpack":
                continue
            # Keys are per archive; the library path is relative to the descriptor.
            archive = posixpath.normpath(posixpath.join(str(ukd.folder),
                                                        str(src.fields["library"])))
            key, digest = str(src.fields["toc_key"]), str(src.fields["sha256"])
            seen = first.setdefault((archive, key), (digest, ukd, name))
            pair = (archive, key, seen[1].key, ukd.key)
            if seen[0] == digest or pair in reported:
                continue
            reported.add(pair)
            other = _packed_launch_label(seen[1], seen[2])
            if seen[1].key == ukd.key:
                problems.append(Problem(
                    ukd.file, jsonpath.key(src.json_path, "sha256"),
                    f"{_packed_launch_label(ukd, name)} names toc key '{key}' ({archive}) "
                    f"with sha256 {digest}, and launch '{seen[2]}' of the same kernel names it "
                    f"with sha256 {seen[0]}; one toc key holds one code object"))
            else:
                problems.append(Problem(
                    ukd.file, jsonpath.key(src.json_path, "toc_key"),
                    f"{_packed_launch_label(ukd, name)} names toc key '{key}' ({archive}) "
                    f"with sha256 {digest}, but {other} ({seen[1].where()}) names it with "
                    f"sha256 {seen[0]}; two kernels share a toc key only when they share "
                    "the code object (one sha256)"))
    return problems


# --------------------------------------------------------------------------- 5


def completed_metadata(kmd: Kmd, ukd: Ukd) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The kernel's metadata checked against the KMD and completed with its defaults, by
    the runtime's own rule (``completeMetadata`` in the C++ loader)."""
    values, diags = _runtime.complete_metadata(dict(kmd.raw), kmd.file, dict(ukd.raw), ukd.file,
                                               ukd.json_path)
    return values, [from_runtime(d) for d in diags]


def _metadata(tree: Tree, shards: Sequence[str | None]) -> list[Problem]:
    problems: list[Problem] = []
    completed: dict[str, tuple[str, str]] = {}  # ukd key -> (engine key, canonical)
    checked: set[str] = set()
    for m in tree.members:
        ued = tree.ued_of(m.kdp)
        kmd = tree.kmd_of(ued) if ued is not None else None
        if ued is None or kmd is None or m.ukd.key in checked:
            continue
        checked.add(m.ukd.key)
        values, found = completed_metadata(kmd, m.ukd)
        problems += found
        if values is not None:
            completed[m.ukd.key] = (ued.key, json.dumps(values, sort_keys=True))
    findings: list[tuple[str | None, str, str, str]] = []
    for arch in shards:
        owners: dict[tuple[str, str], Member] = {}
        for m in tree.members_on(arch):
            if m.ukd.key not in completed:
                continue
            first = owners.setdefault(completed[m.ukd.key], m)
            if first is not m and first.ukd.key != m.ukd.key:
                ued = tree.ued_of(m.kdp)
                findings.append((arch, m.ukd.file, jsonpath.key(m.ukd.json_path, "metadata"),
                                 f"completed metadata {completed[m.ukd.key][1]} equals that of "
                                 f"kernel '{first.ukd.name}' ({first.ukd.where()}) under engine "
                                 f"'{ued.name if ued else ''}'{{on}}; the engine cannot tell "
                                 "them apart"))
    return problems + _merge(findings)
