"""Producers (SPEC 5): turn jobs into code objects.

* hip: one ``hipcc --genco`` per distinct (source, build, arch), through the cache;
* hsaco: the prebuilt file, read once, its ``amdhsa.target`` checked against the arch;
* builder: ``module.function(spec, *, arch)``, its signature checked before the call.

Every object is stored as the bare ELF (a clang offload bundle is unwrapped), and
what is read from it (target, kernels, signatures) is cached by its digest.
Jobs run in parallel over ``jobs`` threads (compiles are subprocesses).
"""

from __future__ import annotations

import importlib
import inspect
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack import _runtime
from ukdpack.digest import sha256_hex
from ukdpack.errors import Problem, UkdError
from ukdpack.produce import codeobject, compiler, dvc
from ukdpack.produce.cache import CompileCache, base_key
from ukdpack.produce.plan import Job


@dataclass(frozen=True)
class ObjectInfo:
    """What the runtime will meet in an object: its target and each kernel's signature."""

    target: str  # bare arch (or generic target) the object was built for
    signatures: Mapping[str, list[dict[str, Any]]]

    @property
    def kernels(self) -> list[str]:
        return sorted(self.signatures)


@dataclass(frozen=True)
class Product:
    job: Job
    data: bytes  # the bare ELF stored in the archive
    sha256: str
    info: ObjectInfo
    deps: tuple[str, ...]  # files read to make it (for the depfile)
    compiled: bool  # the compiler ran for it in this pack


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
        text += f"; {said} said:\n" + "\n".join("    " + ln for ln in detail.splitlines()[:60])
    return JobFailed(Problem(user.file, user.json_path, text))


def object_info(elf: bytes, sha: str, cache: CompileCache | None) -> ObjectInfo:
    """Target and signatures of every kernel of ``elf`` (whose sha256 is ``sha``; cached
    by that digest)."""
    found = cache.get_info(sha) if cache is not None else None
    if found is not None:
        return ObjectInfo(found["target"], found["signatures"])
    signatures = {k: codeobject.read_signature(elf, k) for k in codeobject.kernels(elf)}
    info = ObjectInfo(codeobject.target_arch(elf), signatures)
    if cache is not None:
        cache.put_info(sha, {"target": info.target, "signatures": signatures})
    return info


JobDone = Callable[[Job, float, bool], None]


class Producer:
    """Runs jobs for one pack; compilers are located (and their version read) once."""

    def __init__(self, root: Path, cache: CompileCache, jobs: int,
                 compilers: Mapping[str, str | None] | None = None,
                 timeout: float = compiler.DEFAULT_JOB_TIMEOUT) -> None:
        self.root = root
        self.timeout = timeout
        self.cache = cache
        self.jobs = max(1, jobs)
        self._explicit = dict(compilers or {})  # kind -> path given on the command line
        self._compilers: dict[str, compiler.Compiler] = {}
        self._lock = threading.Lock()
        self.compiles = 0  # compiler runs in this pack

    def compiler(self, kind: str) -> compiler.Compiler:
        """The compiler of ``kind``, identified (recorded in the cache: a warm pack runs
        no process for it); raises UkdError with the install hint when missing."""
        with self._lock:
            if kind not in self._compilers:
                path = compiler.locate(kind, self._explicit.get(kind))
                self._compilers[kind] = compiler.identify(kind, path, self.cache,
                                                          self.timeout)
            return self._compilers[kind]

    def versions(self) -> dict[str, str]:
        """Version text of each compiler this pack used, by kind (for provenance)."""
        with self._lock:
            return {kind: c.version for kind, c in self._compilers.items()}

    def run(self, jobs: Sequence[Job], done: JobDone | None = None
            ) -> dict[tuple[str, str, str], Product | Problem]:
        """Every job's product, or the problem that stopped it. Never raises for bad input."""
        results: dict[tuple[str, str, str], Product | Problem] = {}

        def one(job: Job) -> None:
            start = time.monotonic()
            try:
                product = self._produce(job)
            except JobFailed as e:
                results[job.key] = e.problem
                if done:
                    done(job, time.monotonic() - start, True)
                return
            results[job.key] = product
            if done:
                done(job, time.monotonic() - start, product.compiled)

        # Longest first: compiles before reads, so the pool stays busy to the end.
        order = sorted(jobs, key=lambda j: (j.kind not in ("hip", "cuda"), j.toc_key, j.arch))
        if self.jobs == 1 or len(order) <= 1:
            for job in order:
                one(job)
        else:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                list(pool.map(one, order))
        return results

    # ---------------------------------------------------------------- producers
    def _produce(self, job: Job) -> Product:
        if job.kind in ("hip", "cuda"):
            return self._compile(job)
        if job.kind == "hsaco":
            return self._prebuilt(job)
        if job.kind == "builder":
            return self._build(job)
        raise _fail(job, f"no producer for kind '{job.kind}'")

    def _finish(self, job: Job, raw: bytes, deps: tuple[str, ...], compiled: bool,
                what: str) -> Product:
        try:
            elf = codeobject.elf_image(raw)
            sha = sha256_hex(elf)
            # A prebuilt object's metadata reads faster than a cache record writes.
            info = object_info(elf, sha, None if job.kind == "hsaco" else self.cache)
        except codeobject.CodeObjectError as e:
            raise _fail(job, f"{what} is not a usable code object: {e}") from None
        if not _runtime.target_runs_on(info.target, job.arch):
            raise _fail(job, f"{what} targets {info.target}, not {job.arch}; the shard of "
                             f"{job.arch} needs an object built for it")
        return Product(job, elf, sha, info, deps, compiled)

    def _compile(self, job: Job) -> Product:
        assert job.rel is not None
        try:
            comp = self.compiler(job.kind)
        except UkdError as e:
            raise _fail(job, str(e.problems[0])) from None
        source = self.root / job.rel
        build = job.fields.get("build") or {}
        try:
            source_digest = sha256_hex(source.read_bytes())
        except OSError as e:
            raise _fail(job, f"cannot read source {job.rel}: {e.strerror}") from None
        keyed = compiler.key_argv(job.kind, build, job.arch)
        key = base_key({"compiler": comp.identity, "argv": keyed, "source": job.rel,
                        "source_sha256": source_digest})
        hit = self.cache.lookup(key, self.root)
        if hit is not None:
            return self._finish(job, hit.data, hit.deps, False, f"the cached object of {job.rel}")
        with tempfile.TemporaryDirectory(prefix="ukdpack-cc-") as tmp:
            out, dep = Path(tmp) / "out.o", Path(tmp) / "out.d"
            argv = compiler.compile_argv(comp, source, build, job.arch, out, dep, self.root)
            with self._lock:
                self.compiles += 1
            outcome = compiler.run_compile(argv, out, dep, source.parent, self.timeout)
        if not outcome.ok:
            raise _fail(job, f"compiling {job.what()} failed", outcome.message,
                        os.path.basename(comp.path))
        deps = outcome.deps or (str(source),)
        self.cache.store(key, self.root, deps, outcome.data,
                         {"kind": job.kind, "argv": keyed, "source": job.rel,
                          "compiler": comp.identity, "compiler_path": comp.path})
        return self._finish(job, outcome.data, deps, True, f"the object compiled from {job.rel}")

    def _prebuilt(self, job: Job) -> Product:
        assert job.rel is not None
        path = self.root / job.rel
        if not path.is_file():
            hint = dvc.missing_hint(self.root, path)
            raise _fail(job, f"prebuilt object {job.rel} is not there"
                        + (f": {hint}" if hint else ""))
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise _fail(job, f"cannot read prebuilt object {job.rel}: {e.strerror}") from None
        return self._finish(job, raw, (str(path),), False, f"prebuilt object {job.rel}")

    def _build(self, job: Job) -> Product:
        module_name = str(job.fields["module"])
        function_name = str(job.fields["function"])
        label = f"builder {module_name}:{function_name}"
        outcome = _guarded(lambda: importlib.import_module(module_name), self.timeout)
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
        outcome = _guarded(lambda: fn(spec, arch=job.arch), self.timeout)
        if isinstance(outcome, _Failure):
            raise _fail(job, f"{label} failed for {job.arch}: {outcome.what}") from None
        result = outcome.value
        if not isinstance(result, (bytes, bytearray, memoryview)):
            raise _fail(job, f"{label} returned {type(result).__name__}, expected the code "
                             "object's bytes")
        deps = (module.__file__,) if getattr(module, "__file__", None) else ()
        return self._finish(job, bytes(result), tuple(str(d) for d in deps), False,
                            f"the object {label} built")


@dataclass(frozen=True)
class _Value:
    value: Any


@dataclass(frozen=True)
class _Failure:
    what: str  # how the call ended, for the message


def _guarded(call: Callable[[], Any], timeout: float) -> _Value | _Failure:
    """Run a builder's code so that nothing it does ends the pack: any exception,
    ``sys.exit`` and ``KeyboardInterrupt`` included, becomes a failure, and so does a
    call still running after ``timeout`` seconds (its thread is a daemon: it is left
    behind and dies with the process)."""
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
    thread.join(timeout)
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
