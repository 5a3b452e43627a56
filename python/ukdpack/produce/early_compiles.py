"""Early compiles: an edit's compiles, started before the packer is loaded.

An edit's repack used to spend over a tenth of a second (the interpreter, the packer's
imports, the tree, the rules and the plans) before its first compile started. Each pack
started as a command (``python -m ukdpack pack``, the ``ukdpack`` script) therefore
records in its compile cache, under ``v1/early/``, one file per command line and working
folder: how it runs each compile (command line, folder, compiler identity), what each
source was (its stat and sha256), and where each descriptor names it (file, stat, JSON
path). The next pack with the same command line in the same folder reads that record
before anything else is imported and starts, at most ``--jobs`` of them:

* the compile of each source that changed since, with the command line it had;
* the compile a changed descriptor now asks for: where the object at a recorded JSON
  path still names the same kind and file but its ``build`` now makes another command
  line (``command_line.key_argv``), one that the last pack did not run.

The producer takes such a compile only where it would run that very compile now: the
same command line, folder, environment and compiler identity, and the source's bytes as
its cache key read them. Any other is stopped, and its folder removed, once the pack's
compiles are done (``discard``). A record is read only when it and its folder are the
user's own and writable by nobody else: it names programs to run.

This runs first, so it imports only built-in modules until it has a compile to start
(the others cost milliseconds each before that compile could start).
"""

from __future__ import annotations

import _thread
import marshal
import os
import stat
import time

from ukdpack import scratch

try:  # built in: hashlib's start (OpenSSL) costs 2 ms more; 3.12 renamed it
    from _sha256 import sha256 as _sha256_of  # type: ignore[import-not-found]
except ImportError:
    from hashlib import sha256 as _sha256_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from typing import Any

#: The compile cache's layout folder (``CompileCache.folder`` is the cache root's ``v1``).
CACHE_LAYOUT = "v1"
#: The records' folder in it, and their format.
RECORD_FOLDER = "early"
RECORD_FORMAT = "ukdpack-early-compiles-1"
#: ``UKDPACK_EARLY_COMPILES=0`` starts none.
SWITCH = "UKDPACK_EARLY_COMPILES"
#: The output and depfile paths in a recorded command line (a compile's own folder's).
OUTPUT, DEPFILE = "\0output", "\0depfile"
#: How a compile's own folder (its output, depfile and TMPDIR) is named.
FOLDER_PREFIX = scratch.COMPILE
#: The largest record read (one compile unit is about 500 bytes).
MAX_RECORD_BYTES = 64 << 20


def tool_env() -> dict[str, str]:
    """The environment compilers run with (hipcc on a machine with CUDA too picks nvcc
    unless told the platform)."""
    env = dict(os.environ)
    env.setdefault("HIP_PLATFORM", "amd")
    return env


def default_cache_root() -> str:
    """``$UKDPACK_CACHE_DIR``, else ``$XDG_CACHE_HOME/ukdpack``, else ``~/.cache/ukdpack``."""
    if os.environ.get("UKDPACK_CACHE_DIR"):
        return os.environ["UKDPACK_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ukdpack")


def spawn(argv: Sequence[str], cwd: str, env: Mapping[str, str], folder: str
          ) -> subprocess.Popen[bytes]:
    """Start one compile: in a session of its own (a timeout or a stop kills the driver and
    all it started), its output piped, ``TMPDIR`` its own ``folder`` (removed after it:
    hipcc leaves two empty folders in the temporary folder on every compile); raises
    OSError when it cannot start."""
    import subprocess

    return subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=cwd, env={**env, "TMPDIR": folder},
                            start_new_session=True)


def fill(template: Sequence[str], folder: str) -> tuple[list[str], str, str]:
    """A recorded command line with the output and depfile put in ``folder``: (argv,
    output, depfile)."""
    output, depfile = os.path.join(folder, "out.o"), os.path.join(folder, "out.d")
    argv = [output if a == OUTPUT else depfile if a == DEPFILE else a for a in template]
    return argv, output, depfile


def new_folder() -> str:
    """A compile's own folder (mode 700, held: ``scratch``) for its output, depfile and
    ``TMPDIR``, in the temporary folder ``tempfile`` would pick first."""
    return scratch.make(FOLDER_PREFIX)


class Started:
    """One early compile: the recorded unit, the source digest it was started for, its
    environment, process and folder."""

    __slots__ = ("depfile", "env", "folder", "output", "proc", "sha256", "started", "unit")

    def __init__(self, unit: Mapping[str, Any], sha256: str, env: Mapping[str, str],
                 proc: subprocess.Popen[bytes], folder: str, output: str, depfile: str) -> None:
        self.unit, self.sha256, self.env, self.proc = unit, sha256, env, proc
        self.folder, self.output, self.depfile = folder, output, depfile
        self.started = time.monotonic()

    def stop(self) -> None:
        """Kill the compile and all it started, and remove its folder."""
        import contextlib
        import signal
        import subprocess

        with contextlib.suppress(OSError):  # it ended meanwhile
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self.proc.communicate()
        self.remove()

    def remove(self) -> None:
        """Remove the compile's folder (its output has been read, or is not wanted)."""
        self.remove_folder(self.folder)

    @staticmethod
    def remove_folder(folder: str) -> None:
        scratch.remove(folder)


_lock = _thread.allocate_lock()
_started: list[Started] = []
#: The command line and folder ``start`` was given: the name of the record ``remember``
#: writes (None: not started as a command, so no record is written).
_command: tuple[list[str], str] | None = None


def _option(argv: Sequence[str], name: str) -> str | None:
    """The last value of option ``name`` in ``argv`` (``name V`` or ``name=V``), as
    argparse takes it; a spelling it does not read here only costs the early start."""
    found = None
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == name and i + 1 < len(argv):
            found = argv[i + 1]
        elif a.startswith(name + "="):
            found = a[len(name) + 1:]
    return found


def _jobs(argv: Sequence[str]) -> int:
    try:
        given = int(_option(argv, "--jobs") or 0)
    except ValueError:
        given = 0
    if given > 0:
        return given
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def record_path(cache_root: str, argv: Sequence[str], cwd: str) -> str:
    """Where the record of the pack run as ``argv`` in ``cwd`` is kept."""
    # NUL-separated: no argument or path holds one (marshal's bytes depend on how the
    # strings are shared, not only on what they say).
    text = "\0".join([cwd, *argv]).encode("utf-8", "surrogateescape")
    name = _sha256_of(text).hexdigest()[:40]
    return os.path.join(cache_root, CACHE_LAYOUT, RECORD_FOLDER, name + ".marshal")


def _own(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The record's units and descriptors; none when it is missing, not the user's own,
    or not one."""
    try:
        if not _own(os.stat(os.path.dirname(path))):
            return [], {}
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or not _own(st) or st.st_size > MAX_RECORD_BYTES:
                return [], {}
            doc = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return [], {}
    if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
        return [], {}
    units, descriptors = doc.get("units"), doc.get("descriptors")
    if not isinstance(units, list) or not all(_is_unit(u) for u in units) \
            or not isinstance(descriptors, dict):
        return [], {}
    return units, descriptors


def _is_unit(u: Any) -> bool:
    return (isinstance(u, dict) and all(isinstance(u.get(k), str) for k in _UNIT_TEXT)
            and isinstance(u.get("argv"), list) and bool(u["argv"])
            and all(isinstance(a, str) for a in u["argv"])
            and os.path.isabs(u["argv"][0]) and isinstance(u.get("stat"), list))


#: A unit's text fields (besides its command line, a list, and its source's stat).
#: ``kind`` is the compiler's (hip, cuda), ``source_kind`` the descriptor's.
_UNIT_TEXT = ("source", "cwd", "identity", "sha256", "kind", "source_kind", "driver", "target",
              "root")


def source_stat(st: os.stat_result) -> list[int]:
    """What tells a source unchanged since a record: size, mtime, inode, device."""
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]


#: The largest source or descriptor read here (the runtime's limit on a descriptor).
MAX_FILE_BYTES = 256 << 20


def _read_regular(path: str) -> bytes | None:
    """A regular file's bytes; None for anything else (a FIFO is not waited on), for a
    file over MAX_FILE_BYTES, or when it cannot be read: the packer tells why."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return None
            return f.read()
    except OSError:
        return None


def _digest(path: str) -> str | None:
    """The sha256 of a regular file's bytes; None when it is no such file."""
    data = _read_regular(path)
    return None if data is None else str(_sha256_of(data).hexdigest())


def _changed(unit: Mapping[str, Any]) -> str | None:
    """The sha256 of the unit's source when it differs from the record's; else None."""
    try:
        if source_stat(os.stat(unit["source"])) == unit["stat"]:
            return None
    except OSError:
        return None
    digest = _digest(unit["source"])
    return None if digest == unit["sha256"] else digest


def _at(doc: Any, path: str) -> Any:
    """The value at a JSON path of the runtime's form (``$.a.b[2].c``); None where the
    path does not lead (or is not of that form)."""
    if not path.startswith("$"):
        return None
    at, i = doc, 1
    while i < len(path):
        if path[i] == ".":
            j = i + 1
            while j < len(path) and path[j] not in ".[":
                j += 1
            if not isinstance(at, dict):
                return None
            at, i = at.get(path[i + 1:j]), j
        elif path[i] == "[":
            j = path.find("]", i)
            if j < 0 or not path[i + 1:j].isdigit() or not isinstance(at, list):
                return None
            n = int(path[i + 1:j])
            at, i = (at[n] if n < len(at) else None), j + 1
        else:
            return None
    return at


def _edited(units: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]
            ) -> list[tuple[dict[str, Any], str]]:
    """The compiles the changed descriptors now ask for that the last pack did not run:
    each as a unit (its command line anew) and its source's sha256."""
    from ukdpack.produce.command_line import key_argv, rerun_argv

    ran = {tuple(u["argv"]) for u in units}
    out: list[tuple[dict[str, Any], str]] = []
    for path, entry in descriptors.items():
        try:
            if not isinstance(entry, dict) or source_stat(os.stat(path)) == entry.get("stat"):
                continue
            text = _read_regular(path)
            if text is None:
                continue
            import json

            doc = json.loads(text)
        except (OSError, ValueError, RecursionError):
            continue  # gone, or JSON the plain reader does not take
        for use in entry.get("uses") or ():
            try:
                json_path, index, field, value = use
                unit = units[index]
                obj = _at(doc, json_path)
                if not isinstance(obj, dict) or obj.get("kind") != unit["source_kind"] \
                        or obj.get(field) != value:
                    continue
                build = obj.get("build") or {}
                keyed = key_argv(unit["kind"], build, unit["target"], unit["driver"])
                argv = rerun_argv(unit["argv"][0], unit["kind"], unit["driver"], keyed,
                                  unit["source"], OUTPUT, DEPFILE, unit["root"])
            except (TypeError, ValueError, AttributeError, IndexError, KeyError):
                continue  # a record or a build of another shape: the plan tells
            if tuple(argv) in ran:
                continue
            digest = _digest(unit["source"])
            if digest is not None:
                ran.add(tuple(argv))
                out.append(({**unit, "argv": argv}, digest))
    return out


def start(argv: Sequence[str]) -> None:
    """Start the compiles of the sources changed since the last pack run as ``argv`` in
    this folder (``ukdpack.__main__``, before the packer is imported); never raises for
    a record that is missing or unusable."""
    global _command
    try:
        cwd = os.getcwd()
    except OSError:
        return
    _command = (list(argv), cwd)
    if os.environ.get(SWITCH) == "0":
        return
    cache_root = _option(argv, "--cache-dir") or default_cache_root()
    units, descriptors = _read(record_path(os.path.abspath(cache_root), argv, cwd))
    limit, env = _jobs(argv), tool_env()
    changed = [(u, d) for u in units if (d := _changed(u)) is not None]
    if len(changed) < limit and descriptors:
        changed += _edited(units, descriptors)
    if not changed:
        return
    import signal

    global _spawning
    # Until the command line installs its own handlers, a stop kills these first: each
    # runs in a session of its own, out of reach of a terminal's Ctrl-C. Taken before
    # the first starts; one that comes while a compile is being started waits for it.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(s, _stopped)
    _spawning = True
    try:
        for unit, digest in changed[:limit]:
            folder = new_folder()
            command, output, depfile = fill(unit["argv"], folder)
            try:
                proc = spawn(command, unit["cwd"], env, folder)
            except (OSError, ValueError):
                Started.remove_folder(folder)
                continue
            _started.append(Started(unit, digest, env, proc, folder, output, depfile))
    finally:
        _spawning = False
    if _stop_asked:
        _stopped(_stop_asked, None)


#: A compile is being started (``_stopped`` then only notes the signal), and the signal
#: that came meanwhile.
_spawning = False
_stop_asked = 0


def _stopped(signum: int, _frame: object) -> None:
    """A stop before the command line took the signals: the compiles first, then the
    signal's own ending."""
    import signal

    global _stop_asked
    if _spawning:
        _stop_asked = signum
        return
    discard()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def take(template: Sequence[str], cwd: str, identity: str, sha256: str) -> Started | None:
    """The early compile that is this compile (the same command line, folder,
    environment and compiler identity, started for these source bytes), now the
    caller's; None when there is none."""
    env = tool_env()
    with _lock:
        for s in _started:
            u = s.unit
            if (u["argv"] == list(template) and u["cwd"] == cwd and u["identity"] == identity
                    and s.sha256 == sha256 and s.env == env):
                _started.remove(s)
                return s
    return None


def started() -> int:
    """The early compiles not taken yet."""
    with _lock:
        return len(_started)


def discard() -> None:
    """Stop every early compile not taken, and remove its folder."""
    with _lock:
        doomed = list(_started)
        _started.clear()
    for s in doomed:
        s.stop()


class Unit:
    """One compile as a record keeps it (``fields``), and where descriptors name it:
    (descriptor file, JSON path of the source object, the field naming the file, its
    value)."""

    __slots__ = ("fields", "uses")

    def __init__(self, fields: dict[str, Any], uses: list[tuple[str, str, str, Any]]) -> None:
        self.fields, self.uses = fields, uses


def unit(compile: Mapping[str, str], template: Sequence[str], sha256: str,
         st: os.stat_result, uses: list[tuple[str, str, str, Any]]) -> Unit:
    """One compile as a record keeps it: ``compile`` holds its text fields (_UNIT_TEXT
    less ``sha256``), ``template`` its command line (``OUTPUT``, ``DEPFILE`` open),
    ``sha256`` and ``st`` what its source was."""
    return Unit({**compile, "argv": list(template), "sha256": sha256,
                 "stat": source_stat(st)}, uses)


def _record(units: Sequence[Unit]) -> dict[str, Any]:
    """The record of ``units``: each once (by command line and folder), and each
    descriptor naming them with its stat now (a later edit is one the next start sees;
    one made during this pack is only a start missed)."""
    kept: dict[tuple[tuple[str, ...], str], int] = {}
    fields: list[dict[str, Any]] = []
    descriptors: dict[str, dict[str, Any]] = {}
    for u in units:
        at = kept.setdefault((tuple(u.fields["argv"]), u.fields["cwd"]), len(fields))
        if at == len(fields):
            fields.append(u.fields)
        for path, json_path, field, value in u.uses:
            entry = descriptors.get(path)
            if entry is None:
                try:
                    entry = descriptors[path] = {"stat": source_stat(os.stat(path)), "uses": []}
                except OSError:
                    continue
            entry["uses"].append((json_path, at, field, value))
    return {"format": RECORD_FORMAT, "units": fields, "descriptors": descriptors}


def remember(cache_root: str, units: Sequence[Unit]) -> None:
    """Write the record of this pack's compiles for the next pack run as this one was
    (``start``); nothing when the pack was not started as a command. Best effort: the
    record only saves time."""
    if _command is None:
        return
    path = record_path(os.path.abspath(cache_root), *_command)
    try:
        data = marshal.dumps(_record(units))
    except ValueError:  # a value marshal does not write (a field of another type)
        return
    import contextlib
    from pathlib import Path

    from ukdpack.files import write_atomic

    with contextlib.suppress(OSError):  # the folder the user's own alone: start reads no other
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        write_atomic(Path(path), data, mode=0o600)
