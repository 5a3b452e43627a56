"""``ukdpack pack``: one shard per arch from an authored tree.

Data flows one way: walk -> validate (every rule, all arches; a tree that fails
packs nothing, but a slot empty on an arch fails only that arch) -> plan (per arch: kernels, launches, distinct code objects) ->
produce (all arches' jobs in one pool) -> per arch: pack the archive, rewrite the
descriptors, move provenance out, check the staged shard with the C++ runtime,
publish. A failing arch leaves no shard and does not stop the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ukdpack import _runtime, collector, reports
from ukdpack.authored.kinds import kind, normalized_build
from ukdpack.authored.load import ARCHIVE_FOLDER, Member, Tree, load_tree
from ukdpack.authored.model import Kdp, Uhd, Ukd, read_document
from ukdpack.authored.validate import check_tree
from ukdpack.errors import Problem, UkdError, UsageError, escape_controls, has_controls
from ukdpack.files import found_at, read_regular
from ukdpack.produce import cache_admin, early_compiles, hits
from ukdpack.produce.cache import CompileCache, default_cache_dir
from ukdpack.produce.limits import DEFAULT_JOB_TIMEOUT
from ukdpack.produce.plan import ArchPlan, Job, Launch, plan_arch
from ukdpack.produce.producers import Producer, Product
from ukdpack.progress import Reporter
from ukdpack.reports import problem_doc
from ukdpack.shard import archive as kpack
from ukdpack.shard import packed, provenance, publish, reuse
from ukdpack.shard.depfile import UnwritablePath, write_depfile
from ukdpack.shard.runtime_check import HandlerManifest, load_handler_manifest, set_problems
from ukdpack.words import count

if TYPE_CHECKING:
    from ukdpack.produce.remote import RemoteConfig, RemoteStats, RemoteTier
    from ukdpack.produce.remote_exec import RemoteExecConfig, RemoteExecStats, RemoteExecTier

DEFAULT_GROUP = "kernels"


def normalize_arches(names: Sequence[str], allow_unknown: bool = False,
                     reported: Callable[[str], Collection[str] | str] | None = None
                     ) -> list[str]:
    """The shards: bare arches (feature suffixes stripped), duplicates dropped, order
    kept; refuses non-arches, target IDs with features the arch does not support, and
    (unless ``allow_unknown``) arches neither in the target table nor in what
    ``reported(arch)`` says the chosen compiler builds (a list, or why it cannot say)."""
    out: list[str] = []
    for name in names:
        bare = _runtime.bare_arch(name.strip())
        if not _runtime.is_arch_name(bare):
            raise UsageError(f"--arch {name}: expected a GPU arch such as gfx90a or sm_90"
                             f"{_did_you_mean(bare)}")
        if why := _runtime.target_id_problem(name.strip()):
            raise UsageError(f"--arch {name}: {why}")
        if not allow_unknown and not _runtime.is_known_target(bare):
            listed = reported(bare) if reported is not None else "no compiler was asked"
            if isinstance(listed, str) or bare not in listed:
                compiler = (f"; the compiler cannot say ({listed})" if isinstance(listed, str)
                            else "; the compiler does not list it either")
                raise UsageError(f"--arch {name}: unknown GPU arch (not in ukdpack's target "
                                 f"table{compiler}){_did_you_mean(bare)}; to pack for it "
                                 "anyway, add --allow-unknown-arch")
        if bare not in out:
            out.append(bare)
    return out


def _did_you_mean(bare: str) -> str:
    near = _runtime.nearest_targets(bare)
    if not near:
        return ""
    listed = near[0] if len(near) == 1 else f"{', '.join(near[:-1])} or {near[-1]}"
    return f"; did you mean {listed}?"


def arch_variants(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The target IDs asked for each bare arch, canonical (``--arch gfx90a:xnack+ --arch
    gfx90a:xnack-``: both variants in the gfx90a shard); an arch named bare too keeps a
    variant without features. Arches named only bare have none (one object each)."""
    out: dict[str, list[str]] = {}
    for name in names:
        target = str(_runtime.canonical_target_id(name.strip()) or name.strip())
        bare = str(_runtime.bare_arch(target))
        if target not in out.setdefault(bare, []):
            out[bare].append(target)
    return {a: tuple(ts) for a, ts in out.items() if ts != [a]}


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class PackOptions:
    source_root: Path
    out_root: Path
    arches: tuple[str, ...]
    group: str = DEFAULT_GROUP
    jobs: int = 1
    hipcc: str | None = None
    nvcc: str | None = None
    handlers: Path | None = None
    cache_dir: Path | None = None
    depfile: Path | None = None
    depfile_target: str | None = None
    exclude_folders: tuple[str, ...] = ()
    required: bool = False
    lock_timeout: float = 600.0
    job_timeout: float = DEFAULT_JOB_TIMEOUT
    remote: RemoteConfig | None = None  # the shared cache tier (docs/remote-cache.md)
    #: compiles on a build farm, behind both caches (docs/packing.md, --remote-exec)
    remote_exec: RemoteExecConfig | None = None
    #: target IDs with features per bare arch (arch_variants); an arch not here builds
    #: one object per source, for the bare arch
    variants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class ArchResult:
    arch: str
    ok: bool
    published: Path | None = None
    kernels: int = 0
    launches: int = 0
    objects: int = 0
    archive_bytes: int = 0
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    dormant: bool = False  # no kernels for the arch: no shard, nothing to tell
    removed_stale: bool = False  # a failed arch's previous shard was removed


@dataclass
class PackReport:
    arches: list[ArchResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # tree-level
    dormant: bool = False
    compiles: int = 0  # compiler runs that made an object
    compiled_early: int = 0  # of them, those started before the plan (produce/early_compiles.py)
    failed_jobs: int = 0  # code objects not made (a failed compile, a missing compiler)
    remote: RemoteStats | None = None  # the remote cache tier's use, when one was given
    remote_exec: RemoteExecStats | None = None  # remote execution's, when asked for

    @property
    def failed(self) -> list[str]:
        return [r.arch for r in self.arches if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed and not any(p.severity == "error" for p in self.problems)


def _symbol_of(launch: Launch, product: Product) -> str | Problem:
    src = launch.source
    field_name = kind(src.kind).symbol_field
    if field_name is not None:
        symbol = str(src.fields[field_name])
    else:  # builder: the entry it names, or the object's only kernel
        entry = src.fields.get("entry")
        if entry is None and len(product.info.kernels) != 1:
            return Problem(launch.member.ukd.file, src.json_path,
                           f"the object built for this launch holds kernels "
                           f"{', '.join(product.info.kernels) or '(none)'}; name the one to "
                           "launch with 'entry'")
        symbol = str(entry) if entry is not None else product.info.kernels[0]
    if symbol not in product.info.signatures:
        return Problem(launch.member.ukd.file, src.json_path,
                       f"symbol '{symbol}' is not a kernel of {product.job.what()}; it "
                       f"holds {', '.join(product.info.kernels) or 'no kernels'}")
    return symbol


def _signature(made: dict[tuple[str, str], list[dict[str, Any]]], product: Product,
               symbol: str) -> list[dict[str, Any]]:
    """The signature of ``symbol`` in ``product`` in shard form, made once per object and
    symbol (``made`` keeps them: many launches share one)."""
    found = made.get((product.sha256, symbol))
    if found is None:
        found = made[(product.sha256, symbol)] = packed.signature_doc(
            product.info.signatures[symbol])
    return found


def _same_target(launch: Launch, products: Sequence[Product]) -> Problem:
    """Two targets asked of one launch made objects for one target ID (a compiler that
    ignores a feature): the shard could not tell them apart."""
    made = ", ".join(f"{p.job.compile_target} -> {p.info.entry_target}" for p in products)
    return Problem(launch.member.ukd.file, launch.source.json_path,
                   f"the objects built for this launch do not differ by target ({made}); "
                   "each requested target ID needs an object built for it")


def _identity(ukd: Ukd, launch: Launch) -> dict[str, Any]:
    """The authored identity of one launch, root-relative, for provenance: each authored
    field of its kind, the file named root-relative and the build normalized."""
    src = launch.source
    k = kind(src.kind)
    out: dict[str, Any] = {}
    for name in k.fields:
        if name == k.file_field:
            out[name] = ukd.file_of(src)
        elif name == "build" and k.producer == "compile":
            out[name] = normalized_build(src.fields.get("build"))
        elif name in src.fields:
            out[name] = src.fields[name]
    return out


def _data(product: Product) -> bytes:
    assert product.data is not None  # None only where its frame is made
    return product.data


def _write_index(staging: Path, dset: _runtime.DescriptorSet, previous: tuple[str, list[str]]
                 ) -> _runtime.ShardIndexDraft | None:
    """The shard's index (docs/shards.md) beside its descriptors, published with them: the
    runtime then reads each kernel from its bytes. Made from ``dset``, the staged shard's
    JSON load, which the runtime check loads anyway; only a shard whose load says nothing
    gets one; without it the runtime reads the JSON, with the same result. ``previous``
    (``reuse.Parts.previous_index``): the files whose kernels the previous shard's index
    confirmation read back already. Its draft, for ``_confirm_index`` once ``dset`` is
    freed, or None when none was written."""
    draft, _why = _runtime.shard_index_draft(dset, *previous)
    if draft is not None:
        publish.write_file(staging, _runtime.SHARD_INDEX_FILE, draft.data)
    return draft


def _confirm_index(staging: Path, draft: _runtime.ShardIndexDraft) -> bool:
    """Keep the index written only if the load through it is the JSON load it was made
    from, kernel by kernel (else the shard goes without one, read from its JSON); whether
    it was kept."""
    if draft.confirm(str(staging)):
        (staging / _runtime.SHARD_INDEX_FILE).unlink()
        return False
    return True


def _failed(problems: list[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)


def _start_entry_check(archives: _runtime.ArchiveCache, archive: Path,
                       threads: int) -> threading.Thread:
    """``archives.check_entries`` of ``archive`` on a thread of its own, started now."""
    thread = threading.Thread(target=archives.check_entries, args=(str(archive), threads),
                              name="ukdpack-entry-check")
    thread.start()
    return thread


#: One pack's files as ``_Assembler._part`` makes them: (key, files by shard-relative
#: path, [(path, sha256)], whether they are the previous shard's).
_Part = tuple[str, dict[str, bytes], list[tuple[str, str]], bool]


@dataclass(frozen=True)
class Premade:
    """What ``_Assembler.premake`` made of one arch's shard while the compiles ran: the
    compiler versions it was made for, the reuse state (previous shard, record) and each
    pack whose objects were all made, by KDP key."""

    versions: dict[str, str]
    state: reuse.Parts
    parts: dict[str, _Part]
    #: the launches whose objects were made, packed, and the objects they use (as
    #: ``_pack_launches`` makes them), and those objects' archive frames
    launches: dict[tuple[str, str | None], packed.PackedLaunch]
    used: dict[tuple[str, str], Product]
    frames: dict[tuple[str, str], bytes]


class _Assembler:
    """Builds, checks and publishes the shard of one arch."""

    def __init__(self, tree: Tree, opts: PackOptions, plan: ArchPlan,
                 products: Mapping[tuple[str, str, str], Product | Problem],
                 versions: Mapping[str, str], handlers: HandlerManifest | None,
                 reporter: Reporter,
                 provenances: dict[tuple[str, str], dict[str, Any]] | None = None,
                 parts_record: Path | None = None,
                 raw_digests: dict[tuple[str, str], str] | None = None,
                 premade: Premade | None = None) -> None:
        self.tree, self.opts, self.plan = tree, opts, plan
        self.products, self.versions = products, versions
        self.handlers, self.reporter = handlers, reporter
        #: each kernel's sidecar provenance by (file, JSON path), shared by the arches
        #: (None: made anew, a pack of one arch holding none of them)
        self.provenances = provenances
        self.arch = plan.arch
        self.archive_name = kpack.archive_name(opts.group, self.arch)
        #: the record of this shard's parts (None: no reuse of the previous shard's files)
        self.parts_record = parts_record
        self.parts: reuse.Parts | None = None
        self.result = ArchResult(self.arch, ok=False)
        self._threads: list[threading.Thread] = []  # joined before the staging is used
        self.raw_digests = raw_digests if raw_digests is not None else {}
        #: the packs made while the compiles ran (``premake``), used by ``prepare``
        self.premade = premade

    def run(self) -> ArchResult:
        """Build, check and publish the shard: ``prepare``, then ``finish``."""
        return self.finish() if self.prepare() else self.result

    def prepare(self) -> bool:
        """Build the shard in its staging folder, its archive's entries checked: all but
        the runtime check and publishing (``finish``). False when the arch has failed
        already (``self.result`` says why; its staging is the caller's to remove)."""
        self._start = time.monotonic()
        result = self.result = ArchResult(self.arch, ok=False)
        # dict.fromkeys: one problem shared by many jobs (no compiler) is told once.
        problems = list(dict.fromkeys(p for job in self.plan.jobs
                                      if isinstance(p := self.products[job.key], Problem)))
        early = self.premade if self.premade is not None and not problems else None
        # by (kernel key, launch name); the launches made beside the compiles are taken
        launches = dict(early.launches) if early is not None else {}
        # by (toc key, target ID filed under)
        used: dict[tuple[str, str], Product] = dict(early.used) if early is not None else {}
        if not problems:
            self._pack_launches(launches, used, problems)
        if problems:
            result.problems = problems
            return False
        try:
            self._staging = staging = publish.fresh_staging(self.opts.out_root, self.arch)
            self._archive_bytes, synced = self._write_archive(staging, used)
            self._threads += [synced] if synced is not None else []
            # The runtime check's work on the archive (decompress and hash each entry)
            # runs while the descriptors are made: it waits on nothing they hold.
            self._archives = archives = _runtime.ArchiveCache()
            checking = _start_entry_check(archives, staging / ARCHIVE_FOLDER
                                          / self.archive_name, self.opts.jobs) if used else None
            self._threads += [checking] if checking is not None else []
            if self.premade is not None and self.premade.versions != dict(self.versions):
                self.premade = None  # made for other compilers: not this shard's
            if self.premade is not None:
                self.parts = self.premade.state
            elif self.parts_record is not None:
                self.parts = reuse.Parts(
                    reuse.PreviousShard(self.opts.out_root / self.arch),
                    reuse.read_record(self.parts_record), self.raw_digests)
            files = self._descriptor_files(launches, problems)
            if checking is not None:
                checking.join()
            if problems:  # an unreadable artifact fails the arch (its staging goes)
                result.problems = problems
                self._join()
                return False
            reuse.stage_files(staging, files, self.parts.previous if self.parts else None,
                              publish.write_file)
            del files  # the check's own set reuses the memory of these bytes
            collector.trim()
            # The disk writes the staged files while the runtime check reads them;
            # publishing syncs only what this did not (and fails on what failed here).
            self._threads.append(publish.start_fsync_tree(staging))
        except BaseException as e:
            self._join()
            if isinstance(e, Exception):  # as in finish()
                publish.remove_shard(self.opts.out_root, self.arch)
            raise
        self._objects = len(used)
        return True

    def _pack_launches(self, launches: dict[tuple[str, str | None], packed.PackedLaunch],
                       used: dict[tuple[str, str], Product], problems: list[Problem],
                       partial: bool = False) -> None:
        """Each launch's packed form into ``launches`` (by kernel key and launch name) and
        each object it uses into ``used``; what fails goes to ``problems``. ``partial``:
        launches whose products are not all made yet are left out."""
        # Each object's kernel signatures in shard form, made once: many launches share one.
        signatures: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (sha256, symbol)
        for ln in self.plan.launches:
            if ln.job_key is None or (where := (ln.member.ukd.key, ln.name)) in launches:
                continue
            keys = ln.job_keys or (ln.job_key,)
            if len(keys) == 1:  # one object (most launches): as below, without the variants
                one = self.products.get(keys[0])
                if not isinstance(one, Product):
                    assert partial, "prepare packs launches once every job made its object"
                    continue
                found = _symbol_of(ln, one)
                if isinstance(found, Problem):
                    problems.append(found)
                    continue
                target = one.info.entry_target
                used[(one.job.toc_key, target)] = one
                launches[where] = packed.PackedLaunch(
                    one.job.toc_key, found, one.sha256, _signature(signatures, one, found),
                    {target: one.sha256} if ":" in target else {})
                continue
            if partial and not all(isinstance(self.products.get(k), Product) for k in keys):
                continue
            variants = [self.products[k] for k in keys]
            symbols = []
            for product in variants:
                assert isinstance(product, Product)
                symbols.append(_symbol_of(ln, product))
            if bad := [s for s in symbols if isinstance(s, Problem)]:
                problems.append(bad[0])
                continue
            products = [p for p in variants if isinstance(p, Product)]
            symbol = str(symbols[0])
            by_target = {p.info.entry_target: p for p in products}
            if len(by_target) < len(products):  # two targets made the same one
                problems.append(_same_target(ln, products))
                continue
            for target, product in by_target.items():
                used[(product.job.toc_key, target)] = product
            # The default digest is the most general variant's (fewest features).
            main = min(products, key=lambda p: (p.info.entry_target.count(":"),
                                                p.info.entry_target))
            launches[where] = packed.PackedLaunch(
                main.job.toc_key, symbol, main.sha256, _signature(signatures, main, symbol),
                # Recorded for several variants, or one with feature settings (which
                # a device named by its bare arch would not reach): the checks load
                # each as a device of its setting.
                {t: p.sha256 for t, p in sorted(by_target.items())}
                if len(by_target) > 1 or ":" in next(iter(by_target)) else {})

    def premake(self) -> Premade | None:
        """The packs whose objects are all made already (``self.products`` holds what is
        made so far, while the compiles run), each with its key and files as
        ``prepare`` would make them; None when there is no reuse or something failed
        (``prepare`` then finds it)."""
        if self.parts_record is None:
            return None
        problems: list[Problem] = []
        launches: dict[tuple[str, str | None], packed.PackedLaunch] = {}
        used: dict[tuple[str, str], Product] = {}
        self._pack_launches(launches, used, problems, partial=True)
        if problems:
            return None
        waiting = {ln.member.ukd.key for ln in self.plan.launches
                   if ln.job_key is not None and (ln.member.ukd.key, ln.name) not in launches}
        self.parts = reuse.Parts(reuse.PreviousShard(self.opts.out_root / self.arch),
                                 reuse.read_record(self.parts_record), self.raw_digests)
        on_arch = self.plan.on_arch
        made = Premade(dict(self.versions), self.parts, {}, launches, used,
                       {k: kpack.compress_frame(_data(p)) for k, p in used.items()
                        if p.frame is None})
        for kdp in self.tree.shipped(self.arch).kdps:
            if any(ukd.key in waiting for ukd in self._kernels_of(kdp)):
                continue
            made.parts[kdp.key] = self._part(kdp, on_arch, launches)
        return made

    def _join(self) -> None:
        for thread in self._threads:
            thread.join()

    def finish(self) -> ArchResult:
        """The runtime check of the prepared staging shard and, if it passes, publishing:
        C++ and file system calls, which may run on a thread beside the next arch's
        ``prepare``."""
        result = self.result
        try:
            try:
                # The runtime check loads the staged JSON, as without an index, and the
                # index is made from that load first: its file and folder entry reach
                # the disk while the check runs. The load through the index is checked
                # after, once the JSON load is freed (one loaded set at a time).
                dset = _runtime.load_shard(str(self._staging), use_index=False)
                index = _write_index(self._staging, dset, self.parts.previous_index()
                                     if self.parts is not None else ("", []))
                if index is not None:
                    self._threads.append(publish.start_fsync(
                        self._staging / _runtime.SHARD_INDEX_FILE, self._staging))
                result.problems = set_problems(dset, self.arch, self.handlers,
                                               self.opts.jobs, self._archives)
                del dset
                kept = (index is not None and not _failed(result.problems)
                        and _confirm_index(self._staging, index))
            finally:
                self._join()
            if _failed(result.problems):
                publish.remove_shard(self.opts.out_root, self.arch)
                return result
            result.published = publish.publish(
                self._staging, self.opts.out_root, self.arch,
                [t for t in self._threads if isinstance(t, publish.EarlySync)])
            if self.parts is not None and self.parts_record is not None:
                reuse.write_record(self.parts_record, self.parts.made,
                                   index.data if kept and index is not None else None)
        except Exception:
            # An internal failure fails the arch as a refusal does. An interrupt is not a
            # verdict on the shard: the lock's exit leaves what a kill would (the previous
            # shard or the new one, no staging).
            publish.remove_shard(self.opts.out_root, self.arch)
            raise
        result.ok = True
        result.kernels = len(self.plan.members)
        result.launches = len(self.plan.launches)
        result.objects = self._objects
        result.archive_bytes = self._archive_bytes
        result.seconds = time.monotonic() - self._start
        return result

    def _write_archive(self, staging: Path, used: Mapping[tuple[str, str], Product]
                       ) -> tuple[int, threading.Thread | None]:
        """Write the archive; its size and the thread that has started fsyncing it.
        ``used`` holds each object by (toc key, the target ID it is filed under)."""
        if not used:
            return 0, None
        order = sorted(used)
        # Prebuilt objects come compressed from their batch read; the others are
        # compressed here, in parallel (zstandard releases the GIL).
        early = self.premade.frames if self.premade is not None else {}
        todo = [k for k in order if used[k].frame is None and k not in early]
        if len(todo) <= 1:  # an edit's object: no pool started (its thread waits for the GIL)
            made = {k: kpack.compress_frame(_data(used[k])) for k in todo}
        else:
            with ThreadPoolExecutor(max_workers=max(1, self.opts.jobs)) as pool:
                made = dict(zip(todo, pool.map(lambda k: kpack.compress_frame(_data(used[k])),
                                               todo), strict=True))
        frames = [made[k] if k in made else early[k] if k in early else used[k].frame
                  for k in order]
        # Each entry is filed under its object's own target ID (gfx11-generic,
        # gfx90a:xnack+), as rocm-kpack files them; the archive's family is the shard arch.
        targets = sorted({target for _, target in used})
        writer = kpack.ArchiveWriter(self.opts.group, targets, family=self.arch)
        for (key, target), frame in zip(order, frames, strict=True):
            writer.add(key, target, used[(key, target)].data, frame=frame,
                       entry_type=kind(used[(key, target)].job.kind).entry_type)
        path = staging / ARCHIVE_FOLDER / self.archive_name
        # Not fsynced in the write: its fsync starts now, beside the runtime check, and
        # publishing fsyncs the staged shard's files and folders in one batch.
        writer.write(path, durable=False)
        return path.stat().st_size, publish.start_fsync(path)

    def _packed_kernel(self, m: Member, library_from: str,
                       launches: Mapping[tuple[str, str | None], packed.PackedLaunch]
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The packed UKD object and its sidecar entry."""
        own = self.plan.launches_of(m.ukd)
        key = m.ukd.key
        mine = {ln.name: launches[(key, ln.name)] for ln in own if (key, ln.name) in launches}
        library = packed.library_path(library_from, self.archive_name)
        raw = read_document(m.ukd.raw)  # read for this file alone: not kept by the model
        doc = packed.packed_ukd(raw, self.arch, mine, library, m.ukd.launches_key,
                                m.ukd.launch_names)
        return doc, {"sha256": provenance.binding(doc),
                     "provenance": self._provenance(m, own, raw)}

    def _provenance(self, m: Member, own: Sequence[Launch], raw: Mapping[str, Any]
                    ) -> dict[str, Any]:
        """The sidecar's provenance of one kernel: the same in every arch's shard (its
        launches and the compiler versions are), so made once per pack."""
        where = (m.ukd.file, m.ukd.json_path)
        found = self.provenances.get(where) if self.provenances is not None else None
        if found is not None:
            return found
        kinds = sorted({ln.source.kind for ln in own})
        prov: dict[str, Any] = {"origin_kind": kinds[0]}
        if m.ukd.kernel_source is not None:
            prov["source"] = _identity(m.ukd, own[0])
        else:
            prov["sources"] = {ln.name: _identity(m.ukd, ln) for ln in own}
        if kinds[0] in self.versions:
            prov["compiler"] = {"kind": kinds[0], "version": self.versions[kinds[0]]}
        if "provenance" in raw:
            prov["authored"] = raw["provenance"]
        if self.provenances is not None:
            self.provenances[where] = prov
        return prov

    def _kdp_files(self, kdp: Kdp, on_arch: Mapping[str, Member],
                   launches: Mapping[tuple[str, str | None], packed.PackedLaunch]
                   ) -> dict[str, bytes]:
        """The packed files of one pack: its KDP file, the standalone UKD files it names,
        and their sidecars, by shard-relative path."""
        files: dict[str, bytes] = {}
        kernels: list[Any] = []
        entries: dict[str, Any] = {}
        for ref in kdp.kernels:
            ukd = ref.inline if ref.inline is not None else self.tree.lookup(ref.ref, Ukd)
            if ukd is None or ukd.key not in on_arch:
                continue
            member = on_arch[ukd.key]
            if ref.inline is not None:
                doc, entry = self._packed_kernel(member, kdp.file, launches)
                kernels.append(doc)
                entries[ukd.id] = entry
            else:
                kernels.append(ref.ref)
                doc, entry = self._packed_kernel(member, ukd.file, launches)
                files[ukd.file] = packed.compact(doc)
                files[provenance.sidecar_name(ukd.file)] = provenance.sidecar_bytes(
                    kdp.id, {ukd.id: entry})
        files[kdp.file] = packed.compact(packed.packed_kdp(kdp.raw, self.arch, kernels))
        if entries:
            files[provenance.sidecar_name(kdp.file)] = provenance.sidecar_bytes(kdp.id, entries)
        return files

    def _part_key(self, kdp: Kdp, on_arch: Mapping[str, Member],
                  launches: Mapping[tuple[str, str | None], packed.PackedLaunch]) -> str:
        """The key of one pack's files (``_kdp_files``): everything they are made of."""
        assert self.parts is not None
        raws = self.parts.raw_digests
        inputs: list[Any] = [self.arch, self.archive_name, self.versions, kdp.file,
                             kdp.json_path, kdp.id]
        if (kdp.file, kdp.json_path) not in raws:
            raws[(kdp.file, kdp.json_path)] = reuse.digest_value(kdp.raw)
        inputs.append(raws[(kdp.file, kdp.json_path)])
        for ref in kdp.kernels:
            ukd = ref.inline if ref.inline is not None else self.tree.lookup(ref.ref, Ukd)
            if ukd is None:
                inputs.append([ref.json_path, ref.ref, None])
                continue
            where = (ukd.file, ukd.json_path)
            if where not in raws:
                raws[where] = reuse.raw_digest(ukd)
            own = []
            if ukd.key in on_arch:
                for ln in self.plan.launches_of(ukd):
                    pl = launches.get((ukd.key, ln.name))
                    # Not the signature: the object's digest and the symbol name it.
                    own.append([ln.name, ln.source.kind, ln.source.json_path] if pl is None else
                               [ln.name, ln.source.kind, ln.source.json_path, pl.toc_key,
                                pl.symbol, pl.sha256, sorted(pl.targets.items())])
            inputs.append([ref.json_path, ref.ref, ukd.file, ukd.json_path, ukd.id, raws[where],
                           ukd.key in on_arch, own])
        return reuse.part_key(inputs)

    def _kernels_of(self, kdp: Kdp) -> list[Ukd]:
        """The kernels ``kdp`` holds or names (those found in the tree)."""
        out = []
        for ref in kdp.kernels:
            ukd = ref.inline if ref.inline is not None else self.tree.lookup(ref.ref, Ukd)
            if ukd is not None:
                out.append(ukd)
        return out

    def _part(self, kdp: Kdp, on_arch: Mapping[str, Member],
              launches: Mapping[tuple[str, str | None], packed.PackedLaunch]) -> _Part:
        """The key of one pack's files, the files (the previous shard's where the record
        and their bytes allow, else made) and each file's sha256."""
        assert self.parts is not None
        key = self._part_key(kdp, on_arch, launches)
        known = self.parts.record.get(key)
        part = self.parts.previous.part(known) if known else None
        if part is not None and known:  # each file hashed by part() and found as recorded
            return key, part, list(known), True
        part = self._kdp_files(kdp, on_arch, launches)
        return (key, part, [(rel, hashlib.sha256(data).hexdigest()) for rel, data in part.items()],
                False)

    def _descriptor_files(self, launches: Mapping[tuple[str, str | None], packed.PackedLaunch],
                          problems: list[Problem]) -> dict[str, bytes]:
        """Every file of the shard but its archive, by shard-relative path; what cannot
        be read (a UHD artifact that is no longer a regular file) goes to ``problems``."""
        files: dict[str, bytes] = {}
        on_arch = self.plan.on_arch
        shipped = self.tree.shipped(self.arch)
        early = self.premade.parts if self.premade is not None else {}
        for kdp in shipped.kdps:
            if self.parts is None:
                files.update(self._kdp_files(kdp, on_arch, launches))
                continue
            made = early.get(kdp.key)
            key, part, digests, taken = made if made is not None else self._part(kdp, on_arch,
                                                                                launches)
            self.parts.made[key] = digests
            if taken:
                self.parts.taken.add(kdp.file)
            files.update(part)
        for generic in shipped.generics:
            files[generic.file] = packed.compact(packed.packed_generic(generic.raw))
            if isinstance(generic, Uhd) and generic.artifact_file is not None:
                rel = generic.artifact_file
                try:  # the loader checked it; it may have changed since (a FIFO now)
                    files[rel] = read_regular(self.tree.root / rel)
                except OSError as e:
                    problems.append(Problem(generic.file, generic.shipped_path,
                                            f"UHD '{generic.name}': cannot read artifact "
                                            f"{rel}: {e.strerror}"))
        return files


def _read_files(tree: Tree, plans: Sequence[ArchPlan],
                products: Mapping[tuple[str, str, str], Product | Problem]) -> list[str]:
    """Every file the pack read, absolute: for the depfile."""
    deps = [str(f.path) for f in tree.files]
    for plan in plans:
        for job in plan.jobs:
            product = products.get(job.key)
            if isinstance(product, Product):
                deps.extend(product.deps)
            elif job.rel is not None:
                deps.append(str(tree.root / job.rel))
        for generic in tree.shipped(plan.arch).generics:
            if isinstance(generic, Uhd) and generic.artifact_file is not None:
                deps.append(str(tree.root / generic.artifact_file))
    return [os.path.abspath(d) for d in deps]


def _relative_inside(child: Path, parent: Path) -> PurePosixPath | None:
    """``child`` relative to ``parent`` once both are resolved; None when it lies outside."""
    try:
        return PurePosixPath(child.resolve().relative_to(parent.resolve()).as_posix())
    except ValueError:
        return None


def _is_shard_name(name: str, arches: Sequence[str]) -> bool:
    """Whether ``name`` is a name the packer writes in an out root: a shard folder, or
    the staging, lock or moved-away name beside one."""
    m = _SHARD_SIDE_NAME.fullmatch(name)
    bare = m.group(1) if m else name
    return bare in arches or _runtime.is_arch_name(bare)


_SHARD_SIDE_NAME = re.compile(r"\.(.+)\.(?:staging|lock|old)")


def _unmakeable_folder(path: Path) -> str | None:
    """Why no folder can be used or made at ``path`` (what lies there, or on the way to
    it), or None when one can."""
    if os.path.lexists(path):
        return None if path.is_dir() else f"found {found_at(path)}"
    for parent in path.parents:
        if os.path.lexists(parent):
            return None if parent.is_dir() else (f"found nothing, and none can be made: "
                                                 f"{parent} is {found_at(parent)}")
    return None


def check_options(opts: PackOptions) -> None:
    """Refuse, before anything is read or written, option values that would make the
    packer write where it must not: a ``--group`` that is no plain file name (it names
    the archive file), a ``--depfile`` path that holds something other than a regular
    file (or cannot be made), a ``--depfile-target`` that a depfile cannot hold."""
    problems: list[Problem] = []
    why = kpack.group_problem(opts.group)
    if why is not None:
        problems.append(Problem("", "", f"--group: {why}; nothing was packed"))
    if opts.depfile is not None:
        dep = opts.depfile
        if os.path.lexists(dep) and not dep.is_file():
            problems.append(Problem("", "", f"--depfile {dep}: expected a regular file to "
                                    f"replace (or nothing), found {found_at(dep)}; the packer "
                                    "replaces only a file"))
        elif (why := _unmakeable_folder(dep.parent)) is not None:
            problems.append(Problem("", "", f"--depfile {dep}: expected a folder to write it "
                                    f"in, {why}"))
    target = opts.depfile_target
    if target is not None and (not target or has_controls(target)):
        problems.append(Problem("", "", f"--depfile-target {target!r}: expected the build's "
                                "target, a name that fits on one line of a Makefile "
                                "rule, found " + ("an empty string" if not target else
                                                  "control characters in it")))
    if problems:
        raise UsageError(problems)


def check_roots(root: Path, out_root: Path, arches: Sequence[str]) -> None:
    """Refuse, before anything is read or removed, roots that would make the packer
    write over or delete what it did not write: a source root that is missing, or that
    is or lies inside a shard (or its staging or lock) of the out root; an out root
    that is not a folder (a file, a dangling link) and cannot be made one; an out root
    inside the source root."""
    if not root.is_dir():
        found = "a file" if root.exists() else "nothing at that path"
        raise UsageError(f"--source-root {root}: expected a descriptor root folder, found "
                         f"{found}; nothing was packed and no shard was touched")
    why = _unmakeable_folder(out_root)
    if why is not None:
        raise UsageError(f"--out-root {out_root}: expected a folder for the shards (or "
                         f"nothing, and one is made), {why}; nothing was packed")
    if _relative_inside(out_root, root) is not None:
        raise UsageError(f"--out-root {out_root} lies inside --source-root {root}; the next "
                       "walk would read the shards as descriptors: put it elsewhere")
    rel = _relative_inside(root, out_root)
    if rel is not None and rel.parts and _is_shard_name(rel.parts[0], arches):
        raise UsageError(f"--source-root {root} lies inside {out_root / rel.parts[0]}, a "
                         "shard folder the packer replaces or removes; pack from the authored "
                         "tree, not from a shard, or choose another --out-root")


def pack(opts: PackOptions, reporter: Reporter) -> PackReport:
    """Pack every arch of ``opts``; problems go to ``reporter`` as they are found."""
    with collector.paused():
        return _pack(opts, reporter)


def _pack(opts: PackOptions, reporter: Reporter) -> PackReport:
    report = PackReport()
    opts = dataclasses.replace(opts, source_root=opts.source_root.absolute(),
                               out_root=opts.out_root.absolute())
    root, out_root = opts.source_root, opts.out_root
    check_options(opts)
    check_roots(root, out_root, opts.arches)
    handlers = load_handler_manifest(opts.handlers) if opts.handlers else None
    say = functools.partial(_say, reporter)
    tree = load_tree(root, opts.exclude_folders, arches=opts.arches)
    for s in tree.skipped:
        reporter.skipped(s)
    report.problems = check_tree(tree, missing_prebuilt="skip")
    for p in report.problems:
        reporter.problem(p)
    # An empty slot fails only the arches it is empty on (said above, naming engine,
    # slot and arch): there each arch's pack-time runtime check drops the engine.
    if any(p.severity == "error" and p.code != _runtime.Code.SLOT_EMPTY
           for p in report.problems):
        for arch in opts.arches:
            with publish.shard_lock(out_root, arch, opts.lock_timeout, say):
                if publish.remove_shard(out_root, arch):
                    say(f"{arch}: removed the stale shard {out_root / arch}")
        return report

    plans = [plan_arch(tree, arch, opts.variants.get(arch, ())) for arch in opts.arches]
    tree.release_set(opts.arches)
    collector.trim()
    if not any(p.members for p in plans):
        report.dormant = True
        what = f"no kernels for {', '.join(opts.arches)}"
        for arch in opts.arches:
            with publish.shard_lock(out_root, arch, opts.lock_timeout, say):
                publish.remove_shard(out_root, arch)
                if not opts.required:
                    publish.mark_dormant(out_root, arch, f"{root}: dormant: {what}")
        if opts.required:
            report.problems.append(Problem(str(root), "", f"{what}, and the root is required"))
            reporter.problem(report.problems[-1])
        else:
            say(f"{root}: dormant: {what}")
        # The descriptors decide dormancy: an edit that gives an arch kernels repacks it.
        _write_depfile(opts, tree, plans, {})
        return report

    cache = CompileCache(opts.cache_dir or default_cache_dir())
    cache.hits = hits.HitsRecord(hits.record_path(cache.folder, root, out_root, opts.group,
                                                  opts.arches))
    remote = None
    if opts.remote is not None:  # imported only for a pack that uses the tier
        from ukdpack.produce.remote import RemoteTier

        remote = RemoteTier(opts.remote)
    farm = None
    if opts.remote_exec is not None:
        from ukdpack.produce.remote_exec import RemoteExecTier

        farm = RemoteExecTier(opts.remote_exec)
        farm.start()  # down: one warning (require: the pack fails here, before any work)
    # Prebuilt objects are spooled in the out root (made now: each arch's lock makes it
    # anyway), where one arch's archive can be the spool itself (ArchiveWriter.write);
    # else in the system's temporary folder, from which the archives copy them.
    with contextlib.suppress(OSError):
        out_root.mkdir(parents=True, exist_ok=True)
    spool_dir = out_root if out_root.is_dir() else Path(tempfile.gettempdir())
    cache_admin.limit(cache.root)  # a bad limit fails now, not after the compiles
    producer = Producer(root, cache, opts.jobs, {"hip": opts.hipcc, "cuda": opts.nvcc},
                        opts.job_timeout, remote, spool_dir=spool_dir, remote_exec=farm)
    try:
        # Shared: no prune, clear or eviction removes an entry while this pack may use it.
        with cache_admin.pack_lock(cache.root, opts.lock_timeout, say):
            return _produce_and_publish(opts, reporter, report, tree, plans, handlers,
                                        producer, remote, farm)
    finally:
        producer.close()
        if farm is not None and report.remote_exec is None:  # interrupted: close it anyway
            farm.finish()
        cache_admin.evict_after_pack(cache.root, say)


def _produce_and_publish(opts: PackOptions, reporter: Reporter, report: PackReport, tree: Tree,
                         plans: Sequence[ArchPlan], handlers: HandlerManifest | None,
                         producer: Producer, remote: RemoteTier | None,
                         farm: RemoteExecTier | None = None) -> PackReport:
    """Run every job, then build, check and publish each arch's shard."""
    root, out_root = opts.source_root, opts.out_root
    say = functools.partial(_say, reporter)
    jobs: list[Job] = [j for p in plans for j in p.jobs]
    # Kept for the next arch only when there is one: 10,000 kernels' are about 5 MiB.
    provenances: dict[tuple[str, str], dict[str, Any]] | None = {} if len(plans) > 1 else None
    raw_digests: dict[tuple[str, str], str] = {}  # the parts' keys, shared by the arches
    premade: dict[str, Premade] = {}

    def assembler(plan: ArchPlan, made: Mapping[tuple[str, str, str], Product | Problem],
                  versions: Mapping[str, str]) -> _Assembler:
        return _Assembler(tree, opts, plan, made, versions, handlers, reporter, provenances,
                          reuse.record_path(producer.cache.folder, out_root, opts.group,
                                            plan.arch), raw_digests, premade.get(plan.arch))

    remembered = False

    def remember() -> None:
        """The record of this pack's compiles, for the next pack's early start (written
        once: beside the compiles when there are some)."""
        nonlocal remembered
        if not remembered:
            remembered = True
            early_compiles.remember(str(producer.cache.root), producer.early_record())

    def meanwhile(made: Mapping[tuple[str, str, str], Product | Problem]) -> None:
        # While the compiles run (an edit's few), the packs whose objects are all made
        # are keyed and made (or taken from the previous shard): after the compiles,
        # only the edited packs are left to make. Every compile has been keyed by now.
        remember()
        reuse.code_identity(producer.cache.digests)  # each module's digest as the cache knows it
        versions = producer.versions()
        for plan in plans:
            if plan.members and (early := assembler(plan, made, versions).premake()):
                premade[plan.arch] = early

    def make_arch(plan: ArchPlan, made: Mapping[tuple[str, str, str], Product | Problem],
                  versions: Mapping[str, str], last: bool,
                  before_finish: Callable[[], None] | None = None) -> ArchResult | _Finishing:
        """One arch's shard, under its lock: prepared here, then finished on a thread of
        its own (``_Finishing``), or here when it is the ``last`` left. ``before_finish``
        runs between the two (an earlier arch's finishing is waited for there)."""
        arch = plan.arch
        with contextlib.ExitStack() as held:
            held.enter_context(publish.shard_lock(out_root, arch, opts.lock_timeout, say))
            if not plan.members:
                if publish.remove_shard(out_root, arch):
                    say(f"{arch}: removed the stale shard {out_root / arch}")
                publish.mark_dormant(out_root, arch, f"{root}: no kernels for {arch}")
                reporter.info(f"{arch}: no kernels for this arch; no shard")
                return ArchResult(arch, ok=True, dormant=True)
            assembling = assembler(plan, made, versions)
            prepared = assembling.prepare()
            if before_finish is not None:
                before_finish()
            if prepared and not last:
                return _Finishing(assembling, held.pop_all())
            result = assembling.finish() if prepared else assembling.result
            result.removed_stale = not result.ok and publish.remove_shard(out_root, arch)
        return result

    # An arch whose objects are all made while others still compile is made then: its
    # shard is ready by the time the last compile ends. It is prepared while the one
    # before finishes, and finished once that one has: as after the compiles, a pack of
    # many arches holds two at most (one finishing, one being prepared).
    made_early: dict[str, ArchResult | _Finishing] = {}
    by_arch = {p.arch: p for p in plans}

    def finish_earlier() -> None:
        for before in made_early.values():
            if isinstance(before, _Finishing):
                before.join()

    def arch_ready(arch: str, made: Mapping[tuple[str, str, str], Product | Problem]) -> None:
        plan = by_arch.get(arch)
        if plan is None or not plan.members or arch in made_early or len(plans) < 2:
            return
        made_early[arch] = make_arch(plan, made, producer.versions(), last=False,
                                     before_finish=finish_earlier)

    reporter.batch_started(len(jobs), f"producing for {', '.join(opts.arches)}")
    try:
        products = producer.run(jobs, lambda job, s, outcome: reporter.job_done(
            escape_controls(job.what()) if reporter.names(outcome) else "", s, outcome),
            meanwhile, arch_ready)
    except BaseException:
        for outcome in made_early.values():
            if isinstance(outcome, _Finishing):
                outcome.join()
        raise
    if farm is not None:  # the farm's work is done: its summary before the shards'
        report.remote_exec = farm.finish()
        reporter.info(report.remote_exec.line())
    # The compiles are done: an early one not taken stops now. The record the next
    # pack's early start reads is written by now, or here (a pack without a pool).
    early_compiles.discard()
    remember()
    report.compiles, report.failed_jobs = producer.compiles, producer.failed
    report.compiled_early = producer.compiled_early
    producer.cache.save_digests()
    producer.cache.save_hits()
    reused = len(jobs) - producer.compiles - producer.failed
    reporter.batch_finished(f"{count(len(jobs), 'code object')}: {producer.compiles} compiled, "
                            f"{reused} from cache or prebuilt"
                            + (f", {producer.failed} failed" if producer.failed else "")
                            + (f"; {producer.compiled_early} of the compiles started early"
                               if producer.compiled_early else ""))
    versions = producer.versions()
    told: set[Problem] = set()  # a problem several arches share (no compiler) is told once

    # Each arch's shard is prepared in turn; an arch's runtime check and publishing run
    # on a thread holding its lock (C++ and file system calls) while the next arch is
    # prepared. The last arch finishes here.
    outcomes: list[ArchResult | _Finishing] = []
    try:
        for i, plan in enumerate(plans):
            if plan.arch in made_early:  # made while the compiles ran
                outcomes.append(made_early.pop(plan.arch))
                continue
            last = all(p.arch in made_early for p in plans[i + 1:])
            outcome = make_arch(plan, products, versions, last)
            outcomes.append(outcome)
            if isinstance(outcome, ArchResult) and not outcome.dormant:
                _tell_arches(outcomes, report, reporter, told, say, out_root)
    finally:
        for outcome in [*outcomes, *made_early.values()]:
            if isinstance(outcome, _Finishing):
                outcome.join()
    _tell_arches(outcomes, report, reporter, told, say, out_root)
    if remote is not None:  # after publishing: uploads wait at most the grace
        report.remote = remote.finish()
        reporter.info(report.remote.line())
    _write_depfile(opts, tree, plans, products)
    return report


class _Finishing:
    """``_Assembler.finish`` of a prepared arch on a thread of its own, which holds the
    arch's shard lock (``held``) and releases it when done: a failed arch's stale shard
    is removed under it."""

    def __init__(self, assembler: _Assembler, held: contextlib.ExitStack) -> None:
        self.assembler, self.held = assembler, held
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"ukdpack-finish-{assembler.arch}")
        self.thread.start()

    def _run(self) -> None:
        result = self.assembler.result
        try:
            result = self.assembler.finish()
            result.removed_stale = not result.ok and publish.remove_shard(
                self.assembler.opts.out_root, self.assembler.arch)
        except BaseException as e:  # raised in the main thread by result()
            self.error = e
        finally:
            try:
                if self.error is not None:
                    self.held.__exit__(type(self.error), self.error, self.error.__traceback__)
                else:
                    self.held.close()
            except BaseException as e:
                self.error = self.error or e

    def join(self) -> None:
        self.thread.join()

    def result(self) -> ArchResult:
        """The arch's result once finished; what the thread raised is raised here."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.assembler.result


def _tell_arches(outcomes: list[ArchResult | _Finishing], report: PackReport,
                 reporter: Reporter, told: set[Problem], say: Callable[[str], None],
                 out_root: Path) -> None:
    """Report the arches of ``outcomes`` in order, each once it has finished (waiting for
    the first not yet reported), and take them off the list."""
    while outcomes:
        outcome = outcomes[0]
        result = outcome.result() if isinstance(outcome, _Finishing) else outcome
        outcomes.pop(0)
        arch = result.arch
        report.arches.append(result)
        if result.dormant:
            continue
        if result.removed_stale:
            say(f"{arch}: removed the stale shard {out_root / arch}")
        for p in result.problems:
            if p not in told:
                told.add(p)
                reporter.problem(p)
        if result.ok:
            say(f"{arch}: {count(result.kernels, 'kernel')}, "
                f"{count(result.launches, 'launch')}, {count(result.objects, 'code object')}, "
                f"{count(result.archive_bytes, 'archive byte')}, "
                f"{result.seconds:.1f} s -> {result.published}")
        else:
            reporter.info(f"{arch}: failed; no shard")


def _write_depfile(opts: PackOptions, tree: Tree, plans: Sequence[ArchPlan],
                   products: Mapping[tuple[str, str, str], Product | Problem]) -> None:
    """The depfile of ``--depfile``, when asked for."""
    if opts.depfile is None:
        return
    target = opts.depfile_target or str(opts.out_root)
    try:
        write_depfile(opts.depfile, target, _read_files(tree, plans, products))
    except OSError as e:  # checked before the pack; the disk may be full by now
        raise UkdError(f"--depfile {opts.depfile}: cannot write it: {e.strerror}") from None
    except UnwritablePath as e:
        raise UkdError(f"--depfile {opts.depfile}: cannot write it: the pack read "
                       f"{e.path!r}, and a depfile cannot name a path holding a line break; "
                       "rename it") from None


def _say(reporter: Reporter, text: str) -> None:
    """A progress line; names in it (an out root with a newline) are escaped, so it stays
    one line."""
    reporter.info(escape_controls(text))


def pack_report(opts: PackOptions, report: PackReport) -> dict[str, Any]:
    """The ``pack --json`` report (docs/cli.md): the shared fields, each problem once
    (tree-level and per arch), then one entry per arch asked for. An arch the pack never
    reached (the tree failed its rules) is listed with ``ok`` false and no shard."""
    by_arch = {r.arch: r for r in report.arches}
    problems = list(dict.fromkeys([*report.problems, *(p for r in report.arches
                                                       for p in r.problems)]))
    arches = []
    for arch in opts.arches:
        r = by_arch.get(arch)
        # No kernels for the arch (the whole root, or this arch): no shard, and no failure.
        dormant = report.dormant or (r is not None and r.ok and r.published is None)
        arches.append({
            "arch": arch, "ok": r.ok if r is not None else report.dormant and report.ok,
            "dormant": dormant,
            "shard": str(r.published) if r is not None and r.published else None,
            "kernels": r.kernels if r else 0, "launches": r.launches if r else 0,
            "code_objects": r.objects if r else 0,
            "archive_bytes": r.archive_bytes if r else 0,
            "problems": [problem_doc(p) for p in (r.problems if r else ())]})
    return reports.report(report.ok, problems, {
        "source_root": str(opts.source_root.absolute()),
        "out_root": str(opts.out_root.absolute()),
        "dormant": report.dormant, "compiled": report.compiles,
        "compiled_early": report.compiled_early, "failed_code_objects": report.failed_jobs,
        "remote_cache": report.remote.doc() if report.remote is not None else None,
        **({"remote_exec": report.remote_exec.doc()} if report.remote_exec is not None
           else {}),
        "arches": arches})

