"""Finding the device compilers, telling what they are, and running one device-only
compile.

hip: hipcc, from ``--hipcc``, then ``UKDPACK_HIPCC``, then ``PATH``; cuda: nvcc, from
``--nvcc``, then ``UKDPACK_NVCC``, then ``PATH``. The command line a compile runs is
formed in command_line.py.

A compiler's *identity* (part of every cache key) covers what really compiles, not
only the driver's version text: hipcc is a script that picks its clang, device
libraries and flags through environment variables, so the identity is taken over
the version text, those variables, the command hipcc runs (``HIPCC_VERBOSE=1`` on a
``-###`` probe compile) and the sha256 of every file that probe names (the clang
hipcc runs, cc1, lld, the offload bundler, the device bitcode libraries) plus the
LLVM and clang libraries they load. It is recorded with the size, mtimes and inode of
each of those files, so a warm pack re-stats them and runs no process.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ukdpack import scratch
from ukdpack.digest import canonical_json, sha256_hex
from ukdpack.errors import UkdError
from ukdpack.files import kind_of, read_regular
from ukdpack.produce import command_line
from ukdpack.produce.command_line import CLANG_DEVICE_FLAGS
from ukdpack.produce.command_line import key_argv as key_argv  # the cache key's part
from ukdpack.produce.early_compiles import spawn
from ukdpack.produce.early_compiles import tool_env as tool_env  # used here too
from ukdpack.produce.limits import DEFAULT_JOB_TIMEOUT

INSTALL_HINT = {
    "hip": "pass --hipcc PATH, set UKDPACK_HIPCC, or install one (Debian: apt-get install "
           "hipcc; with an NVIDIA toolchain also installed, set HIP_PLATFORM=amd)",
    "cuda": "pass --nvcc PATH, set UKDPACK_NVCC, or install the CUDA toolkit (it provides "
            "nvcc)",
}
ENV_VAR = {"hip": "UKDPACK_HIPCC", "cuda": "UKDPACK_NVCC"}
PROGRAM = {"hip": "hipcc", "cuda": "nvcc"}
OPTION = {"hip": "--hipcc", "cuda": "--nvcc"}


#: What each driver reads from the environment to choose the compiler it runs, its
#: device libraries and the flags it adds (Debian's hipcc.pl and hipvars.pm, clang's
#: driver, nvcc). Their values are part of the compiler's identity.
IDENTITY_ENV = {
    "hip": ("HIP_PLATFORM", "HIP_PATH", "ROCM_PATH", "HIP_CLANG_PATH", "HIP_ROCCLR_HOME",
            "HIP_COMPILER", "HIP_RUNTIME", "HSA_PATH", "CUDA_PATH", "HIP_LIB_PATH",
            "DEVICE_LIB_PATH", "HIP_DEVICE_LIB_PATH", "HIP_CLANG_HCC_COMPAT_MODE",
            "HIP_COMPILE_CXX_AS_HIP", "HIPCC_COMPILE_FLAGS_APPEND", "HIPCC_LINK_FLAGS_APPEND",
            "HCC_AMDGPU_TARGET", "CCC_OVERRIDE_OPTIONS", "CPATH", "CPLUS_INCLUDE_PATH",
            "C_INCLUDE_PATH"),
    "cuda": ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CUDA_PATH", "CPATH",
             "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"),
}
#: The arch of the ``-###`` probe: any the toolchain knows; only the files it names matter.
PROBE_ARCH = "gfx90a"
#: Seconds the version and probe runs may take (a compile's own limit when lower).
PROBE_TIMEOUT = 120.0
#: hipcc's companions next to its real path (Debian: the Perl driver and its variables).
_HIPCC_COMPANIONS = ("hipcc.pl", "hipvars.pm", "hipcc.bin", ".hipVersion")
#: The shared libraries that hold the compiler proper (clang's binary is a thin driver).
_COMPILER_LIBRARY = re.compile(r"lib(LLVM|clang|lld)")


@dataclass(frozen=True)
class Compiler:
    """A compiler and what identifies its output."""

    kind: str  # "hip"
    path: str
    version: str  # the version text the compiler printed (first lines; for provenance)
    identity: str  # digest of everything that decides its objects (module docstring)
    #: The system include folders its compiles read headers from (as it tells them): the
    #: only files outside the source root a remote cache entry may name (remote.py).
    include_dirs: tuple[str, ...] = ()

    @property
    def driver(self) -> str:
        """How it is called: ``hipcc``, ``clang`` (a clang driver named by ``--hipcc``) or
        ``nvcc``."""
        return driver_of(self.kind, self.version)


def driver_of(kind: str, version: str) -> str:
    """``clang`` when a hip compiler's version text is a plain clang's (no ``HIP
    version`` line: hipcc prints one), else the kind's own driver."""
    if kind == "hip" and "HIP version" not in version and "clang version" in version:
        return "clang"
    return PROGRAM[kind]


class CompilerRecords(Protocol):
    """Where fingerprints are remembered between packs (the compile cache)."""

    def compiler_record(self, key: str) -> Mapping[str, Any] | None: ...

    def put_compiler_record(self, key: str, record: Mapping[str, Any]) -> None: ...


def identify(kind: str, path: str, records: CompilerRecords | None,
             timeout: float = PROBE_TIMEOUT) -> Compiler:
    """The compiler at ``path`` with its identity: the record kept for it when none of
    the files it names changed (no process runs), else fingerprinted anew and recorded.
    Raises UkdError when it cannot tell its version."""
    env = tool_env()
    chosen = {k: env[k] for k in IDENTITY_ENV[kind] if k in env}
    # The environment is part of the record's key: switching back and forth stays warm.
    key = sha256_hex(canonical_json({"kind": kind, "path": path, "env": chosen}))
    found = records.compiler_record(key) if records is not None else None
    if found is not None and all(_stat(p) == st for p, st in found["watched"].items()):
        return Compiler(kind, path, found["version"], found["identity"],
                        tuple(found["includes"]))
    version, identity, watched, whole, includes = _fingerprint(kind, path, env, chosen,
                                                               min(timeout, PROBE_TIMEOUT))
    # A fingerprint whose probe failed does not watch the clang: it is not kept, lest a
    # clang swapped later go unseen.
    if records is not None and whole:
        records.put_compiler_record(key, {"version": version, "identity": identity,
                                          "watched": watched, "includes": list(includes)})
    return Compiler(kind, path, version, identity, includes)


def _fingerprint(kind: str, path: str, env: Mapping[str, str], chosen: Mapping[str, str],
                 timeout: float
                 ) -> tuple[str, str, dict[str, list[int]], bool, tuple[str, ...]]:
    """(version text, identity, {file: stat}, whether the probe told what runs, system
    include folders) of the compiler at ``path``."""
    real = os.path.realpath(path)
    files = [path, real] + [os.path.join(os.path.dirname(real), n) for n in _HIPCC_COMPANIONS
                            if kind == "hip"]
    version = version_text(path, timeout)
    driver = ""
    includes: list[str] = []
    if kind == "hip":
        driver, tools, includes = _probe_hip(path, env, timeout, driver_of(kind, version))
        files += tools + _compiler_libraries(tools, timeout)
    else:  # the toolkit nvcc says it is in, and the host compiler's system folders
        includes = [_nvcc_toolkit(path, env, timeout) or os.path.dirname(os.path.dirname(real)),
                    *CUDA_HOST_INCLUDES]
    whole = kind != "hip" or bool(driver)
    watched: dict[str, list[int]] = {}
    digests: set[tuple[str, str]] = set()
    for p in dict.fromkeys(files):
        st = _stat(p)  # before the digest: a file changed meanwhile is seen next time
        if st is None:
            continue
        watched[p] = st
        try:
            with open(p, "rb") as f:
                digests.add((os.path.basename(os.path.realpath(p)),
                             hashlib.file_digest(f, "sha256").hexdigest()))
        except OSError:
            continue
    identity = sha256_hex(canonical_json({
        "kind": kind, "version": version, "env": dict(chosen), "driver": driver,
        # by name, not path: the same toolchain elsewhere shares entries
        "files": sorted(digests)}))
    return version, identity, watched, whole, _include_dirs(includes)


#: The system header folders of a CUDA host compiler (gcc, clang) on Linux.
CUDA_HOST_INCLUDES = ("/usr/include", "/usr/local/include", "/usr/lib/gcc")
#: The flags of clang's ``-###`` that name a system include folder.
_INCLUDE_FLAGS = frozenset({"-isystem", "-internal-isystem", "-internal-externc-isystem",
                            "-idirafter", "-resource-dir"})


def _nvcc_toolkit(path: str, env: Mapping[str, str], timeout: float) -> str | None:
    """The toolkit folder nvcc's ``--dryrun`` names (``#$ TOP=``): a wrapper script on
    PATH says nothing by its own path. None when the probe fails."""
    try:
        _, _, err = _run_tool([path, "--dryrun", "-cubin", "-x", "cu", os.devnull, "-o",
                               os.devnull], env, timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in err.splitlines():
        if line.startswith("#$ TOP="):
            return line.partition("=")[2].strip()
    return None


def _include_dirs(found: Sequence[str]) -> tuple[str, ...]:
    """Absolute, normalised (as spelled and with links resolved), never ``/`` itself."""
    dirs = [f(d) for d in found if os.path.isabs(d)
            for f in (os.path.normpath, os.path.realpath)]
    return tuple(sorted({d for d in dirs if d != "/" and not d.startswith("//")}))


def _probe_hip(path: str, env: Mapping[str, str], timeout: float,
               how: str = "hipcc") -> tuple[str, list[str], list[str]]:
    """The command hipcc runs for a device compile (``hipcc-cmd:``, with the flags it
    adds), the files clang's ``-###`` names (cc1, lld, bundler, bitcode libraries) and the
    system include folders it names. Empty when the probe fails: the identity then rests
    on the rest."""
    # -c --cuda-device-only is what hipcc makes of --genco, which is left out so that
    # wrappers counting compiles do not count the probe.
    argv = [path, "-c", "--cuda-device-only", f"--offload-arch={PROBE_ARCH}", "-###",
            "-x", "hip", os.devnull, "-o", os.devnull]
    if how == "clang":  # as compiles call it: no ROCm device libraries to look for
        argv[1:1] = list(CLANG_DEVICE_FLAGS)
    try:
        _, out, err = _run_tool(argv, {**env, "HIPCC_VERBOSE": "1"}, timeout)
    except (OSError, subprocess.TimeoutExpired):
        return "", [], []
    driver = ""
    files: list[str] = []
    includes: list[str] = []
    for line in out.splitlines():
        if line.startswith("hipcc-cmd:"):
            driver = line.partition(":")[2].strip()
            words = _split(driver)
            program = shutil.which(words[0], path=env.get("PATH")) if words else None
            if program:
                files += [os.path.abspath(program), os.path.realpath(program)]
    for line in err.splitlines():
        if line.startswith(' "'):  # one command of -### (the version lines are not)
            words = _split(line)
            files += [os.path.realpath(w) for w in words
                      if os.path.isabs(w) and os.path.isfile(w)]
            includes += [w for flag, w in itertools.pairwise(words) if flag in _INCLUDE_FLAGS]
    if how == "clang" and files:  # a clang runs no hipcc-cmd: its own commands tell it
        driver = f"clang {os.path.realpath(path)}"
    return driver, files, includes


def _compiler_libraries(tools: Sequence[str], timeout: float) -> list[str]:
    """The LLVM, clang and lld shared libraries the ELF ``tools`` load (``ldd``)."""
    elves = []
    for t in dict.fromkeys(tools):
        with contextlib.suppress(OSError), open(t, "rb") as f:
            if f.read(4) == b"\x7fELF" and os.access(t, os.X_OK):
                elves.append(t)
    if not elves or shutil.which("ldd") is None:
        return []
    try:
        _, out, _ = _run_tool(["ldd", *elves], dict(os.environ), timeout)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        lib = rest.split(" (")[0].strip()
        if arrow and _COMPILER_LIBRARY.match(name) and os.path.isabs(lib):
            found.append(os.path.realpath(lib))
    return found


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote: words are still worth having
        return text.split()


def _stat(path: str) -> list[int] | None:
    """What stands for a file's content between packs: size, mtime, ctime and inode (a
    file replaced by a rename, or copied over with its mtime kept, changes one)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _run_tool(argv: Sequence[str], env: Mapping[str, str], timeout: float
              ) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a short tool run, in its own process group so a
    timeout stops whatever it started (a child holding the pipes would hang ``run``), with
    a temporary folder of its own (hipcc's probe leaves folders in it)."""
    with scratch.Folder(scratch.PROBE) as temp:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env={**env, "TMPDIR": temp},
                                cwd="/", start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return (proc.returncode, out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"))


def amdgpu_arches(clang: str, timeout: float = PROBE_TIMEOUT) -> list[str] | str:
    """The AMDGPU processors ``clang`` (or hipcc, which passes the flags on) can build
    for, or why it cannot say. ``-nogpulib``: the listing needs no device library."""
    argv = [clang, "--target=amdgcn-amd-amdhsa", "-nogpulib", "--print-supported-cpus"]
    try:
        rc, out, err = _run_tool(argv, tool_env(), timeout)
    except OSError as e:
        return f"cannot run '{clang}': {e.strerror or e}"
    except subprocess.TimeoutExpired:
        return f"'{clang}' did not finish within {timeout:g} s"
    arches = sorted({w for w in (out + "\n" + err).split()
                     if re.fullmatch(r"gfx[0-9a-f]+(-[0-9a-f]+)*(-generic)?", w)})
    if rc != 0 or not arches:
        first = next((ln.strip() for ln in (err or out).splitlines() if ln.strip()), "")
        return (f"'{clang} --target=amdgcn-amd-amdhsa --print-supported-cpus' listed no "
                f"AMDGPU processor (exit {rc}): {first}")
    return arches


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


def version_text(path: str, timeout: float = PROBE_TIMEOUT) -> str:
    """What ``<compiler> --version`` prints (stdout), stripped of blank lines."""
    try:
        rc, out, err = _run_tool([path, "--version"], tool_env(), timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UkdError(f"cannot run the compiler {path} --version: {e}") from None
    lines = [ln.rstrip() for ln in out.splitlines() if ln.strip()]
    if rc != 0 or not lines:
        raise UkdError(f"the compiler {path} --version failed (exit {rc}): "
                       f"{(err or out).strip()[:500]}")
    # "InstalledDir: ..." names a path, not a version: leave it out of the identity.
    return "\n".join(ln for ln in lines if not ln.startswith("InstalledDir:"))


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\r\n]+)"|<([^>\r\n]+)>)',
                      re.MULTILINE)
#: Headers read at most while following includes.
_MAX_HEADERS = 2000


@dataclass(frozen=True)
class SpecialInclude:
    """A quoted ``#include`` that reaches something a compiler would block on."""

    including: Path  # the file that holds the #include
    name: str  # as written
    found: Path  # what it resolved to
    kind: str  # "a FIFO", ...


def _include_dirs_of(source: Path, argv: Sequence[str]) -> list[Path]:
    """The ``-I`` folders of ``argv`` (``-Idir`` and ``-I dir``), relative to the
    source's folder, where compiles run."""
    dirs = [source.parent / a[2:] for a in argv if a.startswith("-I") and len(a) > 2]
    dirs += [source.parent / b for a, b in itertools.pairwise(argv) if a == "-I"]
    return dirs


def _includes(source: Path, text: bytes, argv: Sequence[str], angle: bool
              ) -> Iterator[tuple[Path, str, Path, int]]:
    """(including file, name as written, what it resolved to, its mode) of each
    ``#include`` of ``source`` (whose bytes are ``text``) and of the headers reached that
    way, looked up as the compiler does: a quoted name in the including file's folder,
    then the ``-I`` folders; an angle-bracket one (``angle``) in the ``-I`` folders. The
    first match counts; a name found nowhere (a system header) or a macro is not
    followed. A match that is no regular file is yielded, not read."""
    dirs = _include_dirs_of(source, argv)
    seen: set[str] = set()
    todo = [(source, text)]
    while todo and len(seen) < _MAX_HEADERS:
        including, body = todo.pop()
        for m in _INCLUDE.finditer(body):
            if m.group(2) is not None and not angle:
                continue
            name = os.fsdecode(m.group(1) or m.group(2))
            for base in ((including.parent, *dirs) if m.group(1) is not None else dirs):
                found = base / name
                try:
                    mode = os.stat(found).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode):
                    continue
                yield including, name, found, mode
                real = os.path.realpath(found)
                if stat.S_ISREG(mode) and real not in seen:
                    seen.add(real)
                    with contextlib.suppress(OSError):
                        todo.append((found, read_regular(found)))
                break


def special_include(source: Path, text: bytes, argv: Sequence[str]) -> SpecialInclude | None:
    """The first quoted ``#include`` of ``source`` (whose bytes are ``text``), or of the
    headers it reaches that way, that resolves to a FIFO, socket or device: a compiler
    opening one waits for a writer until --job-timeout, so the pack refuses it before
    compiling (``_includes`` tells how names are looked up; an angle-bracket include or a
    macro is not followed; --job-timeout still bounds those)."""
    for including, name, found, mode in _includes(source, text, argv, angle=False):
        if not stat.S_ISREG(mode):
            return SpecialInclude(including, name, found, kind_of(mode))
    return None


def include_closure(source: Path, text: bytes, argv: Sequence[str]) -> list[str]:
    """The files ``source`` includes, directly or through the headers it reaches (quoted
    and angle-bracket names found in its folder or the ``-I`` folders; ``_includes``), as
    absolute paths: a cheap stand-in for a preprocessor's dependency scan, a superset of
    what a compile reads from these folders (every branch of an ``#if`` is followed), that
    misses only a macro-named include."""
    return list(dict.fromkeys(os.path.abspath(found) for _, _, found, mode
                              in _includes(source, text, argv, True) if stat.S_ISREG(mode)))


def rerun_argv(compiler: Compiler, keyed: Sequence[str], source: Path, output: Path,
               depfile: Path, root: Path) -> list[str]:
    """The compile whose path-free part is ``keyed`` (what key_argv gave; the cache
    records it so ``ukdpack cache verify`` can run the compile again)."""
    return command_line.rerun_argv(compiler.path, compiler.kind, compiler.driver, keyed,
                                   str(source), str(output), str(depfile), str(root))


def scan_argv(compiler: Compiler, keyed: Sequence[str], source: Path, depfile: Path,
              root: Path) -> list[str]:
    """The local preprocessor's dependency scan of a hip compile (``-M`` into
    ``depfile``, no object): what remote execution puts into an action's input root."""
    argv = rerun_argv(compiler, keyed, source, depfile, depfile, root)[:-6]
    argv = [a for a in argv if a not in ("--genco", "-c")]
    return [*argv, "--cuda-device-only", "-M", "-MF", str(depfile), "-o", os.devnull,
            str(source)]


#: One prerequisite of a depfile: a run of characters that are not white space, where a
#: backslash before a space escapes it (the space is part of the name).
_DEP = re.compile(r"(?:\\ |\S)+")


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a Makefile-style depfile written by clang (-MD)."""
    body = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, _, deps = body.partition(": ")
    # One regex over the text, not a loop per character: a hip compile's depfile names a
    # few hundred headers (35,000 characters), read after the compile, before its shard.
    return [token.replace("\\ ", " ") for token in _DEP.findall(deps)]


@dataclass(frozen=True)
class CompileOutcome:
    ok: bool
    data: bytes
    deps: tuple[str, ...]  # absolute paths the compile read
    message: str  # the compiler's stderr (on failure, what to show)




def run_compile(argv: list[str], output: Path, depfile: Path, cwd: Path,
                timeout: float = DEFAULT_JOB_TIMEOUT) -> CompileOutcome:
    """Run one compile; never raises for a failing or hung compile. The compiler runs in
    its own process group so a timeout stops the driver and every process it started,
    with the folder of ``output`` (the compile's own) as its temporary folder."""
    try:
        proc = spawn(argv, str(cwd), tool_env(), str(output.parent))
    except OSError as e:
        return CompileOutcome(False, b"", (), f"cannot run {argv[0]}: {e.strerror}")
    return finish_compile(proc, argv[0], output, depfile, cwd, timeout)


def finish_compile(proc: subprocess.Popen[bytes], program: str, output: Path, depfile: Path,
                   cwd: Path, timeout: float = DEFAULT_JOB_TIMEOUT) -> CompileOutcome:
    """The outcome of the compile ``proc`` (started by ``early_compiles.spawn``), waited for at most
    ``timeout`` seconds. Its output is read as UTF-8 with replacement characters: a
    message in another encoding is still shown."""
    try:
        out_bytes, err_bytes = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return CompileOutcome(False, b"", (), f"{os.path.basename(program)} did not finish "
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
