"""DVC outputs under a descriptor root.

Prebuilt code objects live in folders tracked by ``.dvc`` sidecars (``outs``
with ``md5``, ``size``, ``nfiles``, ``path``; a folder's ``md5`` ends in ``.dir``).
The presence check reads the sidecars only (no network, no DVC import): an
output is missing when it is absent, empty, or a folder holding fewer files
than ``nfiles``. ``verify`` also compares content hashes as DVC computes them
(md5 of a file's bytes; for a folder, md5 of the JSON list of its files'
``{md5, relpath}`` sorted by path, plus ``.dir``). Pulling runs DVC itself,
grouped by effective remote.

A sidecar is input like any other: an output path that is absolute or leaves the
repository (through ``..`` or a symbolic link) is refused with the sidecar named,
and nothing reads, hashes, lists or pulls it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import posixpath
import shlex
import signal
import stat
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import Any, Literal

from ukdpack.errors import Problem, UkdError

State = Literal["present", "missing", "empty", "incomplete", "modified", "unverified"]


@dataclass(frozen=True)
class Output:
    """One ``outs`` entry of one sidecar."""

    sidecar: Path  # absolute path of the .dvc file
    path: Path  # absolute path of the output
    md5: str | None
    size: int | None
    nfiles: int | None
    remote: str | None
    hash_name: str | None  # "md5" (DVC 3) or None (DVC 2's md5-dos2unix)

    @property
    def is_dir(self) -> bool:
        return bool(self.md5 and self.md5.endswith(".dir"))


@dataclass(frozen=True)
class OutputStatus:
    output: Output
    state: State
    detail: str = ""


@dataclass(frozen=True)
class Status:
    root: Path
    repo: Path | None  # the DVC repository holding the root (folder with .dvc/)
    outputs: tuple[OutputStatus, ...]
    problems: tuple[Problem, ...] = field(default=())

    @property
    def missing(self) -> list[OutputStatus]:
        return [s for s in self.outputs if s.state not in ("present", "unverified")]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.problems


def find_repo(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding a ``.dvc`` folder."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".dvc").is_dir():
            return folder
    return None


def find_sidecars(root: Path) -> list[Path]:
    """Every ``*.dvc`` file under ``root`` (dot-prefixed folders left out), sorted."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".dvc")
                  and not f.startswith(".")]
    return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Refused:
    """An ``outs`` entry that is not acted on: its path leaves the repository."""

    at: Path  # where the path points, ``..`` folded but links not followed
    problem: Problem


def _place(sidecar: Path, raw: str, repo: Path) -> tuple[Path, Path | str]:
    """Where the output ``raw`` of ``sidecar`` lies: ``..`` folded, links not followed, as
    the sidecar's own path is spelled; then either the same with every link followed, or
    why it is refused."""
    at = Path(os.path.normpath(os.path.join(os.path.abspath(sidecar.parent), raw)))
    if not raw or "\0" in raw:
        return at, f"expected a path relative to the sidecar's folder, found {raw!r}"
    example = posixpath.basename(raw.rstrip("/\\")) or "objects"
    if raw.startswith(("/", "\\")) or PureWindowsPath(raw).drive:
        return at, (f"'{raw}' is an absolute path; DVC names an output relative to its "
                    f"sidecar's folder, inside the repository: write e.g. '{example}'")
    try:
        # Compared where links are resolved (the repository is found that way), '..'
        # folded first as DVC does, then every link of the result followed.
        top, here = repo.resolve(), sidecar.parent.resolve()
        lexical = Path(os.path.normpath(os.path.join(here, raw)))
        if lexical != top and top not in lexical.parents:
            return at, (f"'{raw}' leaves the repository {top} through '..'; an output lies "
                        "inside the repository, named relative to its sidecar's folder: fix "
                        "or remove this sidecar")
        real = lexical.resolve()
    except (OSError, RuntimeError) as e:  # a symbolic link loop (RuntimeError before 3.13)
        return at, f"'{raw}' cannot be followed ({e}); fix the link or the sidecar"
    if real != top and top not in real.parents:
        return at, (f"'{raw}' leads out of the repository {top} through a symbolic link "
                    f"(to {real}); DVC would write there: make it a folder inside the "
                    "repository, or fix this sidecar")
    if real == here or real in here.parents:
        return at, (f"'{raw}' is a folder that holds this sidecar; DVC would replace the "
                    "sidecar with it: name the output file or folder beside its sidecar")
    return at, real


def _read_sidecar(path: Path, root: Path
                  ) -> tuple[list[Output], list[Refused], list[Problem]]:
    import yaml  # here: a pack that reads no sidecar does not pay for importing it

    rel = _rel(path, root)
    # The C loader is much faster where libyaml is there.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        # Not a FIFO or device: reading one could wait forever.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return [], [], [Problem(rel, "", "cannot read DVC sidecar: not a regular file")]
        doc = yaml.load(path.read_bytes(), Loader=loader)
    except (OSError, yaml.YAMLError) as e:
        return [], [], [Problem(rel, "", f"cannot read DVC sidecar: {e}")]
    outs = doc.get("outs") if isinstance(doc, dict) else None
    if not isinstance(outs, list) or not outs:
        return [], [], [Problem(rel, "$.outs", "expected a non-empty list of outputs")]
    outputs, refused, problems = [], [], []
    repo = find_repo(path.parent) or root
    for i, out in enumerate(outs):
        if not isinstance(out, dict) or not isinstance(out.get("path"), str):
            problems.append(Problem(rel, f"$.outs[{i}]", "expected an output with a path"))
            continue
        at, real = _place(path, out["path"], repo)
        if isinstance(real, str):
            problem = Problem(rel, f"$.outs[{i}].path", real)
            refused.append(Refused(at, problem))
            problems.append(problem)
            continue
        md5 = out.get("md5")
        outputs.append(Output(
            sidecar=path, path=real,
            md5=md5 if isinstance(md5, str) else None, size=_int(out.get("size")),
            nfiles=_int(out.get("nfiles")),
            remote=out.get("remote") if isinstance(out.get("remote"), str) else None,
            hash_name=out.get("hash") if isinstance(out.get("hash"), str) else None))
    return outputs, refused, problems


def read_sidecar(path: Path, root: Path) -> tuple[list[Output], list[Problem]]:
    """The outputs one sidecar declares, and the problems that stop reading it or refuse
    one of its outputs (a path that is absolute or leaves the repository)."""
    outputs, _, problems = _read_sidecar(path, root)
    return outputs, problems


def _rel(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def _count_files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


class _NotRegular(Exception):
    """A file of an output that is no regular file (a FIFO or a device, perhaps through a
    link): reading it could wait, or read, forever, so it is not hashed."""


def file_md5(path: Path) -> str:
    """DVC's hash of a regular file: md5 of its bytes."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise _NotRegular(str(path))
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def dir_md5(folder: Path) -> str:
    """DVC's hash of a folder: md5 of its sorted ``[{md5, relpath}]`` JSON, plus ``.dir``."""
    entries = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            p = Path(dirpath) / name
            entries.append({"md5": file_md5(p), "relpath": p.relative_to(folder).as_posix()})
    entries.sort(key=lambda e: e["relpath"])
    text = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.md5(text).hexdigest() + ".dir"


def _state(out: Output, verify: bool) -> OutputStatus:
    p = out.path
    if not p.exists():
        return OutputStatus(out, "missing")
    if out.is_dir:
        if not p.is_dir():
            return OutputStatus(out, "missing", "expected a folder, found a file")
        n = _count_files(p)
        if n == 0:
            return OutputStatus(out, "empty")
        if out.nfiles is not None and n < out.nfiles:
            return OutputStatus(out, "incomplete", f"holds {n} of {out.nfiles} files")
    elif not p.is_file() or p.stat().st_size == 0:
        return OutputStatus(out, "empty")
    if verify and out.md5:
        if out.hash_name != "md5":
            return OutputStatus(out, "unverified", "a DVC 2 (md5-dos2unix) hash; not compared")
        try:
            found = dir_md5(p) if out.is_dir else file_md5(p)
        except _NotRegular as e:
            inner = os.path.relpath(str(e), p if out.is_dir else p.parent)
            return OutputStatus(out, "modified", f"{inner} is not a regular file; it is not "
                                                 "hashed")
        except OSError as e:
            return OutputStatus(out, "modified", f"cannot be read: {e.strerror}")
        if found != out.md5:
            return OutputStatus(out, "modified", f"its hash is {found}, the sidecar records "
                                                 f"{out.md5}")
    return OutputStatus(out, "present")


def status(root: Path, verify: bool = False) -> Status:
    """The presence (and, with ``verify``, content) of every DVC output under ``root``."""
    sidecars = find_sidecars(root)
    outputs: list[OutputStatus] = []
    problems: list[Problem] = []
    for sc in sidecars:
        outs, found = read_sidecar(sc, root)
        problems += found
        outputs += [_state(o, verify) for o in outs]
    return Status(root, find_repo(root) if sidecars else None, tuple(outputs), tuple(problems))


def tracked_outputs(root: Path) -> list[Output]:
    """Every output the sidecars under ``root`` declare (for telling a missing prebuilt
    object that DVC should bring from one nobody tracks)."""
    out: list[Output] = []
    for sc in find_sidecars(root):
        out += read_sidecar(sc, root)[0]
    return out


def output_holding(outputs: Iterable[Output], path: Path) -> Output | None:
    """The output that is ``path`` or holds it, if any."""
    p = path.resolve() if path.exists() else Path(os.path.abspath(path))
    for out in outputs:
        if p == out.path or out.path in p.parents:
            return out
    return None


def pull_groups(st: Status, remote: str | None = None) -> dict[str | None, list[str]]:
    """Sidecars (relative to the DVC repository) to pull, by effective remote."""
    groups: dict[str | None, list[str]] = defaultdict(list)
    base = st.repo or st.root
    for s in st.missing:
        rel = _rel(s.output.sidecar, base)
        key = s.output.remote or remote
        if rel not in groups[key]:
            groups[key].append(rel)
    return dict(groups)


def pull_command(remote: str | None, sidecars: list[str], force: bool = False) -> str:
    """The ``dvc pull`` command line for ``sidecars``, quoted for a POSIX shell."""
    return shlex.join(["dvc", "pull", *(["--force"] if force else []),
                       *(["-r", remote] if remote else []), *sidecars])


def needs_force(s: OutputStatus) -> bool:
    """Whether only ``dvc pull --force`` repairs the output: something is there that is
    not what the sidecar records (a modified file, an empty file, a file for a folder),
    and a plain pull stops rather than discard it."""
    if s.state == "modified":
        return True
    p = s.output.path
    return s.state in ("missing", "empty") and os.path.lexists(p) and not (
        s.output.is_dir and p.is_dir())


def fix_command(st: Status, s: OutputStatus) -> str:
    """The command that brings back what the sidecar of ``s`` records, run in the DVC
    repository (``st.repo``)."""
    return pull_command(s.output.remote, [_rel(s.output.sidecar, st.repo or st.root)],
                        needs_force(s))


def describe_missing(st: Status) -> list[str]:
    """One line per missing or damaged output, with the exact command that repairs it."""
    base = st.repo or st.root
    lines = []
    for s in st.missing:
        detail = f" ({s.detail})" if s.detail else ""
        how = ("to restore what the sidecar records, discarding what is there now, run"
               if needs_force(s) else "run")
        lines.append(f"{_rel(s.output.path, st.root)}: {s.state}{detail}; {how} in {base}: "
                     f"{fix_command(st, s)}")
    return lines


def available() -> bool:
    """Whether this Python can import DVC (``dvc-pull`` runs ``python -m dvc``)."""
    try:
        return importlib.util.find_spec("dvc") is not None
    except (ImportError, ValueError):  # an import hook that refuses it, a broken module
        return False


#: Seconds one ``dvc pull`` may take (``dvc-pull --timeout``, $UKDPACK_DVC_PULL_TIMEOUT).
DEFAULT_PULL_TIMEOUT = 3600.0


def pull(root: Path, remote: str | None = None, timeout: float = DEFAULT_PULL_TIMEOUT
         ) -> tuple[int, list[str]]:
    """Pull every missing output under ``root`` with DVC; (exit status, commands run).
    UkdError, before anything runs, when DVC is not installed, and when a ``dvc pull``
    still runs after ``timeout`` seconds (a remote that stops answering): it is stopped
    with every process it started."""
    st = status(root)
    if st.repo is None or not st.missing:
        return 0, []
    if not available():
        raise UkdError(Problem(str(root), "", f"pulling DVC outputs needs DVC, which this "
                               f"Python ({sys.executable}) cannot import; install it: pip "
                               "install 'ukdpack[dvc]'"))
    ran = []
    for rem, sidecars in sorted(pull_groups(st, remote).items(), key=lambda kv: kv[0] or ""):
        argv = [sys.executable, "-m", "dvc", "pull", *(["-r", rem] if rem else []), *sidecars]
        ran.append(pull_command(rem, sidecars))
        rc = _run_stoppable(argv, st.repo, timeout)
        if rc is None:
            raise UkdError(Problem(str(root), "", f"{ran[-1]} did not finish within "
                                   f"{timeout:g} s and was stopped (its remote does not "
                                   "answer?); raise --timeout if a pull legitimately takes "
                                   "longer"))
        if rc != 0:
            return rc, ran
    return 0, ran


def _run_stoppable(argv: list[str], cwd: Path, timeout: float) -> int | None:
    """The exit status of ``argv``, or None when it ran past ``timeout``. It runs in a
    session of its own, killed whole on a timeout or an interrupt (DVC starts helpers)."""
    proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _refused_holding(root: Path, path: Path) -> Refused | None:
    """A refused output of a sidecar under ``root`` that is ``path`` or holds it (compared
    as spelled and with links resolved)."""
    spelled = {Path(os.path.abspath(path)), Path(os.path.realpath(path))}
    for sc in find_sidecars(root):
        for r in _read_sidecar(sc, root)[1]:
            for at in (r.at, Path(os.path.realpath(r.at))):
                if any(p == at or at in p.parents for p in spelled):
                    return r
    return None


def missing_hint(root: Path, path: Path, outputs: Iterable[Output] | None = None) -> str | None:
    """For a missing file that a DVC output under ``root`` holds: what to run to fetch it,
    or, when the sidecar naming it is refused, which sidecar and why."""
    out = output_holding(tracked_outputs(root) if outputs is None else outputs, path)
    if out is None:
        refused = _refused_holding(root, path)
        if refused is None:
            return None
        p = refused.problem
        return (f"the DVC sidecar {p.file} that names it is refused, so DVC cannot bring "
                f"it: {p.path}: {p.message}")
    repo = find_repo(out.sidecar.parent) or root
    sidecar = _rel(out.sidecar, repo)
    return (f"it is a DVC output of {_rel(out.sidecar, root)} that is not pulled; run in "
            f"{repo}: {pull_command(out.remote, [sidecar])} (or: ukdpack dvc-pull {root})")
