"""``ukdpack verify SHARD --source-root R``: the shard against what the root says it
must hold (SPEC 10).

What the shard must hold is derived by the packer's own code: the root is read by
``tree.load_tree`` and checked by the same rules, ``plan.plan_arch`` says which
kernels and launches the arch gets and each launch's toc key (``tockey``), and
``Ukd.file_of`` finds each prebuilt object. Nothing is compiled: a compiled
launch is checked by toc key, symbol, archive membership, digest and the signature
read back from the archived object; a prebuilt one also byte for byte against the
root's file. Launches are compared by name, never by position, and every mismatch
is reported, one problem each, naming the kernel and the launch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack import codeobject, jsonpath, packed
from ukdpack.errors import Problem, Severity, UkdError, errors_only
from ukdpack.kinds import kind
from ukdpack.model import GENERIC_TYPES, Descriptor, Kdp, Uhd
from ukdpack.paths import PathRefused, resolve
from ukdpack.plan import ArchPlan, Launch, plan_arch
from ukdpack.shard import Shard, ShardLaunch, describe_signature, launch_label, load_shard
from ukdpack.tree import Member, Tree, load_tree
from ukdpack.validate import check_tree

#: Fields of a UKD the packer rewrites or moves; every other field ships as authored.
_REWRITTEN = frozenset({"kernel_source", "sources", "provenance", "arch"})
_TYPE_NAMES = {"Kdp": "KDP", "Ukd": "UKD", "Udd": "UDD", "Ued": "UED", "Kmd": "KMD",
               "Umd": "UMD", "Uhd": "UHD"}


def _show(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Verification:
    """The verdict on one shard: every mismatch, notes included."""

    shard: Shard
    source_root: Path
    problems: tuple[Problem, ...]
    kernels: int
    launches: int

    @property
    def ok(self) -> bool:
        return not errors_only(self.problems)

    def summary(self) -> str:
        counts = f"{self.kernels} kernels, {self.launches} launches for {self.shard.arch}"
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
            if isinstance(d, Uhd) and d.artifact is not None:
                self._artifact(d)
        for got in self.shard.tree.descriptors:
            if isinstance(got, GENERIC_TYPES) and got.key not in keys:
                self.error(got.file, "$", f"{_TYPE_NAMES[type(got).__name__]} '{got.name}' "
                           f"({got.id}) is in the shard, but no pack the root ships for "
                           f"{self.arch} reaches it")

    def _artifact(self, uhd: Uhd) -> None:
        assert uhd.artifact is not None
        path = f"$.{uhd.adapter}.artifact"
        try:
            mine = resolve(self.root.root, uhd.folder, uhd.artifact, what="artifact")
            theirs = resolve(self.shard.root, uhd.folder, uhd.artifact, what="artifact")
        except PathRefused as e:
            self.error(uhd.file, path, f"UHD '{uhd.name}': {e}")
            return
        if mine.path.read_bytes() != theirs.path.read_bytes():
            self.error(uhd.file, path, f"UHD '{uhd.name}': artifact {theirs.rel} differs from "
                       "the root's")

    def _same_place(self, got: Descriptor, want: Descriptor, what: str) -> None:
        if got.file != want.file or got.json_path != want.json_path:
            self.error(got.file, got.json_path, f"{what} sits at {_where(got)} in the shard; the "
                       f"root puts it at {_where(want)}")

    def _fields(self, got: Descriptor, want: Mapping[str, Any], have: Mapping[str, Any],
                what: str, skip: Iterable[str] = ()) -> None:
        """Every field that ships as authored, compared one by one."""
        left_out = set(skip)
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
            self.error(ukd.file, ukd.json_path, f"kernel '{ukd.name}' sits in pack "
                       f"'{got.kdp.name}' ({got.kdp.file}); the root puts it in pack "
                       f"'{want.kdp.name}' ({want.kdp.file})")
        elif ukd.file != want.ukd.file:
            self.error(ukd.file, ukd.json_path, f"kernel '{ukd.name}' sits in {ukd.file}; the "
                       f"root has it in {want.ukd.file}")
        authored = {k: v for k, v in want.ukd.raw.items() if k not in _REWRITTEN}
        have = {k: v for k, v in ukd.raw.items() if k not in _REWRITTEN}
        self._fields(ukd, authored, have, f"kernel '{ukd.name}'")
        # The packer narrows a UKD's own arch to the shard's; one that names none ships none.
        want_arch = [self.arch] if "arch" in want.ukd.raw else None
        if ukd.raw.get("arch") != want_arch:
            self.error(ukd.file, jsonpath.key(ukd.json_path, "arch"),
                       f"kernel '{ukd.name}': arch is {_value(ukd.raw, 'arch')} in the shard, "
                       f"expected {_show(want_arch) if want_arch else 'none'} for the "
                       f"{self.arch} shard")
        expected = {ln.name: ln for ln in self.plan.launches_of(want.ukd)}
        shipped = self.shard.launches_of(ukd)
        where = jsonpath.key(ukd.json_path, "sources" if ukd.kernel_source is None
                             else "kernel_source")
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
        if want.job_key is None:  # embedded_source: ships as authored
            if dict(got.source.fields) != dict(want.source.fields):
                self.error(file, path, f"{label}: the {want.source.kind} source is "
                           f"{_show(dict(got.source.fields))} in the shard, "
                           f"{_show(dict(want.source.fields))} in the root")
            return
        if not got.packed:
            self.error(file, jsonpath.key(path, "kind"), f"{label}: expected a packed entry "
                       f"(kind 'kpack'), found kind '{got.source.kind}'")
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
        blob = self._blob(got)
        if blob is None:
            return
        digest = hashlib.sha256(blob).hexdigest()
        if got.sha256 != digest:
            self.error(file, jsonpath.key(path, "sha256"), f"{label}: sha256 {got.sha256} "
                       f"differs from the digest of its archive entry, {digest}")
        if want.source.kind == "hsaco":
            self._prebuilt(want, got, blob)
        self._code(got, blob)

    def _blob(self, got: ShardLaunch) -> bytes | None:
        """The archived bytes of a launch, or None after saying why there are none."""
        label, file, path = got.label(), got.ukd.file, got.json_path
        opened = self.shard.archive_of(got)
        if opened.archive is None:
            self.error(file, jsonpath.key(path, "library"), f"{label}: {opened.error}")
            return None
        if (got.toc_key, self.arch) not in opened.archive:
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: the archive "
                       f"{opened.rel} holds no entry for toc key '{got.toc_key}' and arch "
                       f"{self.arch}")
            return None
        try:
            return opened.archive.get(got.toc_key, self.arch)
        except ValueError as e:  # KpackError: a corrupt frame, a size that lies
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: {e}")
            return None

    def _prebuilt(self, want: Launch, got: ShardLaunch, blob: bytes) -> None:
        """A prebuilt object ships as the root holds it (its ELF, unwrapped from a bundle)."""
        label, file, path = got.label(), got.ukd.file, got.json_path
        rel = want.member.ukd.file_of(want.source)
        assert rel is not None
        try:
            image = codeobject.elf_image((self.root.root / rel).read_bytes())
        except codeobject.CodeObjectError as e:
            self.error(file, path, f"{label}: the root's prebuilt object {rel}: {e}")
            return
        if image != blob:
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: the archive entry "
                       f"differs from the root's prebuilt object {rel} (sha256 "
                       f"{hashlib.sha256(image).hexdigest()})")

    def _code(self, got: ShardLaunch, blob: bytes) -> None:
        """Symbol, signature and target, read back from the archived object."""
        label, file, path = got.label(), got.ukd.file, got.json_path
        try:
            target = codeobject.target_arch(blob)
            signature = codeobject.read_signature(blob, got.symbol)
        except codeobject.CodeObjectError as e:
            self.error(file, jsonpath.key(path, "symbol"), f"{label}: the archive entry "
                       f"'{got.toc_key}': {e}")
            return
        if target != self.arch:
            self.error(file, jsonpath.key(path, "toc_key"), f"{label}: the archive entry "
                       f"'{got.toc_key}' is built for {target}, not {self.arch}")
        recorded = [packed.signature_arg(a) for a in got.signature]
        if recorded != signature:
            self.error(file, jsonpath.key(path, "signature"), f"{label}: signature "
                       f"{describe_signature(recorded)} differs from the one read from the "
                       f"code object for '{got.symbol}', {describe_signature(signature)}")


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
    problems = list(shard.problems) + checker.problems
    return Verification(shard, source_root, tuple(problems), len(plan.members),
                        len(plan.launches))

