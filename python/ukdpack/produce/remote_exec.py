"""Remote execution of compiles on a team's build farm (``pack --remote-exec``,
docs/packing.md "Remote execution"), the tier behind the local cache and the team cache.

One action per hip compile: the argv the local compile runs, spelled relative to an
input root that holds the source-root files the compile reads (the compile cache's
record of an earlier compile of the same key, else the includes followed in the source
text; after a failure on those, the local preprocessor's ``-M`` scan). The compiler's files are not inputs: its fingerprint (the compile cache's
compiler identity) is the ``ukdpack-toolchain`` platform property, so only a worker
offering that toolchain takes the action, and the action key stays hermetic. Paths are
spelled so that the object is byte-identical to the local one: the source as
``../..``-relative from its folder and ``-ffile-prefix-map`` mapping that prefix to
``.`` (locally the root's absolute path is mapped to ``.``).

The tier never trusts an answer: outputs are re-hashed by the client, the depfile may
only name files of the input root or the compiler's include folders, and the object is
checked as a code object of the job's target by the runtime (producers.Producer) before
it fills the local cache and the team cache. A fault costs one warning and the compile
runs here (``require``: the pack fails with that fault).
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ukdpack.errors import UkdError, escape_controls
from ukdpack.produce import compiler
from ukdpack.redact import redact, redact_url

if TYPE_CHECKING:
    from ukdpack.remote.action import ActionSpec
    from ukdpack.remote.client import Executor

Mode = Literal["auto", "require"]
MODES: tuple[Mode, ...] = ("auto", "require")
#: The platform property naming the compiler fingerprint a worker must have.
TOOLCHAIN_PROPERTY = "ukdpack-toolchain"
#: Where an action writes its object and depfile, relative to its working directory.
OUT_DIR = ".ukdpack-out"
OBJECT = f"{OUT_DIR}/object.o"
DEPFILE = f"{OUT_DIR}/object.d"
#: The compilers whose compiles go to a farm: hipcc's device-only compiles, whose action
#: this module spells. CUDA compiles run here (docs/packing.md, "Remote execution").
COMPILERS = frozenset({"hip"})
DEFAULT_JOBS = 64  # the client's too (ukdpack.remote.client.DEFAULT_JOBS)
INSTALL_HINT = ("remote execution needs grpcio and protobuf: pip install 'ukdpack[remote]'")


@dataclass(frozen=True)
class RemoteExecConfig:
    """How to reach the farm and what a pack may do with it."""

    url: str
    jobs: int = DEFAULT_JOBS
    properties: tuple[tuple[str, str], ...] = ()
    mode: Mode = "auto"


@dataclass(frozen=True)
class RemoteCompile:
    """A compile the farm ran (or answered from its action cache)."""

    ok: bool
    data: bytes  # the object's bytes (ok)
    deps: tuple[str, ...]  # absolute paths here the compile read (ok)
    message: str  # the compiler's stderr and stdout, as a local compile shows them
    cached: bool
    seconds: float


@dataclass(frozen=True)
class RemoteExecStats:
    """One pack's use of remote execution (the summary line and ``pack --json``)."""

    url: str  # redacted
    mode: Mode
    executed: int
    cache_hits: int
    local: int  # compiles run here instead (inputs outside the root, or after a fault)
    refused: int  # answers refused (damaged or of the wrong target)
    uploaded_bytes: int
    fault: str | None

    def line(self) -> str:
        text = (f"remote execution {self.url}: {self.executed} executed, {self.cache_hits} "
                f"from its action cache, {self.local} compiled here")
        if self.refused:
            text += f"; {self.refused} results refused"
        if self.fault:
            text += "; off after a fault"
        return text

    def doc(self) -> dict[str, Any]:
        return {"url": self.url, "mode": self.mode, "executed": self.executed,
                "cache_hits": self.cache_hits, "local": self.local, "refused": self.refused,
                "uploaded_bytes": self.uploaded_bytes, "fault": self.fault}


def _print_warning(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # looked up now: progress may proxy stderr


class RemoteExecTier:
    """Remote execution for one pack; ``start`` first. Thread-safe."""

    def __init__(self, config: RemoteExecConfig,
                 warn: Callable[[str], None] = _print_warning) -> None:
        self.config = config
        self.where = redact_url(config.url)
        self._warn = warn
        self._lock = threading.Lock()
        self._executor: Executor | None = None
        self._fault: str | None = None
        self._refusal_told = False
        self._counts = {"executed": 0, "cache_hits": 0, "local": 0, "refused": 0}

    @property
    def off(self) -> bool:
        return self._fault is not None or self._executor is None

    def takes(self, compiler: str | None) -> bool:
        """Whether compiles of ``compiler`` (a kind's, from the kinds table) go to the farm."""
        return compiler in COMPILERS

    @property
    def jobs(self) -> int:
        """Actions this tier keeps in flight (0 once off)."""
        return 0 if self.off else self.config.jobs

    def start(self) -> None:
        """Reach the farm; on failure one warning and the tier is off (``require``: a
        UkdError). Without grpcio, a UkdError naming the ``remote`` extra."""
        try:
            from ukdpack.remote.client import Executor, RemoteExecFault
            from ukdpack.remote.url import parse_url
        except ImportError as e:
            raise UkdError(f"--remote-exec {self.where}: {INSTALL_HINT} ({e})") from None
        executor = Executor(parse_url(self.config.url), self.config.jobs)
        try:
            executor.start()
        except RemoteExecFault as e:
            executor.close()
            self._off(str(e))
            return
        self._executor = executor

    def _off(self, why: str) -> None:
        """The tier goes off (told once); ``require``: a UkdError instead."""
        why = escape_controls(redact(why))
        if self.config.mode == "require":
            raise UkdError(f"remote execution {self.where}: {why}; with --remote-exec-mode "
                           "require nothing is compiled here (use auto to fall back)")
        with self._lock:
            if self._fault is not None:
                return
            self._fault = why
        self._warn(f"ukdpack: warning: remote execution {self.where}: {why}; compiling here "
                   "for the rest of this pack")

    def refuse(self, what: str) -> None:
        """An answer not used (damaged, wrong target): told once, counted; the compile
        runs here (``require``: a UkdError)."""
        what = escape_controls(redact(what))
        if self.config.mode == "require":
            raise UkdError(f"remote execution {self.where}: {what}; refused, and with "
                           "--remote-exec-mode require nothing is compiled here")
        with self._lock:
            self._counts["refused"] += 1
            told, self._refusal_told = self._refusal_told, True
        if not told:
            self._warn(f"ukdpack: warning: remote execution {self.where}: {what}; refused, "
                       "compiled here (further refusals are counted in the summary)")

    def local(self) -> None:
        """A compile this tier could have run ran here."""
        with self._lock:
            self._counts["local"] += 1

    def run(self, spec: ActionSpec) -> Any:
        """The farm's ExecResult for ``spec``, or None (a fault: the tier is off, or a
        refused answer). Raises UkdError when interrupted, or under ``require``."""
        from ukdpack.remote.client import PoisonedResult, RemoteExecFault

        executor = self._executor
        if executor is None or self._fault is not None:
            return None
        try:
            result = executor.run(spec)
        except concurrent.futures.CancelledError:
            raise UkdError("the pack was interrupted") from None
        except PoisonedResult as e:
            self.refuse(str(e))
            return None
        except RemoteExecFault as e:
            self._off(str(e))
            return None
        with self._lock:
            self._counts["cache_hits" if result.cached else "executed"] += 1
        return result

    def cancel(self) -> None:
        """Cancel what is in flight (Ctrl-C)."""
        if self._executor is not None:
            self._executor.cancel()

    def finish(self) -> RemoteExecStats:
        """Close the channel; the pack's stats."""
        uploaded = 0
        if self._executor is not None:
            uploaded = self._executor.counts.uploaded_bytes
            self._executor.close()
        c = self._counts
        return RemoteExecStats(self.where, self.config.mode, c["executed"], c["cache_hits"],
                               c["local"], c["refused"], uploaded, self._fault)


# ---------------------------------------------------------------- the action of a compile
def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def input_files(deps: Sequence[str], root: Path, toolchain: Sequence[str]
                ) -> dict[str, str] | str:
    """The root-relative files (``rel -> absolute path``) of a compile reading ``deps``
    (absolute paths), or why it cannot run remotely (a file outside the source root and
    the compiler's include folders: the action would not be hermetic)."""
    base = os.path.normpath(str(root))
    found: dict[str, str] = {}
    for dep in deps:
        path = os.path.normpath(dep)
        if _inside(path, base) and path != base:
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            if not os.path.isfile(path):
                return f"{rel} is no regular file"
            found[rel] = path
        elif not any(_inside(path, d) or _inside(os.path.realpath(path), d)
                     for d in toolchain):
            return f"it reads {path}, outside the source root and the compiler's folders"
    return found


def scan_deps(comp: compiler.Compiler, keyed: Sequence[str], source: Path, root: Path,
              tmp: Path, timeout: float) -> list[str] | str:
    """What the compile reads, as the local preprocessor's ``-M`` scan tells (absolute
    paths), or why the scan failed."""
    depfile = tmp / "scan.d"
    argv = compiler.scan_argv(comp, keyed, source, depfile, root)
    outcome = compiler.run_compile(argv, depfile, depfile, source.parent, timeout)
    if not outcome.ok:
        return "its dependency scan failed"
    return list(outcome.deps)


def _prefix(rel: str) -> tuple[str, str]:
    """(working directory, the prefix leading from it back to the input root)."""
    folder = os.path.dirname(rel)
    depth = len(folder.split("/")) if folder else 0
    return folder, "/".join([".."] * depth) or "."


def compile_spec(comp: compiler.Compiler, keyed: Sequence[str], rel: str,
                 inputs: Mapping[str, bytes], properties: Sequence[tuple[str, str]],
                 timeout: float) -> ActionSpec:
    """The action of the compile of ``rel`` (root-relative) with the path-free command
    line ``keyed``, reading ``inputs`` (root-relative path -> bytes)."""
    from ukdpack.remote.action import ActionSpec

    folder, prefix = _prefix(rel)
    spelled = f"{prefix}/{rel}"
    argv = compiler.rerun_argv(comp, keyed, Path(spelled), Path(OBJECT), Path(DEPFILE),
                               Path(prefix))
    argv[-1] = spelled  # as written: pathlib would drop a leading "./"
    env = compiler.tool_env()
    chosen = {k: env[k] for k in compiler.IDENTITY_ENV[comp.kind] if k in env}
    # The compile's temporary files in its own working directory, which the worker drops
    # with the input root: the HIP toolchain leaves two folders per compile in TMPDIR,
    # which a worker's own would gather by the hundred thousand (as a local compile's
    # TMPDIR is a folder of its own, removed after it).
    chosen["TMPDIR"] = "."
    platform = {**dict(properties), TOOLCHAIN_PROPERTY: comp.identity}
    return ActionSpec(tuple(argv), dict(inputs), (OBJECT, DEPFILE), folder, chosen, platform,
                      timeout)


def _local_paths(text: str, rel: str, inputs: Sequence[str], root: Path) -> str:
    """A worker's compiler output with each input spelled as the local compile spells it
    (under the root's absolute path), so a failure reads as a local one."""
    _, prefix = _prefix(rel)
    spelled = {f"{prefix}/{r}": str(root / r) for r in inputs}
    if not spelled:
        return text
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(
        re.escape(s) for s in sorted(spelled, key=len, reverse=True)) + r")(?![\w/-])")
    return pattern.sub(lambda m: spelled[m.group(1)], text)


def remote_compile(result: Any, rel: str, inputs: Mapping[str, str], root: Path,
                   toolchain: Sequence[str], seconds: float) -> RemoteCompile | str:
    """The farm's ExecResult as a compile here, or why it is refused (no object, a
    depfile naming a file outside the input root and the compiler's folders)."""
    def text(data: bytes) -> str:
        return data.decode("utf-8", errors="replace")

    message = _local_paths((text(result.stderr) + text(result.stdout)).strip(), rel,
                           list(inputs), root)
    if result.exit_code != 0:
        return RemoteCompile(False, b"", (), message or f"exit status {result.exit_code}",
                             result.cached, seconds)
    data = result.outputs.get(OBJECT)
    if not data:
        return "the action succeeded but gave no object"
    folder, _ = _prefix(rel)
    deps: list[str] = []
    raw = result.outputs.get(DEPFILE)
    named = compiler.parse_depfile(text(raw)) if raw else []
    for d in named:
        path = os.path.normpath(d if os.path.isabs(d) else os.path.join(str(root), folder, d))
        given = path in inputs.values() or (os.path.isabs(d)
                                             and any(_inside(path, t) for t in toolchain))
        if given:
            deps.append(path)
        else:
            return f"its depfile names {escape_controls(d)[:100]!r}, which it was not given"
    if not math.isfinite(seconds):
        seconds = 0.0
    return RemoteCompile(True, data, tuple(deps) or tuple(inputs.values()), message,
                         result.cached, seconds)

