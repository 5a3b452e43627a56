"""Finding the device compilers and running one device-only compile (SPEC 5).

hip: hipcc, from ``--hipcc``, then ``UKDPACK_HIPCC``, then ``PATH``; cuda: nvcc, from
``--nvcc``, then ``UKDPACK_NVCC``, then ``PATH``. Flags are pinned so the object
depends only on the inputs (hip: ``-fuse-cuid=none`` and the root's absolute path
mapped away), with ``-O3`` unless the build's own flags say otherwise (they come
later on the command line and win).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ukdpack.errors import UkdError

INSTALL_HINT = {
    "hip": "pass --hipcc PATH, set UKDPACK_HIPCC, or install one (Debian: apt-get install "
           "hipcc; with an NVIDIA toolchain also installed, set HIP_PLATFORM=amd)",
    "cuda": "pass --nvcc PATH, set UKDPACK_NVCC, or install the CUDA toolkit (it provides "
            "nvcc)",
}
ENV_VAR = {"hip": "UKDPACK_HIPCC", "cuda": "UKDPACK_NVCC"}
PROGRAM = {"hip": "hipcc", "cuda": "nvcc"}
OPTION = {"hip": "--hipcc", "cuda": "--nvcc"}


@dataclass(frozen=True)
class Compiler:
    """A compiler and what identifies its output: path, and its version text."""

    kind: str  # "hip"
    path: str
    version: str  # the version text the compiler printed (first lines)

    @property
    def identity(self) -> str:
        """Digest of the version text: the same compiler gives the same objects."""
        return hashlib.sha256(f"{self.kind}\0{self.version}".encode()).hexdigest()


def locate(kind: str, explicit: str | None) -> str:
    """The compiler's path, or a UkdError that says how to get one."""
    candidate = explicit or os.environ.get(ENV_VAR[kind]) or PROGRAM[kind]
    found = shutil.which(candidate)
    if found is None:
        where = (f"'{candidate}' (from {OPTION[kind]})" if explicit else
                 f"'{candidate}' (from {ENV_VAR[kind]})" if os.environ.get(ENV_VAR[kind]) else
                 f"'{candidate}' on PATH")
        raise UkdError(f"no {kind} compiler found: {where} is not an executable; "
                       f"{INSTALL_HINT[kind]}")
    return os.path.abspath(found)


def version_text(path: str) -> str:
    """What ``<compiler> --version`` prints (stdout), stripped of blank lines."""
    env = dict(os.environ)
    env.setdefault("HIP_PLATFORM", "amd")
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, env=env,
                           encoding="utf-8", errors="replace", timeout=120, check=False,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UkdError(f"cannot run the compiler {path} --version: {e}") from None
    lines = [ln.rstrip() for ln in r.stdout.splitlines() if ln.strip()]
    if r.returncode != 0 or not lines:
        raise UkdError(f"the compiler {path} --version failed (exit {r.returncode}): "
                       f"{(r.stderr or r.stdout).strip()[:500]}")
    # "InstalledDir: ..." names a path, not a version: leave it out of the identity.
    return "\n".join(ln for ln in lines if not ln.startswith("InstalledDir:"))


def _define(name: str, value: Any) -> str:
    if isinstance(value, bool):
        value = int(value)
    return f"-D{name}={value}"


def _pinned(kind: str, arch: str) -> list[str]:
    if kind == "cuda":
        return ["-cubin", f"-arch={arch}", "-O3"]
    return ["--genco", f"--offload-arch={arch}", "-O3", "-fuse-cuid=none"]


def key_argv(kind: str, build: Mapping[str, Any], arch: str) -> list[str]:
    """What of the command line determines the object, without any path in it."""
    defines = [_define(k, v) for k, v in sorted((build.get("defines") or {}).items())]
    flags: Sequence[str] = build.get("flags") or []
    return [*_pinned(kind, arch), *defines, *flags]


def compile_argv(compiler: Compiler, source: Path, build: Mapping[str, Any], arch: str,
                 output: Path, depfile: Path, root: Path) -> list[str]:
    """The device-only compile of one translation unit for one arch."""
    argv = [compiler.path, *key_argv(compiler.kind, build, arch)]
    if compiler.kind == "hip":
        argv.insert(len(_pinned("hip", arch)) + 1, f"-ffile-prefix-map={root}=.")
    return [*argv, "-MD", "-MF", str(depfile), "-o", str(output), str(source)]


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a Makefile-style depfile written by clang (-MD)."""
    body = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, _, deps = body.partition(": ")
    out: list[str] = []
    token = ""
    i = 0
    while i < len(deps):
        c = deps[i]
        if c == "\\" and i + 1 < len(deps) and deps[i + 1] == " ":
            token += " "
            i += 2
            continue
        if c.isspace():
            if token:
                out.append(token)
            token = ""
        else:
            token += c
        i += 1
    if token:
        out.append(token)
    return out


@dataclass(frozen=True)
class CompileOutcome:
    ok: bool
    data: bytes
    deps: tuple[str, ...]  # absolute paths the compile read
    message: str  # the compiler's stderr (on failure, what to show)


#: Seconds one compile (or one builder call) may take before its arch fails.
DEFAULT_JOB_TIMEOUT = 1800.0


def run_compile(argv: list[str], output: Path, depfile: Path, cwd: Path,
                timeout: float = DEFAULT_JOB_TIMEOUT) -> CompileOutcome:
    """Run one compile; never raises for a failing or hung compile. The compiler runs in
    its own process group so a timeout stops the driver and every process it started.
    Its output is read as UTF-8 with replacement characters: a message in another
    encoding is still shown."""
    env = dict(os.environ)
    env.setdefault("HIP_PLATFORM", "amd")
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                start_new_session=True)
    except OSError as e:
        return CompileOutcome(False, b"", (), f"cannot run {argv[0]}: {e.strerror}")
    try:
        out_bytes, err_bytes = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return CompileOutcome(False, b"", (), f"{os.path.basename(argv[0])} did not finish "
                              f"within {timeout:g} s and was stopped (raise --job-timeout "
                              "if a compile legitimately takes longer)")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    stdout = out_bytes.decode("utf-8", errors="replace")
    stderr = err_bytes.decode("utf-8", errors="replace")
    if proc.returncode != 0 or not output.is_file():
        text = (stderr + stdout).strip() or f"exit status {proc.returncode}"
        return CompileOutcome(False, b"", (), text)
    deps: list[str] = []
    if depfile.is_file():
        text = depfile.read_bytes().decode("utf-8", errors="surrogateescape")
        deps = [os.path.abspath(os.path.join(cwd, d)) for d in parse_depfile(text)]
    return CompileOutcome(True, output.read_bytes(), tuple(deps), stderr.strip())
