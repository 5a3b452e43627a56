"""Producers: turn jobs into code objects.

* hip: one ``hipcc --genco`` per distinct (source, build, arch), through the cache;
* hsaco: the prebuilt file, read once, its ``amdhsa.target`` checked against the arch;
* builder: ``module.function(spec, *, arch)``, its signature checked before the call.

Every object is stored as the bare ELF (a clang offload bundle is unwrapped), and
what is read from it (target, kernels, signatures) is cached by its digest.
Jobs run in parallel over ``jobs`` threads (compiles are subprocesses).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import importlib
import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ukdpack import _runtime, scratch
from ukdpack.authored.kinds import kind, of_producer
from ukdpack.digest import sha256_hex
from ukdpack.errors import Problem, UkdError
from ukdpack.files import FileRange, read_regular, unnamed_file
from ukdpack.produce import codeobject, compiler, early_compiles
from ukdpack.produce.cache import CompileCache, base_key
from ukdpack.produce.compiler import CompileOutcome, Compiler
from ukdpack.produce.limits import DEFAULT_JOB_TIMEOUT
from ukdpack.produce.plan import Job
from ukdpack.spool import DEFAULT_LEVEL as ARCHIVE_LEVEL
from ukdpack.spool import RECORDS_OFFSET, SpooledRecord

if TYPE_CHECKING:
    from ukdpack.produce.remote import RemoteTier
    from ukdpack.produce.remote_exec import RemoteExecTier


@dataclass(frozen=True)
class ObjectInfo:
    """What the runtime will meet in an object: its target and each kernel's signature."""

    target: str  # bare arch (or generic target) the object was built for
    signatures: Mapping[str, list[dict[str, Any]]]
    #: its full target ID (``gfx90a:xnack+``, ``gfx11-generic``): the key its archive
    #: entry is filed under
    target_id: str = ""

    @property
    def entry_target(self) -> str:
        return self.target_id or self.target

    @property
    def kernels(self) -> list[str]:
        return sorted(self.signatures)


@dataclass(frozen=True)
class Product:
    job: Job
    data: bytes | None  # the bare ELF stored in the archive; None when ``frame`` holds it
    sha256: str
    info: ObjectInfo
    deps: tuple[str, ...]  # files read to make it (for the depfile)
    compiled: bool  # the compiler ran for it in this pack
    #: ``data`` as the archive's zstd frame, when made already: in memory, or spooled
    frame: bytes | SpooledRecord | None = None


#: What the batch reader gives for one prebuilt file: the ELF (None when framed), its
#: sha256, its metadata note, and the ELF as the archive's frame (in memory or spooled).
_Prefetched = tuple[bytes | None, str, bytes, bytes | SpooledRecord | None]


class JobFailed(UkdError):
    """One job's failure: the problem it fails its arch with."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.problem = problem


def _fail(job: Job, message: str, detail: str = "", said: str = "") -> JobFailed:
    """The problem of a job, told at its first user, naming the others' count; ``detail``
    (what the tool ``said``) follows on indented lines."""
    user = job.users[0]
    more = len(job.users) - 1
    others = f" and {more} more launch{'es' if more > 1 else ''}" if more else ""
    text = f"{message} (used by {user}{others})"
    if detail:
        text += f"; {said} said:"
    # The tool's lines are the problem's detail, not its message: each stays a line of its
    # own, while names in the message (a source named with a newline) are escaped.
    return JobFailed(Problem(user.file, user.json_path, text,
                             detail="\n".join(detail.splitlines()[:60])))


def object_info(elf: bytes, sha: str, cache: CompileCache | None) -> ObjectInfo:
    """Target and signatures of every kernel of ``elf`` (whose sha256 is ``sha``; cached
    by that digest)."""
    found = cache.get_info(sha) if cache is not None else None
    if found is not None and "target_id" in found:  # a record of an older ukdpack lacks it
        return ObjectInfo(found["target"], found["signatures"], found["target_id"])
    signatures = {k: codeobject.read_signature(elf, k) for k in codeobject.kernels(elf)}
    info = ObjectInfo(codeobject.target_arch(elf), signatures, _target_id(elf))
    if cache is not None:
        cache.put_info(sha, {"target": info.target, "signatures": signatures,
                             "target_id": info.target_id})
    return info


def _target_id(elf: bytes) -> str:
    """The object's target ID; a CUDA object's target is its bare arch."""
    try:
        return codeobject.target_id(elf)
    except codeobject.CodeObjectError:
        return codeobject.target_arch(elf)


def _target_id_of(meta: codeobject.Metadata) -> str:
    """``_target_id`` from an object's metadata."""
    try:
        return codeobject.target_id_of(meta)
    except codeobject.CodeObjectError:
        return codeobject.target_arch_of(meta)


@functools.lru_cache(maxsize=256)
def _note_info(note: bytes) -> ObjectInfo:
    """The ObjectInfo of an AMDGPU object whose metadata note's descriptor is ``note``:
    what ``object_info`` reads, from the note the batch reader found (cached by the note:
    its copies share it, and nothing changes an ObjectInfo)."""
    meta = codeobject.note_metadata(note)
    signatures = {k: codeobject.signature_of(meta, k) for k in codeobject.kernels_of(meta)}
    return ObjectInfo(codeobject.target_arch_of(meta), signatures, _target_id_of(meta))


#: Kinds whose objects a compiler makes, through the cache.
COMPILED_KINDS = of_producer("compile")

#: Prebuilt objects read per call of the batch reader: a Ctrl-C is seen between calls.
PREFETCH_CHUNK = 256

#: The zstd level the batch reader compresses prebuilt objects at: the archive's.
FRAME_LEVEL = ARCHIVE_LEVEL


#: How a job ended, as progress tells it: ``compiled`` (a compiler ran and made the
#: object), ``reused`` (from the cache, prebuilt, or built by a builder), ``failed``.
Outcome = Literal["compiled", "reused", "failed"]
JobDone = Callable[[Job, float, Outcome], None]
#: Told an arch whose jobs are all done while others still run, and the products so far.
ArchReady = Callable[[str, Mapping[tuple[str, str, str], "Product | Problem"]], None]

#: The code of the problem a job fails with when its compiler cannot be found: the pack
#: reports that once, not once per job.
NO_COMPILER = _runtime.Code.NO_COMPILER


@dataclass(frozen=True)
class _Keyed:
    """A compile job as the cache keys it: its compiler, source, the command line's
    keyed part, the cache key and the record of how to run it again; the whole command
    line with the output and depfile left open (``early_compiles.OUTPUT``, ``DEPFILE``)
    and the sha256 of the source's bytes as the key read them."""

    comp: compiler.Compiler
    source: Path
    keyed: list[str]
    key: str
    rerun: dict[str, Any]
    template: list[str]
    source_sha256: str


class Producer:
    """Runs jobs for one pack; compilers are located (and their version read) once."""

    def __init__(self, root: Path, cache: CompileCache, jobs: int,
                 compilers: Mapping[str, str | None] | None = None,
                 timeout: float = DEFAULT_JOB_TIMEOUT,
                 remote: RemoteTier | None = None, spool_dir: Path | None = None,
                 remote_exec: RemoteExecTier | None = None) -> None:
        self.root = root
        self._root = str(root)
        # Prebuilt objects' archive records go to an unnamed file in ``spool_dir`` (the
        # out root, where an arch's archive can be that file or copy from it), not memory.
        self._spool_dir = spool_dir
        self._spool: int | None = None  # the spool's descriptor, opened at the first batch
        self.remote = remote  # the shared tier behind the cache (remote.py), if any
        self.remote_exec = remote_exec  # the farm behind both (remote_exec.py), if any
        self.timeout = timeout
        self.cache = cache
        self.jobs = max(1, jobs)
        # Local compiles (and dependency scans) at a time: the pool may be wider, its
        # threads waiting on the farm's actions (remote execution).
        self._local_slots = threading.BoundedSemaphore(self.jobs)
        self._explicit = dict(compilers or {})  # kind -> path given on the command line
        self._compilers: dict[str, compiler.Compiler] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # the pack is ending (Ctrl-C): start nothing
        # Jobs running now. A lock of its own: _lock is held through a compiler probe,
        # which an interrupted pack must be able to kill while it counts.
        self._busy = 0
        self._busy_lock = threading.Lock()
        self.compiles = 0  # compiler runs in this pack that made an object
        self.failed = 0  # jobs that made no object
        self._missing: dict[str, Problem] = {}  # kind -> why its compiler is not there
        # Prebuilt objects the batch reader took: path -> (ELF or None, sha256, metadata
        # note, the ELF as the archive's zstd frame).
        self._prefetched: dict[str, _Prefetched] = {}
        self._keyed_jobs: dict[tuple[str, str, str], _Keyed] = {}  # by job key (_keyed)
        # Each compile of this pack, as the next pack's early start reads it (early_compiles.py).
        self.early_units: list[early_compiles.Unit] = []
        self.compiled_early = 0  # compiles this pack took from the early start
        self._sweep: threading.Thread | None = None  # scratch.sweep, at the first compile

    def early_record(self) -> list[early_compiles.Unit]:
        """This pack's compiles for the next pack's early start: none when the farm runs
        them (an early start would compile here what it sends there)."""
        return [] if self.remote_exec is not None else list(self.early_units)

    def close(self) -> None:
        """Drop the spool (its records are in the archives once they are written) and
        wait for the sweep of abandoned compile folders."""
        if self._spool is not None:
            os.close(self._spool)
            self._spool = None
        if self._sweep is not None:
            self._sweep.join()

    def _sweep_once(self) -> None:
        """At this pack's first local compile: remove, on a thread beside the compiles,
        the compile folders that killed packs left in the temporary folder."""
        with self._lock:
            if self._sweep is not None:
                return
            self._sweep = threading.Thread(target=scratch.sweep, name="ukdpack-sweep",
                                           daemon=True)
            self._sweep.start()

    def _spool_fd(self) -> int:
        """The spool's descriptor, opened now if need be; -1 for no spool."""
        if self._spool is None and self._spool_dir is not None:
            try:
                self._spool = unnamed_file(self._spool_dir)
                # Room for an archive's header before the records: a spool holding one
                # archive's records alone becomes that archive (ArchiveWriter.write).
                os.truncate(self._spool, RECORDS_OFFSET)
            except OSError:
                self._spool_dir = None  # frames in memory, as without a spool
        return -1 if self._spool is None else self._spool

    def compiler(self, kind: str) -> compiler.Compiler:
        """The compiler of ``kind``, identified (recorded in the cache: a warm pack runs
        no process for it); raises UkdError with the install hint when missing."""
        with self._lock:
            if self._stopping.is_set():  # interrupted while waiting for the lock
                raise UkdError("the pack was interrupted")
            if kind in self._missing:  # looked for once: every job of the kind fails alike
                raise UkdError(self._missing[kind])
            if kind not in self._compilers:
                try:
                    path = compiler.locate(kind, self._explicit.get(kind))
                except UkdError as e:
                    self._missing[kind] = dataclasses.replace(e.problems[0], code=NO_COMPILER)
                    raise UkdError(self._missing[kind]) from None
                self._compilers[kind] = compiler.identify(kind, path, self.cache,
                                                          self.timeout)
            return self._compilers[kind]

    def versions(self) -> dict[str, str]:
        """Version text of each compiler this pack used, by kind (for provenance)."""
        with self._lock:
            return {kind: c.version for kind, c in self._compilers.items()}

    def run(self, jobs: Sequence[Job], done: JobDone | None = None,
            meanwhile: Callable[[Mapping[tuple[str, str, str], Product | Problem]], None]
            | None = None, arch_ready: ArchReady | None = None
            ) -> dict[tuple[str, str, str], Product | Problem]:
        """Every job's product, or the problem that stopped it. Never raises for bad input.
        ``meanwhile``, when given, is called in this thread once every job has started
        while some still run (compiles), with the products made so far, by job key; then
        ``arch_ready``, for each arch whose jobs are all done while others still run,
        with its name and the products made so far."""
        results: dict[tuple[str, str, str], Product | Problem] = {}
        # Each arch's jobs not done yet (a generic family's followers included), and the
        # arches that got to none while the pool still runs: told to arch_ready.
        changed = threading.Condition()
        remaining: dict[str, int] = {}
        for job in jobs:
            remaining[job.arch] = remaining.get(job.arch, 0) + 1
        ready: list[str] = []

        def one(job: Job, lookup: bool = True, build: bool = True) -> bool:
            """Run ``job``; False when it was left undone: a compile whose object the
            cache lacks, with ``build`` False (``lookup`` False: it was looked up)."""
            if self._stopping.is_set():
                return True
            start = time.monotonic()
            with self._busy_lock:
                self._busy += 1
            try:
                made: Product | Problem | None = self._produce(job, lookup, build)
            except JobFailed as e:
                made = e.problem
            finally:
                with self._busy_lock:
                    self._busy -= 1
            if made is None:
                return False
            product: Product | Problem = made
            results[job.key] = product
            with changed:
                for j in (job, *followers.get(job.key, ())):
                    remaining[j.arch] -= 1
                    if remaining[j.arch] == 0:
                        ready.append(j.arch)
                changed.notify_all()
            outcome: Outcome = ("failed" if not isinstance(product, Product) else
                                "compiled" if product.compiled else "reused")
            with self._busy_lock:  # counted by outcome: a failed compile is no compile
                self.compiles += outcome == "compiled"
                self.failed += outcome == "failed"
            if done and not self._stopping.is_set():
                done(job, time.monotonic() - start, outcome)
                for other in followers.get(job.key, ()):  # they share this job's object
                    done(other, 0.0, "failed" if outcome == "failed" else "reused")
            return True

        # A generic family's object is compiled once for all its members: one job per
        # (kind, toc key, target) runs; the others share its product.
        shared: dict[tuple[str, str, str], list[Job]] = {}
        for job in jobs:
            shared.setdefault((job.kind, job.toc_key, job.compile_target)
                              if job.target else job.key, []).append(job)
        first = [group[0] for group in shared.values()]
        followers = {group[0].key: group[1:] for group in shared.values()}
        # Longest first: compiles before reads, so the pool stays busy to the end.
        order = sorted(first, key=lambda j: (j.kind not in COMPILED_KINDS, j.toc_key, j.arch))
        # Prebuilt objects are read in batches by the runtime (threads of its own, the GIL
        # released) in this thread, while the pool runs the other jobs.
        prebuilt = [j for j in order if kind(j.kind).producer == "prebuilt"]
        rest = [j for j in order if kind(j.kind).producer != "prebuilt"]
        width = max(self.jobs, self.remote_exec.jobs if self.remote_exec is not None else 0)
        if width == 1 or len(rest) <= 1:
            for job in rest:  # in this thread: an interrupt reaches the compile itself
                one(job)
            self._run_prebuilt(prebuilt, one)
            return _share(results, shared.values())
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="ukdpack-job")
        try:
            # Jobs the cache holds no manifest for cannot hit: they go to the pool first,
            # so an edit's compiles start before the other jobs' lookups. Those run in
            # this thread, each miss handed to the pool as it is found: the lookups
            # overlap the compiles.
            compiled = [job for job in rest if job.kind in COMPILED_KINDS]
            unknown = {job.key for job in compiled if not self._may_hit(job)}
            futures = [pool.submit(one, job, False) for job in compiled if job.key in unknown]
            for job in compiled:
                if self._stopping.is_set():
                    break
                if job.key not in unknown and not one(job, build=False):
                    futures.append(pool.submit(one, job, False))
            futures += [pool.submit(one, job) for job in rest if job.kind not in COMPILED_KINDS]
            self._run_prebuilt(prebuilt, one)
            if meanwhile is not None and not self._stopping.is_set() and not all(
                    f.done() for f in futures):
                meanwhile(_share(dict(results), shared.values()))
            if arch_ready is not None:
                self._tell_ready(futures, changed, ready, lambda arch: arch_ready(
                    arch, _share(dict(results), shared.values())))
            for f in futures:
                f.result()
        except BaseException:
            self._abandon(pool)
            raise
        pool.shutdown()
        return _share(results, shared.values())

    def _tell_ready(self, futures: Sequence[Future[bool]], changed: threading.Condition,
                    ready: list[str], tell: Callable[[str], None]) -> None:
        """Until every one of ``futures`` is done: each arch put on ``ready`` (under
        ``changed``, which is notified then) while some still run, told in turn."""
        ended = [0]

        def end(_: Future[bool]) -> None:
            with changed:
                ended[0] += 1
                changed.notify_all()

        for f in futures:
            f.add_done_callback(end)
        while True:
            with changed:
                changed.wait_for(lambda: bool(ready) or ended[0] == len(futures))
                if ended[0] == len(futures):
                    return
                arches = list(ready)
                ready.clear()
            for arch in arches:
                if self._stopping.is_set():
                    return
                tell(arch)

    def _run_prebuilt(self, jobs: Sequence[Job], one: Callable[[Job], bool]) -> None:
        """Run the prebuilt jobs, their files read a batch at a time."""
        spool = self._spool_fd()
        for start in range(0, len(jobs), PREFETCH_CHUNK):
            if self._stopping.is_set():
                return
            chunk = jobs[start:start + PREFETCH_CHUNK]
            self._prefetched = self._read_batch(chunk, spool)
            for job in chunk:
                one(job)
            self._prefetched = {}

    def _read_batch(self, chunk: Sequence[Job], spool: int) -> dict[str, _Prefetched]:
        """What the runtime's batch reader takes of the files of ``chunk``, by path."""
        paths = list(dict.fromkeys(self._path_of(j.rel) for j in chunk if j.rel))
        out = {}
        got_all = _runtime.read_prebuilt_objects(paths, self.jobs, FRAME_LEVEL, spool)
        for path, got in zip(paths, got_all, strict=True):
            if got is None:
                continue
            elf, sha, note, made = got
            frame = made if not isinstance(made, tuple) else SpooledRecord(
                FileRange(spool, made[0], made[1]), made[2])
            out[path] = (elf, sha, note, frame)
        return out

    def _path_of(self, rel: str) -> str:
        """``str(self.root / rel)`` of a job's root-relative file, made with string joins:
        a prebuilt object's path is asked for three times per object, and ``pathlib``
        was most of the per-object Python of a prebuilt pack (cProfile: 0.26 of 0.44 s).
        ``rel`` is normalized (``model.joined``), so the join equals ``pathlib``'s."""
        return os.path.join(self._root, rel)

    def _abandon(self, pool: ThreadPoolExecutor) -> None:
        """Stop the jobs of a pack that is ending (Ctrl-C lands in this, the main thread,
        while the pool works): jobs not started never start, and the compiles running are
        killed, so the pack ends in moments rather than when its last compile would.
        Waits for the running jobs at most STOP_GRACE seconds."""
        self._stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if self.remote_exec is not None:  # the farm's actions in flight end now
            self.remote_exec.cancel()
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline:
            with self._busy_lock:
                if not self._busy:
                    return
            _kill_compiles()  # again each round: a job may have started one meanwhile
            time.sleep(0.02)

    # ---------------------------------------------------------------- producers
    def _produce(self, job: Job, lookup: bool = True, build: bool = True) -> Product | None:
        """The job's product; for a compile, None when ``build`` is False and the cache
        lacks it (``lookup`` False: it is known to lack it)."""
        producer = kind(job.kind).producer
        if producer == "compile":
            return self._compile(job, lookup, build)
        if producer == "prebuilt":
            return self._prebuilt(job)
        if producer == "module":
            return self._build(job)
        raise _fail(job, f"no producer for kind '{job.kind}'")

    def _finish(self, job: Job, raw: bytes, deps: tuple[str, ...], compiled: bool,
                what: str, raw_sha256: str = "") -> Product:
        """The product of ``raw`` (whose sha256, when known, is ``raw_sha256``)."""
        try:
            elf = codeobject.elf_image(raw)
            codeobject.check_target(elf)  # the arch: _checked, with its own wording
            # A cached object is a bare ELF, hashed as it was read: not hashed again.
            sha = raw_sha256 if raw_sha256 and elf is raw else sha256_hex(elf)
            # A prebuilt object's metadata reads faster than a cache record writes.
            info = object_info(elf, sha, None if kind(job.kind).producer == "prebuilt" else self.cache)
        except codeobject.CodeObjectError as e:
            raise _fail(job, f"{what} is not a usable code object: {e}") from None
        return self._checked(job, elf, sha, info, deps, compiled, what)

    def _checked(self, job: Job, elf: bytes | None, sha: str, info: ObjectInfo,
                 deps: tuple[str, ...], compiled: bool, what: str,
                 frame: bytes | SpooledRecord | None = None) -> Product:
        """The product, once its object is known to run on the job's arch."""
        if not _runtime.target_runs_on(info.target, job.arch):
            raise _fail(job, f"{what} targets {info.target}, not {job.arch}; the shard of "
                             f"{job.arch} needs an object built for it")
        return Product(job, elf, sha, info, deps, compiled, frame)

    def _may_hit(self, job: Job) -> bool:
        """Whether the cache may hold the compile of ``job``: False only when its key is
        known and the cache has no manifest of it (what cannot be keyed now, a missing
        compiler or an unreadable source, fails later with its own message)."""
        try:
            made = self._keyed_jobs[job.key] = self._keyed(job)
            return self.cache.has_manifest(made.key)
        except (JobFailed, UkdError):
            return True

    def _keyed(self, job: Job) -> _Keyed:
        """The compile of ``job`` as the cache keys it; kept from ``_may_hit`` for the
        job's first ``_compile`` (a lookup), which takes it."""
        found = self._keyed_jobs.pop(job.key, None)
        if found is not None:
            return found
        compiler_kind = kind(job.kind).compiler
        assert job.rel is not None and compiler_kind is not None
        try:
            comp = self.compiler(compiler_kind)
        except UkdError as e:
            if e.problems[0].code == NO_COMPILER:  # the same problem for every job: told once
                raise JobFailed(e.problems[0]) from None
            raise _fail(job, str(e.problems[0])) from None
        source = self.root / job.rel
        build = job.fields.get("build") or {}
        try:
            # Stat first: a record whose stat is older than the bytes read only costs the
            # next early start a hash.
            seen = os.stat(source)
            # Read here, before hipcc runs: a FIFO is refused, not handed to a compiler
            # that would wait on it until --job-timeout.
            source_text = read_regular(source)
            source_digest = sha256_hex(source_text)
        except OSError as e:
            raise _fail(job, f"cannot read source {job.rel}: {e.strerror}") from None
        keyed = compiler.key_argv(compiler_kind, build, job.compile_target, comp.driver)
        key = base_key({"compiler": comp.identity, "argv": keyed, "source": job.rel,
                        "source_sha256": source_digest})
        rerun = {"kind": job.kind, "argv": keyed, "source": job.rel,
                 "compiler": comp.identity, "compiler_path": comp.path}
        template = compiler.rerun_argv(comp, keyed, source, Path(early_compiles.OUTPUT),
                                       Path(early_compiles.DEPFILE), self.root)
        field = kind(job.kind).file_field
        value = job.fields.get(field) if field is not None else None
        # u.file is a root-relative POSIX path: the root's prefix and it (a thousand
        # users of one source are common: os.path.join each would cost milliseconds).
        prefix = self._root.rstrip("/") + "/"
        uses = [(prefix + u.file, u.json_path, field, value)
                for u in job.users] if field is not None else []
        self.early_units.append(early_compiles.unit(
            {"source": str(source), "cwd": str(source.parent), "identity": comp.identity,
             "kind": compiler_kind, "source_kind": job.kind, "driver": comp.driver,
             "target": job.compile_target, "root": self._root}, template, source_digest, seen, uses))
        return _Keyed(comp, source, keyed, key, rerun, template, source_digest)

    def _compile(self, job: Job, lookup: bool = True, make: bool = True) -> Product | None:
        made = self._keyed(job)
        comp, source, keyed, key, rerun = made.comp, made.source, made.keyed, made.key, made.rerun
        hit = self.cache.lookup(key, self.root) if lookup else None
        if hit is not None:
            if self.remote is not None:
                self.remote.local_hit()
            return self._finish(job, hit.data, hit.deps, False, f"the cached object of {job.rel}",
                                hit.sha256)
        if not make:  # a local miss: the pool asks the remote tier, then compiles
            return None
        if self.remote is not None:
            remote_hit = self.remote.lookup(key, self.root, self.cache.digests,
                                            comp.include_dirs)
            if remote_hit is not None:  # checked against its digests: kept here too
                self.cache.store(key, self.root, remote_hit.deps, remote_hit.data, rerun)
                return self._finish(job, remote_hit.data, remote_hit.deps, False,
                                    f"the remote cache's object of {job.rel}")
            self.remote.miss()
        try:  # read again: the text the compile reads is scanned, not the keyed one
            source_text = read_regular(source)
        except OSError as e:
            raise _fail(job, f"cannot read source {job.rel}: {e.strerror}") from None
        blocking = compiler.special_include(source, source_text, keyed)
        if blocking is not None:  # found before the compile waits on it until --job-timeout
            def rel(p: Path) -> str:
                return os.path.relpath(p, self.root)
            raise _fail(job, f"{rel(blocking.including)} includes \"{blocking.name}\", which is "
                             f"{blocking.kind} ({rel(blocking.found)}), not a regular file; a "
                             "compiler would wait on it: make it a file")
        if self.remote_exec is not None and self.remote_exec.takes(kind(job.kind).compiler):
            done = self._execute(job, comp, key, keyed, rerun, source_text)
            if done is not None:
                return done
        outcome, seconds = self._run_compile(job, made)
        if not outcome.ok:
            raise _fail(job, f"compiling {job.what()} failed", outcome.message,
                        os.path.basename(comp.path))

        deps = outcome.deps or (str(source),)
        self.cache.store(key, self.root, deps, outcome.data, rerun)
        if self.remote is not None:
            self._upload(key, deps, outcome.data, rerun, seconds, comp.include_dirs)
        return self._finish(job, outcome.data, deps, True, f"the object compiled from {job.rel}")

    def _run_compile(self, job: Job, made: _Keyed) -> tuple[CompileOutcome, float]:
        """Compile ``job`` here, or take the compile the early start began
        (early_compiles.py) where it is this very compile: the outcome and the
        compile's seconds."""
        self._sweep_once()
        cwd = made.source.parent
        taken = early_compiles.take(made.template, str(cwd), made.comp.identity,
                                    made.source_sha256)
        if taken is not None:
            try:
                with self._local_slots:
                    outcome = compiler.finish_compile(taken.proc, made.comp.path,
                                                      Path(taken.output), Path(taken.depfile),
                                                      cwd, self.timeout)
            finally:
                taken.remove()
            if outcome.ok:
                with self._lock:
                    self.compiled_early += 1
            return outcome, time.monotonic() - taken.started
        with scratch.Folder(scratch.COMPILE) as tmp, self._local_slots:
            argv, out, dep = early_compiles.fill(made.template, tmp)
            with self._lock:
                if self._stopping.is_set():  # start no compile once the pack is ending
                    raise _fail(job, "the pack was interrupted")
            started = time.monotonic()
            outcome = compiler.run_compile(argv, Path(out), Path(dep), cwd, self.timeout)
            return outcome, time.monotonic() - started

    def _execute(self, job: Job, comp: Compiler, key: str, keyed: Sequence[str],
                 rerun: Mapping[str, Any], source_text: bytes) -> Product | None:
        """The job's object from the farm (remote_exec.py), checked as a local compile's
        is, and kept in the local cache and the team cache; None when it is to be compiled
        here (the tier is off or faulted, the compile reads files outside the root, or the
        answer was refused)."""
        from ukdpack.produce import remote_exec

        tier = self.remote_exec
        assert tier is not None and job.rel is not None
        if tier.off:
            tier.local()
            return None
        source = self.root / job.rel
        # The inputs: those the compile cache recorded for this key, else the includes
        # followed in the source text (no process); a compile failing on them may read a
        # file they lack (a macro-named include, a header added since): the local
        # preprocessor's scan then tells, and the action runs once more.
        first = self.cache.recorded_deps(key, self.root)
        if first is None:
            first = compiler.include_closure(source, source_text, keyed)
        failed: remote_exec.RemoteCompile | None = None  # the first inputs' failed compile
        tried: Mapping[str, str] | None = None
        for deps in (first, None):
            if deps is None:
                with scratch.Folder(scratch.SCAN) as tmp, \
                        self._local_slots:
                    if self._stopping.is_set():
                        raise _fail(job, "the pack was interrupted")
                    scanned = remote_exec.scan_deps(comp, keyed, source, self.root, Path(tmp),
                                                    self.timeout)
                if isinstance(scanned, str):
                    tier.local()
                    return None
                deps = scanned
            files = remote_exec.input_files([str(source), *deps], self.root,
                                            comp.include_dirs)
            if isinstance(files, str) and deps is first:
                continue  # the includes followed may name more than a compile reads
            if isinstance(files, str):
                tier.local()
                return None
            if failed is not None and files == tried:
                break  # the scan finds what was sent: the failure stands
            tried = files
            try:
                inputs = {rel: read_regular(Path(path)) for rel, path in files.items()}
            except OSError:
                tier.local()
                return None
            spec = remote_exec.compile_spec(comp, keyed, job.rel, inputs, tier.config.properties,
                                            self.timeout)
            started = time.monotonic()
            try:
                result = tier.run(spec)
            except UkdError as e:  # interrupted, or a fault under --remote-exec-mode require
                raise _fail(job, str(e.problems[0])) from None
            if result is None:
                tier.local()
                return None
            made = remote_exec.remote_compile(result, job.rel, files, self.root,
                                              comp.include_dirs, time.monotonic() - started)
            if isinstance(made, str):
                self._refuse(job, tier, made)
                return None
            if not made.ok and deps is first:
                failed = made
                continue  # scanned: the first inputs may lack a header the compile reads
            if not made.ok:
                failed = made
                break
            what = f"the object the farm compiled from {job.rel}"
            try:
                product = self._finish(job, made.data, made.deps, not made.cached, what)
            except JobFailed as e:  # not a code object of the job's target: never used
                self._refuse(job, tier, e.problem.message)
                return None
            self.cache.store(key, self.root, made.deps, made.data, rerun)
            if self.remote is not None:
                self._upload(key, made.deps, made.data, rerun, made.seconds, comp.include_dirs)
            return product
        if failed is None:
            return None
        raise _fail(job, f"compiling {job.what()} failed", failed.message,
                    os.path.basename(comp.path))

    def _refuse(self, job: Job, tier: RemoteExecTier, why: str) -> None:
        """An answer of the farm refused: the job compiles here (``require``: fails)."""
        try:
            tier.refuse(f"the result for {job.what()} is refused: {why}")
        except UkdError as e:
            raise _fail(job, str(e.problems[0])) from None
        tier.local()

    def _upload(self, key: str, deps: Sequence[str], data: bytes, rerun: Mapping[str, Any],
                seconds: float, toolchain: Sequence[str]) -> None:
        """Queue a compile for the remote tier: its entry binds the object to the key and
        the digest of every file read, with the compile's time (the summary's savings)."""
        assert self.remote is not None
        recorded = self.cache.portable_deps(self.root, deps)
        if recorded is not None:
            self.remote.upload(key, {"deps": recorded, "object": sha256_hex(data),
                                     "size": len(data), "seconds": round(seconds, 3),
                                     "rerun": dict(rerun)}, data, toolchain)

    def _prebuilt(self, job: Job) -> Product:
        assert job.rel is not None
        where = self._path_of(job.rel)
        what = f"prebuilt object {job.rel}"
        found = self._prefetched.get(where)
        if found is not None:  # read, unwrapped and hashed by the batch reader
            elf, sha, note, frame = found
            try:
                info = _note_info(note)
            except codeobject.CodeObjectError as e:
                raise _fail(job, f"{what} is not a usable code object: {e}") from None
            return self._checked(job, elf, sha, info, (where,), False, what, frame)
        path = Path(where)
        try:
            raw = read_regular(path)
        except (FileNotFoundError, NotADirectoryError):
            from ukdpack.authored import dvc  # only for a missing prebuilt file

            hint = dvc.missing_hint(self.root, path)
            raise _fail(job, f"prebuilt object {job.rel} is not there"
                        + (f": {hint}" if hint else "")) from None
        except OSError as e:  # a FIFO, a folder, no permission
            raise _fail(job, f"cannot read prebuilt object {job.rel}: {e.strerror}") from None
        return self._finish(job, raw, (str(path),), False, what)

    def _build(self, job: Job) -> Product:
        module_name = str(job.fields["module"])
        function_name = str(job.fields["function"])
        label = f"builder {module_name}:{function_name}"
        outcome = _guarded(lambda: importlib.import_module(module_name), self.timeout,
                           self._stopping)
        if isinstance(outcome, _Failure):
            raise _fail(job, f"cannot import {label}: {outcome.what}") from None
        module = outcome.value
        fn = getattr(module, function_name, None)
        if not callable(fn):
            raise _fail(job, f"{label}: module {module_name} has no function "
                             f"'{function_name}'")
        problem = _builder_signature_problem(fn)
        if problem:
            raise _fail(job, f"{label} must take (spec, *, arch), found {problem}")
        spec = dict(job.fields["spec"])
        outcome = _guarded(lambda: fn(spec, arch=job.arch), self.timeout, self._stopping)
        if isinstance(outcome, _Failure):
            raise _fail(job, f"{label} failed for {job.arch}: {outcome.what}") from None
        result = outcome.value
        if not isinstance(result, (bytes, bytearray, memoryview)):
            raise _fail(job, f"{label} returned {type(result).__name__}, expected the code "
                             "object's bytes")
        deps = (module.__file__,) if getattr(module, "__file__", None) else ()
        return self._finish(job, bytes(result), tuple(str(d) for d in deps), False,
                            f"the object {label} built")


def _share(results: dict[tuple[str, str, str], Product | Problem],
           groups: Iterable[Sequence[Job]]) -> dict[tuple[str, str, str], Product | Problem]:
    """The product (or problem) of each group's first job, given to the other members'
    jobs too (the same object in each member arch's shard)."""
    for group in groups:
        got = results.get(group[0].key)
        if got is None:
            continue
        for other in group[1:]:
            results[other.key] = (dataclasses.replace(got, job=other)
                                  if isinstance(got, Product) else got)
    return results


#: Seconds an interrupted pack waits for its running jobs to end once their compiles are
#: killed (a builder, which cannot be killed, is left behind on its daemon thread).
STOP_GRACE = 5.0


def _kill_compiles() -> None:
    """SIGKILL every child of this process that leads a process group of its own, with
    that group: the compiles and compiler probes, which compiler.py starts each in a
    session of its own (so a timeout stops all it started), out of reach of the Ctrl-C a
    terminal sends to the packer's group. Linux (/proc lists each thread's children);
    elsewhere nothing is killed and the interrupted pack waits for them."""
    own = os.getpgrp()
    for listing in glob.glob("/proc/self/task/*/children"):
        try:
            pids = [int(word) for word in Path(listing).read_text().split()]
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        for pid in pids:
            with contextlib.suppress(OSError):  # it ended meanwhile
                if os.getpgid(pid) == pid != own:
                    os.killpg(pid, signal.SIGKILL)


@dataclass(frozen=True)
class _Value:
    value: Any


@dataclass(frozen=True)
class _Failure:
    what: str  # how the call ended, for the message


def _guarded(call: Callable[[], Any], timeout: float,
             stopping: threading.Event | None = None) -> _Value | _Failure:
    """Run a builder's code so that nothing it does ends the pack: any exception,
    ``sys.exit`` and ``KeyboardInterrupt`` included, becomes a failure, and so does a
    call still running after ``timeout`` seconds, or when ``stopping`` is set (the pack
    was interrupted); its thread is a daemon: it is left behind and dies with the
    process."""
    box: list[_Value | _Failure] = []

    def target() -> None:
        try:
            box.append(_Value(call()))
        except SystemExit as e:
            box.append(_Failure(f"it called sys.exit({e.code!r}); a builder returns the "
                                "object's bytes or raises"))
        except BaseException as e:  # the builder's failure, whatever it is
            box.append(_Failure(f"{type(e).__name__}: {e}"))

    thread = threading.Thread(target=target, name="ukdpack-builder", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive() and not (stopping and stopping.is_set()):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        thread.join(min(left, 0.1))  # in slices, so an interrupted pack need not wait
    if stopping and stopping.is_set() and thread.is_alive():
        return _Failure("the pack was interrupted")
    if thread.is_alive() or not box:
        return _Failure(f"it did not return within {timeout:g} s (raise --job-timeout if "
                        "it legitimately takes longer)")
    return box[0]


def _builder_signature_problem(fn: Callable[..., Any]) -> str | None:
    """None when ``fn`` takes exactly (spec, *, arch); else what it takes."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "a callable whose parameters cannot be read"
    params = list(sig.parameters.values())
    ok = (len(params) == 2
          and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)
          and params[0].default is inspect.Parameter.empty
          and params[1].name == "arch" and params[1].kind is inspect.Parameter.KEYWORD_ONLY)
    bare = sig.replace(return_annotation=inspect.Signature.empty,
                       parameters=[p.replace(annotation=inspect.Parameter.empty)
                                   for p in params])
    return None if ok else str(bare)
