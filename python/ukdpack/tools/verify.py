"""``ukdpack verify SHARD --source-root R``: the shard against what the root says it
must hold, and its provenance sidecars bound to its packed kernels.

What the shard must hold is derived by the packer's own code: the root is read by
``tree.load_tree`` and checked by the same rules, ``plan.plan_arch`` says which
kernels and launches the arch gets and each launch's toc key (``tockey``), and
``Ukd.file_of`` finds each prebuilt object. Nothing is compiled: a compiled
launch is checked by toc key and symbol against the root's, and by the signature
read back from the archived object; a prebuilt one also byte for byte against the
root's file. Whether its code loads (library, archive membership, digest, target,
symbol) is the runtime's finding (``Shard.every_launch_findings``), reported in its words
and never judged here: verify adds only what needs the source root. Launches are
compared by name, never by position, and every mismatch is reported, one problem each,
naming the kernel and the launch.

The provenance sidecar beside each file holding packed kernels is read here (the one
reader of sidecars in the package): it must be there, be gzip of JSON, hold one entry
per kernel of its file and no other, each with the binding digest of the packed
kernel it was written for (``provenance.binding``).

Each slot of a slotted engine in the shard is listed with its kernels (``slots``), in
run order: what a reader checks a slot's catalog by. A kernel in the wrong slot shows
as its pack's ``slot`` differing from the root's.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack import _runtime, jsonpath
from ukdpack.authored.kinds import kind
from ukdpack.authored.load import Member, Tree, load_tree
from ukdpack.authored.model import GENERIC_TYPES, Descriptor, Kdp, Ued, Uhd, id_key
from ukdpack.authored.validate import check_tree
from ukdpack.errors import Problem, Severity, UkdError, errors_only
from ukdpack.files import NotRegularFileError, read_regular
from ukdpack.produce import codeobject
from ukdpack.produce.plan import ArchPlan, Launch, plan_arch
from ukdpack.shard import packed, provenance
from ukdpack.tools.shard import (
    PACKED_KIND,
    Shard,
    ShardLaunch,
    describe_signature,
    is_prebuilt,
    kernel_label,
    launch_label,
    load_shard,
)
from ukdpack.words import count

#: Fields of a UKD the packer rewrites or moves besides its launches; every other field
#: ships as authored.
_REWRITTEN = frozenset({"provenance", "arch"}) | packed.AUTHORING_KEYS
_TYPE_NAMES = {"Kdp": "KDP", "Ukd": "UKD", "Udd": "UDD", "Ued": "UED", "Kmd": "KMD",
               "Umd": "UMD", "Uhd": "UHD"}


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class SlotKernels:
    """One slot of a slotted engine of the shard and the kernels filling it."""

    engine: str
    slot: str
    position: int  # in the engine's run order, from 1
    kernels: tuple[tuple[str, str, str], ...]  # (id, name, pack), in file order

    def line(self) -> str:
        names = ", ".join(n for _, n, _ in self.kernels) or "(none)"
        return f"engine '{self.engine}' slot {self.position} '{self.slot}': {names}"

    def as_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "slot": self.slot, "position": self.position,
                "kernels": [{"id": i, "name": n, "pack": p} for i, n, p in self.kernels]}


def shard_slots(shard: Shard) -> tuple[SlotKernels, ...]:
    """Every slot of every slotted engine of the shard, engines in file order."""
    t = shard.tree
    return tuple(SlotKernels(ued.name, c.slot.name, c.index + 1,
                             tuple((m.ukd.id, m.ukd.name, m.kdp.name) for m in c.members))
                 for ued in t.of_type(Ued) for c in t.slot_catalogs(ued))


@dataclass(frozen=True)
class Verification:
    """The verdict on one shard: every mismatch, notes included."""

    shard: Shard
    source_root: Path
    problems: tuple[Problem, ...]
    kernels: int
    launches: int
    slots: tuple[SlotKernels, ...] = ()

    @property
    def ok(self) -> bool:
        return not errors_only(self.problems)

    def summary(self) -> str:
        counts = (f"{count(self.kernels, 'kernel')}, {count(self.launches, 'launch')} for "
                  f"{self.shard.arch}")
        if self.ok:
            return f"verified against {self.source_root}: {counts}"
        n = len(errors_only(self.problems))
        return (f"does not match {self.source_root}: {n} error{'s' if n != 1 else ''} "
                f"({counts})")


def _expected_symbol(launch: Launch) -> str | None:
    """The symbol the root names for a launch (None: a builder that names no entry, whose
    symbol is the object's only kernel)."""
    src = launch.source
    field_name = kind(src.kind).symbol_field or "entry"
    entry = src.fields.get(field_name)
    return str(entry) if entry is not None else None


class _Checker:
    """Compares one shard with the plan of its arch; collects every problem."""

    def __init__(self, shard: Shard, root: Tree, plan: ArchPlan) -> None:
        self.shard, self.root, self.plan = shard, root, plan
        assert shard.arch is not None
        self.arch: str = shard.arch
        self.problems: list[Problem] = []
        self.unread = shard.tree.failed_files

    def error(self, file: str, path: str, message: str, severity: Severity = "error") -> None:
        self.problems.append(Problem(file, path, message, severity))

    # -- packs and generic descriptors --------------------------------------

    def packs(self) -> None:
        expected = self.root.shipped(self.arch).kdps
        keys = {k.key for k in expected}
        for kdp in expected:
            got = self.shard.tree.lookup(kdp.id, Kdp)
            if got is None:
                if kdp.file not in self.unread:
                    self.error(kdp.file, "$", f"pack '{kdp.name}' ({kdp.id}) is not in the "
                               f"shard; the root ships it for {self.arch}")
                continue
            self._same_place(got, kdp, "pack")
            authored = dict(kdp.raw)
            authored["arch"] = [self.arch]
            self._fields(got, authored, dict(got.raw), f"pack '{kdp.name}'",
                         skip={"kernelDescriptors"})
        for got in self.shard.kdps():
            if got.key not in keys:
                self.error(got.file, "$", f"pack '{got.name}' ({got.id}) is in the shard, but "
                           f"the root ships no kernel of it for {self.arch}")

    def generics(self) -> None:
        expected = self.root.shipped(self.arch).generics
        keys = {d.key for d in expected}
        for d in expected:
            what = f"{_TYPE_NAMES[type(d).__name__]} '{d.name}'"
            got = self.shard.tree.by_id.get(d.key)
            if got is None or type(got) is not type(d):
                if d.file not in self.unread:
                    self.error(d.file, "$", f"{what} ({d.id}) is not in the shard; a pack of "
                               f"this shard reaches it")
                continue
            self._same_place(got, d, what)
            self._fields(got, dict(d.raw), dict(got.raw), what)
            if isinstance(d, Uhd) and d.shipped is not None:
                self._artifact(d)
        for got in self.shard.tree.descriptors:
            if isinstance(got, GENERIC_TYPES) and got.key not in keys:
                self.error(got.file, "$", f"{_TYPE_NAMES[type(got).__name__]} '{got.name}' "
                           f"({got.id}) is in the shard, but no pack the root ships for "
                           f"{self.arch} reaches it")

    def _artifact(self, uhd: Uhd) -> None:
        assert uhd.shipped is not None
        path = uhd.shipped_path
        # Both loads checked the artifact is a file inside their root.
        rel = uhd.artifact_file
        assert rel is not None
        try:
            same = (self.root.root / rel).read_bytes() == (self.shard.root / rel).read_bytes()
        except OSError as e:
            self.error(uhd.file, path, f"UHD '{uhd.name}': cannot read artifact {rel}: "
                       f"{e.strerror}")
            return
        if not same:
            self.error(uhd.file, path, f"UHD '{uhd.name}': artifact {rel} differs from "
                       "the root's")

    def _same_place(self, got: Descriptor, want: Descriptor, what: str) -> None:
        if got.file != want.file or got.json_path != want.json_path:
            self.error(got.file, got.json_path, f"{what} sits at {_where(got)} in the shard; the "
                       f"root puts it at {_where(want)}")

    def _fields(self, got: Descriptor, want: Mapping[str, Any], have: Mapping[str, Any],
                what: str, skip: Iterable[str] = ()) -> None:
        """Every field that ships as authored, compared one by one."""
        left_out = set(skip) | packed.AUTHORING_KEYS  # the packer drops them
        for key in sorted((set(want) | set(have)) - left_out):
            if want.get(key) != have.get(key):
                self.error(got.file, jsonpath.key(got.json_path, key),
                           f"{what}: {key} is {_value(have, key)} in the shard, "
                           f"{_value(want, key)} in the root")

    # -- kernels ------------------------------------------------------------

    def kernels(self) -> None:
        got_by_key = {m.ukd.key: m for m in self.shard.tree.members}
        want_keys = set()
        for m in self.plan.members:
            want_keys.add(m.ukd.key)
            got = got_by_key.get(m.ukd.key)
            if got is None:
                if m.kdp.file not in self.unread and m.ukd.file not in self.unread:
                    self.error(m.kdp.file, "$.kernelDescriptors",
                               f"kernel '{m.ukd.name}' ({m.ukd.id}, {m.ukd.where()} in the root) "
                               f"is not in the shard; the root puts it in the {self.arch} shard")
                continue
            self.kernel(m, got)
        for got in self.shard.tree.members:
            if got.ukd.key not in want_keys:
                self.error(got.ukd.file, got.ukd.json_path,
                           f"kernel '{got.ukd.name}' ({got.ukd.id}) is in the shard, but the "
                           f"root does not put it in the {self.arch} shard")

    def kernel(self, want: Member, got: Member) -> None:
        ukd = got.ukd
        if got.kdp.key != want.kdp.key:
            self.error(ukd.file, ukd.json_path, f"{kernel_label(ukd)} sits in pack "
                       f"'{got.kdp.name}' ({got.kdp.file}); the root puts it in pack "
                       f"'{want.kdp.name}' ({want.kdp.file})")
        elif ukd.file != want.ukd.file:
            self.error(ukd.file, ukd.json_path, f"{kernel_label(ukd)} sits in {ukd.file}; the "
                       f"root has it in {want.ukd.file}")
        # Launches are compared launch by launch, below.
        rewritten = _REWRITTEN | {want.ukd.launches_key, ukd.launches_key}
        authored = {k: v for k, v in want.ukd.raw.items() if k not in rewritten}
        have = {k: v for k, v in ukd.raw.items() if k not in rewritten}
        self._fields(ukd, authored, have, kernel_label(ukd))
        # The packer narrows a UKD's own arch to the shard's; one that names none ships none.
        want_arch = [self.arch] if "arch" in want.ukd.raw else None
        if ukd.raw.get("arch") != want_arch:
            self.error(ukd.file, jsonpath.key(ukd.json_path, "arch"),
                       f"{kernel_label(ukd)}: arch is {_value(ukd.raw, 'arch')} in the shard, "
                       f"expected {_show(want_arch) if want_arch else 'none'} for the "
                       f"{self.arch} shard")
        expected = {ln.name: ln for ln in self.plan.launches_of(want.ukd)}
        shipped = self.shard.launches_of(ukd)
        where = ukd.launches_path
        for name in sorted(set(expected) - set(shipped), key=_name_order):
            self.error(ukd.file, where, f"{launch_label(ukd, name)} is missing from the shard; "
                       f"the root's kernel has launches {_launch_list(expected)}")
        for name in sorted(set(shipped) - set(expected), key=_name_order):
            self.error(ukd.file, shipped[name].json_path, f"{launch_label(ukd, name)} is in the "
                       f"shard, but the root's kernel has launches {_launch_list(expected)}")
        for name in sorted(set(expected) & set(shipped), key=_name_order):
            self.launch(expected[name], shipped[name])

    def launch(self, want: Launch, got: ShardLaunch) -> None:
        label, file, path = got.label(), got.ukd.file, got.json_path
        if want.job_key is None:  # a kind without a code object ships as authored
            if dict(got.source.fields) != dict(want.source.fields):
                self.error(file, path, f"{label}: the {want.source.kind} source is "
                           f"{_show(dict(got.source.fields))} in the shard, "
                           f"{_show(dict(want.source.fields))} in the root")
            return
        if not got.packed:
            self.error(file, jsonpath.key(path, "kind"), f"{label}: expected a packed entry "
                       f"(kind '{PACKED_KIND}'), found kind '{got.source.kind}'")
            return
        toc_key = want.job_key[1]
        if got.toc_key != toc_key:
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: toc key is "
                       f"'{got.toc_key}' in the shard, '{toc_key}' by the root's "
                       f"{want.source.kind} source")
        symbol = _expected_symbol(want)
        if symbol is not None and got.symbol != symbol:
            self.error(file, jsonpath.key(path, "symbol"), f"{label}: symbol is "
                       f"'{got.symbol}' in the shard, '{symbol}' in the root")
        # The code as the runtime loads it; a refusal is the runtime's finding, said once.
        blob = self.shard.launch_code(got)
        if blob is None:
            return
        if is_prebuilt(want.source.kind):
            self._prebuilt(want, got, blob)
        self._code(got, blob)

    def _prebuilt(self, want: Launch, got: ShardLaunch, blob: bytes) -> None:
        """A prebuilt object ships as the root holds it (its ELF, unwrapped from a bundle)."""
        label, file, path = got.label(), got.ukd.file, got.json_path
        rel = want.member.ukd.file_of(want.source)
        assert rel is not None
        where = self.root.root / rel
        try:
            image = codeobject.elf_image(where.read_bytes())
        except codeobject.CodeObjectError as e:
            self.error(file, path, f"{label}: the root's prebuilt object {rel}: {e}")
            return
        if image != blob:
            # Its digest as the packer takes it: the runtime's reader of prebuilt objects.
            read = _runtime.read_prebuilt_objects([str(where)], 1)[0]
            digest = f" (sha256 {read[1]})" if read is not None else ""
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: the archive entry "
                       f"differs from the root's prebuilt object {rel}{digest}")

    def _code(self, got: ShardLaunch, blob: bytes) -> None:
        """The signature, read back from the archived object (its symbol and target the
        runtime's load checked)."""
        label, file, path = got.label(), got.ukd.file, got.json_path
        try:
            signature = codeobject.read_signature(blob, got.symbol)
        except codeobject.CodeObjectError as e:
            self.error(file, jsonpath.key(path, "symbol"), f"{label}: the archive entry "
                       f"'{got.toc_key}': {e}")
            return
        recorded = [packed.signature_arg(a) for a in got.signature]
        if recorded != signature:
            self.error(file, jsonpath.key(path, "signature"), f"{label}: signature "
                       f"{describe_signature(recorded)} differs from the one read from the "
                       f"code object for '{got.symbol}', {describe_signature(signature)}")


#: A sidecar holds a few kilobytes of JSON; one that inflates past this is refused
#: unread (a gzip bomb must not take the machine down).
MAX_SIDECAR_BYTES = 64 << 20


def read_sidecar(data: bytes) -> Any:
    """The JSON value inside a sidecar's gzip; raises ValueError saying why there is none."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            text = gz.read(MAX_SIDECAR_BYTES + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"expected gzip (a provenance sidecar), found bytes that are not: "
                         f"{e}") from None
    if len(text) > MAX_SIDECAR_BYTES:
        raise ValueError(f"expected a provenance sidecar, found gzip inflating past "
                         f"{MAX_SIDECAR_BYTES} bytes")
    try:
        return json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"expected JSON inside the gzip, found text that is not: "
                         f"{e}") from None


def _sidecar_doc(shard: Shard, rel: str, file: str, members: Sequence[Member]
                 ) -> tuple[Mapping[str, Any] | None, list[Problem]]:
    """The entries of one sidecar, or None with the problems that stop reading it."""
    path = shard.root / rel
    names = ", ".join(f"'{m.ukd.name}'" for m in members)
    found = None
    try:
        data = read_regular(path)  # a FIFO is refused unread, not waited on
    except (FileNotFoundError, NotADirectoryError):
        found = "nothing"
    except NotRegularFileError as e:
        if e.found != "a folder":
            return None, [Problem(rel, "", f"cannot read the provenance sidecar: {e.strerror}")]
        found = e.found
    except OSError as e:
        return None, [Problem(rel, "", f"cannot read the provenance sidecar: {e.strerror}")]
    if found is not None:
        return None, [Problem(rel, "", f"provenance sidecar missing: {file} holds packed "
                              f"kernels ({names}) whose provenance the packer writes to {rel}; "
                              f"found {found} there")]
    try:
        doc = read_sidecar(data)
    except ValueError as e:
        return None, [Problem(rel, "", str(e))]
    if not isinstance(doc, dict):
        return None, [Problem(rel, "$", "expected an object {version, kdp_id, entries}, found "
                              f"{_show(doc)[:80]}")]
    problems = []
    if doc.get("version") != provenance.SIDECAR_VERSION:
        problems.append(Problem(rel, "$.version", f"expected "
                                f"\"{provenance.SIDECAR_VERSION}\", found "
                                f"{_value(doc, 'version')}"))
    kdp = members[0].kdp
    if doc.get("kdp_id") != kdp.id:
        problems.append(Problem(rel, "$.kdp_id", f"expected \"{kdp.id}\" (pack '{kdp.name}', "
                                f"{kdp.file}), found {_value(doc, 'kdp_id')}"))
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        problems.append(Problem(rel, "$.entries", "expected an object from kernel id to "
                                f"entry, found {_value(doc, 'entries')[:80]}"))
        return None, problems
    return entries, problems


def sidecar_problems(shard: Shard) -> list[Problem]:
    """Every provenance sidecar the packed descriptors imply (``{stem}.provenance.json.gz``
    beside each file holding packed kernels): there, readable, with one entry per kernel of
    its file and none for any other, each bound (``provenance.binding``) to the packed
    kernel as it is in the shard."""
    by_file: dict[str, list[Member]] = {}
    for m in shard.tree.members:
        by_file.setdefault(m.ukd.file, []).append(m)
    # A file whose own problems were reported holds kernels that did not load: an entry
    # for one of them is not foreign.
    unread = shard.tree.failed_files
    problems: list[Problem] = []
    for file, members in by_file.items():
        rel = provenance.sidecar_name(file)
        entries, found = _sidecar_doc(shard, rel, file, members)
        problems += found
        if entries is None:
            continue
        by_key = {id_key(k): k for k in entries}
        for m in members:
            ukd = m.ukd
            key = by_key.get(ukd.key)
            if key is None:
                problems.append(Problem(rel, "$.entries", f"no entry for kernel '{ukd.name}' "
                                        f"({ukd.id}, {ukd.where()}); the packer writes one for "
                                        "every packed kernel"))
                continue
            at = jsonpath.key("$.entries", key)
            entry = entries[key]
            if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
                problems.append(Problem(rel, at, f"{kernel_label(ukd)}: expected an object "
                                        f"{{sha256, provenance}}, found {_show(entry)[:80]}"))
                continue
            if not isinstance(entry.get("provenance"), dict):
                problems.append(Problem(rel, jsonpath.key(at, "provenance"),
                                        f"{kernel_label(ukd)}: expected an object, found "
                                        f"{_value(entry, 'provenance')[:80]}"))
            digest = provenance.binding(ukd.raw)
            if entry["sha256"] != digest:
                problems.append(Problem(rel, jsonpath.key(at, "sha256"),
                                        f"{kernel_label(ukd)}: binding digest {entry['sha256']} "
                                        f"differs from {digest}, the digest of the packed "
                                        f"kernel ({ukd.where()}); the entry was written for "
                                        "another version of it"))
        mine = {m.ukd.key for m in members}
        for k in sorted(entries):
            if id_key(k) not in mine and file not in unread:
                problems.append(Problem(rel, jsonpath.key("$.entries", k), f"entry for "
                                        f"'{k}', which is no kernel of {file}"))
    return problems


def _name_order(name: str | None) -> str:
    return name or ""


def _launch_list(launches: Mapping[str | None, Any]) -> str:
    names = sorted(n for n in launches if n is not None)
    return "{" + ", ".join(names) + "}" if names else "{} (a single launch)"


def _where(d: Descriptor) -> str:
    return d.file if d.json_path == "$" else f"{d.file}: {d.json_path}"


def _value(doc: Mapping[str, Any], key: str) -> str:
    return _show(doc[key]) if key in doc else "absent"


def verify(shard_path: Path, source_root: Path, exclude_folders: Sequence[str] = (),
           arch: str | None = None) -> Verification:
    """Check the shard at ``shard_path`` against what ``source_root`` says it must hold.
    Raises UkdError when the root itself breaks the rules (there is nothing to compare
    against) or the shard's arch cannot be told."""
    shard = load_shard(shard_path, arch)
    if shard.arch is None:
        raise UkdError(Problem(str(shard_path), "", "cannot tell the shard's arch (its folder "
                               "is not named for one and its packs name several or none); "
                               "pass --arch"))
    # The packer's own gate: a root that breaks a rule packs nothing, so there is no shard
    # it could stand for. An unpulled prebuilt object is not such a rule here.
    root = load_tree(source_root, exclude_folders, arches=[shard.arch])
    refused = errors_only(check_tree(root, missing_prebuilt="skip"))
    if refused:
        raise UkdError([Problem(f"{source_root}/{p.file}" if p.file else str(source_root),
                                p.path, p.message) for p in refused]
                       + [Problem(str(source_root), "", "the source root breaks the rules "
                                  "above; verify compares a shard with a root that packs")])
    plan = plan_arch(root, shard.arch)
    checker = _Checker(shard, root, plan)
    checker.packs()
    checker.kernels()
    checker.generics()
    problems = (shard.with_runtime(shard.problems, checker.problems, every_launch=True)
                + sidecar_problems(shard))
    return Verification(shard, source_root, tuple(problems), len(plan.members),
                        len(plan.launches), shard_slots(shard))

