"""The probes of ``ukdpack doctor``: each returns one ``Check``.

Every probe is cheap (a ``--version`` and one arch listing per compiler, hipcc's
fingerprint from the compile cache's record or taken anew, a walk of the cache folder)
and never raises for what it finds: a tool that is missing, fails or hangs is a check
that is not ok, with the way to get it.

What a pack needs (``required``): the extension, hipcc (the ``hip`` kernel-source
kind), a compile cache it can write and, when the root's DVC outputs are not all
present, DVC. A clang with the AMDGPU target and nvcc (the ``cuda`` kind) are
optional.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ukdpack.errors import UkdError
from ukdpack.redact import redact_url
from ukdpack.words import count

Status = Literal["ok", "missing", "error"]

#: Seconds one probe may take (a compiler's first run on a cold disk can be slow).
PROBE_TIMEOUT = 30.0

#: clang drivers tried for the AMDGPU check, newest first; the first found is reported.
CLANG_CANDIDATES = (*(f"clang++-{v}" for v in range(21, 13, -1)), "clang++")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str  # "extension", "hipcc", "clang", "nvcc", "dvc", "cache"
    status: Status
    required: bool
    summary: str  # what was found, or what is wrong
    hint: str = ""  # how to get it (empty when ok)
    path: str | None = None
    version: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "required": self.required,
                "summary": self.summary, "hint": self.hint, "path": self.path,
                "version": self.version, "details": dict(self.details)}


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
         ) -> tuple[int, str, str] | str:
    """(exit status, stdout, stderr), or why it could not run (one line). Its own
    process group, killed whole on a timeout: hipcc is a script whose clang would
    otherwise keep the pipes open."""
    from ukdpack.produce.compiler import tool_env

    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, cwd=cwd or "/",
                                env=dict(env if env is not None else tool_env()),
                                start_new_session=True)
    except OSError as e:
        return f"cannot run '{argv[0]}': {e.strerror or e}"
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"'{argv[0]}' did not finish within {PROBE_TIMEOUT:g} s"
    return (proc.returncode, out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"))


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _arch_key(arch: str) -> tuple[int, str]:
    """gfx600 < gfx90a < gfx1030 < gfx9-generic; sm_75 < sm_100."""
    m = re.fullmatch(r"gfx([0-9a-f]+)", arch)
    if m:
        digits = m.group(1)
        return (int(digits[:2] if len(digits) == 4 else digits[:1]), digits)
    m = re.fullmatch(r"sm_([0-9]+)([a-z]?)", arch)
    if m:
        return (int(m.group(1)), m.group(2))
    return (1 << 20, arch)


def clang_amdgpu_arches(clang: str) -> list[str] | str:
    """The AMDGPU processors ``clang`` can build for, in arch order, or why it cannot say."""
    from ukdpack.produce.compiler import amdgpu_arches

    arches = amdgpu_arches(clang, PROBE_TIMEOUT)
    return arches if isinstance(arches, str) else sorted(arches, key=_arch_key)


def _arch_summary(arches: list[str] | str) -> str:
    if isinstance(arches, str):
        return f"arches unknown: {arches}"
    return f"builds {count(len(arches), 'arch')}: {' '.join(arches)}"


def check_extension() -> Check:
    """The ``ukdpack._runtime`` extension: importable, and what it was built with."""
    hint = ("build and install it: scripts/setup.sh in a ukdpack checkout (or pip install "
            "ukdpack, which builds it)")
    try:
        from ukdpack import _runtime
    except ImportError as e:
        return Check("extension", "missing", True, f"ukdpack._runtime cannot be imported: {e}",
                     hint)
    path = getattr(_runtime, "__file__", None)
    build_info = getattr(_runtime, "build_info", None)
    if build_info is None:
        return Check("extension", "error", True, f"{path}: an older build without build_info()",
                     "rebuild it: scripts/setup.sh", path)
    info: dict[str, Any] = build_info()
    compiler = str(info.get("compiler", "")).strip()
    std = {201703: "C++17", 202002: "C++20"}.get(int(info.get("cplusplus", 0)),
                                                  f"__cplusplus {info.get('cplusplus')}")
    summary = (f"{path}: built with {compiler} ({std}); zstd {info.get('zstd')}, "
               f"{info.get('openssl')}, pybind11 {info.get('pybind11')}")
    details = {k: (v.strip() if isinstance(v, str) else v) for k, v in info.items()}
    return Check("extension", "ok", True, summary, path=path, version=compiler,
                 details=details)


class _RecordsRead:
    """The compile cache's compiler records, read and never written: the doctor looks."""

    def __init__(self, cache_dir: Path | None) -> None:
        from ukdpack.produce.cache import CompileCache, default_cache_dir

        folder = cache_dir or default_cache_dir()
        self._cache = CompileCache(folder) if folder.is_dir() else None

    def compiler_record(self, key: str) -> Mapping[str, Any] | None:
        return self._cache.compiler_record(key) if self._cache is not None else None

    def put_compiler_record(self, key: str, record: Mapping[str, Any]) -> None:
        pass


def toolchain_of(path: str, cache_dir: Path | None) -> str | None:
    """The fingerprint of the hipcc at ``path`` (what keys its compiles in the cache, and
    the ``ukdpack-toolchain`` property remote-execution workers offer): the cache's record
    of it when none of its files changed since, else taken anew (under a second); None
    when hipcc cannot tell its version."""
    from ukdpack.produce.compiler import identify

    try:
        return identify("hip", path, _RecordsRead(cache_dir)).identity
    except UkdError:
        return None


def check_hipcc(explicit: str | None, cache_dir: Path | None = None) -> Check:
    """hipcc as a pack finds it (``--hipcc``, ``$UKDPACK_HIPCC``, PATH): version, the clang
    it runs, its fingerprint (the ``ukdpack-toolchain`` value) and the arches that clang
    builds."""
    from ukdpack.produce.compiler import INSTALL_HINT, locate, tool_env

    try:
        path = locate("hip", explicit)
    except UkdError as e:
        return Check("hipcc", "missing", True, _not_found(e), INSTALL_HINT["hip"])
    env = dict(tool_env(), HIPCC_VERBOSE="1")  # hipcc then prints the command it runs
    r = _run([path, "--version"], env)
    if isinstance(r, str) or r[0] != 0:
        why = r if isinstance(r, str) else f"exit {r[0]}: {_first_line(r[2] or r[1])}"
        return Check("hipcc", "error", True, f"{path} --version failed: {why}",
                     INSTALL_HINT["hip"], path)
    out = r[1]
    hip = re.search(r"HIP version:\s*(\S+)", out)
    clang_version = re.search(r"clang version\s+(\S+)", out)
    version = hip.group(1) if hip else _first_line(out)
    cmd = re.search(r"hipcc-cmd:\s*(\S+)", out)
    clang = cmd.group(1).strip("\"'") if cmd else None
    installed = re.search(r"InstalledDir:\s*(.+)", out)
    if clang is None and installed:  # a hipcc that does not echo its command
        clang = shutil.which("clang", path=installed.group(1).strip())
    details: dict[str, Any] = {"clang": clang}
    what = f"HIP {version}"
    if clang_version:
        what += f" (clang {clang_version.group(1)}" + (f" at {clang})" if clang else ")")
    if "nvcc" in out.lower() or "cuda" in _first_line(out).lower():
        return Check("hipcc", "error", True, f"{path} runs nvcc (the NVIDIA platform): {what}",
                     "set HIP_PLATFORM=amd", path, version, details)
    arches = clang_amdgpu_arches(clang) if clang else "hipcc did not name the clang it runs"
    details["arches"] = arches if isinstance(arches, list) else []
    details["toolchain"] = toolchain = toolchain_of(path, cache_dir)
    if toolchain:
        what += f"; toolchain {toolchain}"
    return Check("hipcc", "ok", True, f"{path}: {what}; {_arch_summary(arches)}", path=path,
                 version=version, details=details)


def check_clang() -> Check:
    """The newest clang driver on PATH, and the AMDGPU arches it builds (optional: the
    ``hip`` kind runs the clang hipcc chooses)."""
    found = next((p for p in map(shutil.which, CLANG_CANDIDATES) if p), None)
    hint = ("optional (hipcc runs its own clang): Debian: apt-get install clang-19 (any "
            "clang built with the AMDGPU target)")
    if found is None:
        return Check("clang", "missing", False,
                     "not found: no clang++-N (N from 14 to 21) nor clang++ on PATH", hint)
    r = _run([found, "--version"])
    if isinstance(r, str) or r[0] != 0:
        why = r if isinstance(r, str) else f"exit {r[0]}"
        return Check("clang", "error", False, f"{found} --version failed: {why}", hint, found)
    version = _first_line(r[1])
    arches = clang_amdgpu_arches(found)
    if isinstance(arches, str):
        return Check("clang", "missing", False, f"{found} ({version}) has no AMDGPU target: "
                     f"{arches}", hint, found, version)
    return Check("clang", "ok", False, f"{found}: {version}; AMDGPU: {_arch_summary(arches)}",
                 path=found, version=version, details={"arches": arches})


def check_nvcc(explicit: str | None) -> Check:
    """nvcc as a pack finds it, its release and the sm_ arches it builds (optional: only
    the ``cuda`` kind needs it)."""
    from ukdpack.produce.compiler import INSTALL_HINT, locate

    hint = "optional (only the cuda kind needs it): " + INSTALL_HINT["cuda"]
    try:
        path = locate("cuda", explicit)
    except UkdError as e:
        return Check("nvcc", "missing", False, _not_found(e), hint)
    r = _run([path, "--version"])
    if isinstance(r, str) or r[0] != 0:
        why = r if isinstance(r, str) else f"exit {r[0]}: {_first_line(r[2] or r[1])}"
        return Check("nvcc", "error", False, f"{path} --version failed: {why}", hint, path)
    m = re.search(r"release\s+([0-9.]+),\s*V?([0-9.]+)", r[1])
    version = m.group(2) if m else _first_line(r[1])
    listed = _run([path, "--list-gpu-code"])
    arches: list[str] | str
    if isinstance(listed, str):
        arches = listed
    else:
        arches = sorted({w for w in listed[1].split() if w.startswith("sm_")}, key=_arch_key)
        arches = arches or f"'{path} --list-gpu-code' listed none (exit {listed[0]})"
    return Check("nvcc", "ok", False, f"{path}: CUDA {version}; {_arch_summary(arches)}",
                 path=path, version=version,
                 details={"arches": arches if isinstance(arches, list) else []})


def _not_found(e: UkdError) -> str:
    """'hipcc' on PATH is not an executable -> not found: 'hipcc' on PATH."""
    text = e.problems[0].message if e.problems else str(e)
    m = re.search(r"found: (.*?) is not an executable", text)
    return f"not found: {m.group(1)}" if m else text.split(";")[0]


def dvc_remotes(repo: Path) -> list[dict[str, Any]] | str:
    """The remotes DVC sees in ``repo`` (its config files, local, global and system
    ones), by asking DVC; or why it could not say."""
    r = _run([sys.executable, "-m", "dvc", "remote", "list"], dict(os.environ), cwd=repo)
    if isinstance(r, str):
        return r
    rc, out, err = r
    if rc != 0:
        return f"dvc remote list failed (exit {rc}): {_first_line(err)}"
    remotes: list[dict[str, Any]] = []
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2:
            # a remote's URL may hold a password (https://user:pw@host/...)
            remotes.append({"name": words[0], "url": redact_url(words[1]),
                            "default": "(default)" in words[2:]})
    return remotes


def check_dvc(root: Path) -> Check:
    """DVC's version, and for ``root``: its DVC repository, remotes and how many of its
    outputs are present. Required when some are not (a pack needs them pulled)."""
    from ukdpack.authored import dvc

    st = dvc.status(root) if root.is_dir() else None
    repo = st.repo if st is not None else None
    outputs = len(st.outputs) if st else 0
    missing = len(st.missing) if st else 0
    required = missing > 0
    where = (f"{root}: no DVC outputs" if not outputs else
             f"{root}: {outputs - missing} of {outputs} DVC outputs present")
    details: dict[str, Any] = {"root": str(root), "repo": str(repo) if repo else None,
                               "outputs": outputs, "missing": missing, "remotes": []}
    if not dvc.available():
        return Check("dvc", "missing", required, f"this Python ({sys.executable}) cannot "
                     f"import DVC; {where}", "pip install 'ukdpack[dvc]' (or: pip install dvc)"
                     + ("" if required else "; optional: no output of the root is missing"),
                     details=details)
    version = importlib.metadata.version("dvc")
    if repo is None:
        return Check("dvc", "ok", required, f"DVC {version}; {where}, in no DVC repository",
                     version=version, details=details)
    remotes = dvc_remotes(repo)
    if isinstance(remotes, str):
        return Check("dvc", "error", required, f"DVC {version}; {where}; repository {repo}: "
                     f"{remotes}", "check the repository's .dvc/config", version=version,
                     details=details)
    details["remotes"] = remotes
    names = ", ".join(f"{r['name']} ({r['url']}{', default' if r['default'] else ''})"
                      for r in remotes) or "none"
    summary = f"DVC {version}; {where}; repository {repo}, remotes: {names}"
    if missing:
        summary += f"; fetch the missing ones with: ukdpack dvc-pull {root}"
    return Check("dvc", "ok", required, summary, version=version, details=details)


def check_cache(explicit: Path | None) -> Check:
    """Where the compile cache is, its size, and that a pack can write it."""
    from ukdpack.produce.cache import default_cache_dir

    folder = explicit or default_cache_dir()
    hint = "pass --cache-dir D or set UKDPACK_CACHE_DIR to a folder this user can write"
    if folder.is_dir():
        files, size = 0, 0
        for base, _dirs, names in os.walk(folder):
            for n in names:
                try:
                    size += os.lstat(os.path.join(base, n)).st_size
                    files += 1
                except OSError:
                    pass
        details = {"folder": str(folder), "files": files, "bytes": size, "exists": True}
        if not os.access(folder, os.W_OK | os.X_OK):
            return Check("cache", "error", True, f"{folder}: not writable by this user", hint,
                         str(folder), details=details)
        return Check("cache", "ok", True, f"{folder}: {files:,} files, {_size(size)}",
                     path=str(folder), details=details)
    if os.path.lexists(folder):
        return Check("cache", "error", True, f"{folder}: not a folder", hint, str(folder))
    parent = next((p for p in folder.absolute().parents if p.exists()), Path("/"))
    details = {"folder": str(folder), "files": 0, "bytes": 0, "exists": False}
    if not os.access(parent, os.W_OK | os.X_OK):
        return Check("cache", "error", True, f"{folder}: absent, and {parent} is not "
                     "writable by this user", hint, str(folder), details=details)
    return Check("cache", "ok", True, f"{folder}: not made yet (the first pack makes it)",
                 path=str(folder), details=details)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # pragma: no cover


def run_checks(source_root: Path, hipcc: str | None, nvcc: str | None,
               cache_dir: Path | None) -> list[Check]:
    """Every check, in the order the report prints them."""
    return [check_extension(), check_hipcc(hipcc, cache_dir), check_clang(), check_nvcc(nvcc),
            check_dvc(source_root), check_cache(cache_dir)]
