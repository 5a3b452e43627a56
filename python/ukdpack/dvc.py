"""DVC outputs under a descriptor root (SPEC 12).

Prebuilt code objects live in folders tracked by ``.dvc`` sidecars (``outs``
with ``md5``, ``size``, ``nfiles``, ``path``; a folder's ``md5`` ends in ``.dir``).
The presence check reads the sidecars only (no network, no DVC import): an
output is missing when it is absent, empty, or a folder holding fewer files
than ``nfiles``. ``verify`` also compares content hashes as DVC computes them
(md5 of a file's bytes; for a folder, md5 of the JSON list of its files'
``{md5, relpath}`` sorted by path, plus ``.dir``). Pulling runs DVC itself,
grouped by effective remote.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ukdpack.errors import Problem

try:  # the C loader is much faster where libyaml is there
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how pyyaml was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

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


def read_sidecar(path: Path, root: Path) -> tuple[list[Output], list[Problem]]:
    """The outputs one sidecar declares, or the problems that stop reading it."""
    rel = _rel(path, root)
    try:
        doc = yaml.load(path.read_bytes(), Loader=_Loader)
    except (OSError, yaml.YAMLError) as e:
        return [], [Problem(rel, "", f"cannot read DVC sidecar: {e}")]
    outs = doc.get("outs") if isinstance(doc, dict) else None
    if not isinstance(outs, list) or not outs:
        return [], [Problem(rel, "$.outs", "expected a non-empty list of outputs")]
    outputs, problems = [], []
    for i, out in enumerate(outs):
        if not isinstance(out, dict) or not isinstance(out.get("path"), str):
            problems.append(Problem(rel, f"$.outs[{i}]", "expected an output with a path"))
            continue
        md5 = out.get("md5")
        outputs.append(Output(
            sidecar=path, path=(path.parent / out["path"]).resolve(),
            md5=md5 if isinstance(md5, str) else None, size=_int(out.get("size")),
            nfiles=_int(out.get("nfiles")),
            remote=out.get("remote") if isinstance(out.get("remote"), str) else None,
            hash_name=out.get("hash") if isinstance(out.get("hash"), str) else None))
    return outputs, problems


def _rel(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def _count_files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def file_md5(path: Path) -> str:
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
        found = dir_md5(p) if out.is_dir else file_md5(p)
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


def pull_command(remote: str | None, sidecars: list[str]) -> str:
    return " ".join(["dvc", "pull", *(["-r", remote] if remote else []), *sidecars])


def describe_missing(st: Status) -> list[str]:
    """One line per missing output, with the exact command that brings it."""
    base = st.repo or st.root
    lines = []
    for s in st.missing:
        rel = _rel(s.output.sidecar, base)
        cmd = pull_command(s.output.remote, [rel])
        what = {"missing": "missing", "empty": "empty", "incomplete": "incomplete",
                "modified": "modified"}[s.state]
        detail = f" ({s.detail})" if s.detail else ""
        lines.append(f"{_rel(s.output.path, st.root)}: {what}{detail}; run in {base}: {cmd}")
    return lines


def pull(root: Path, remote: str | None = None) -> tuple[int, list[str]]:
    """Pull every missing output under ``root`` with DVC; (exit status, commands run)."""
    st = status(root)
    if st.repo is None or not st.missing:
        return 0, []
    ran = []
    for rem, sidecars in sorted(pull_groups(st, remote).items(), key=lambda kv: kv[0] or ""):
        argv = [sys.executable, "-m", "dvc", "pull", *(["-r", rem] if rem else []), *sidecars]
        ran.append(pull_command(rem, sidecars))
        r = subprocess.run(argv, cwd=st.repo, check=False)
        if r.returncode != 0:
            return r.returncode, ran
    return 0, ran


def missing_hint(root: Path, path: Path, outputs: Iterable[Output] | None = None) -> str | None:
    """For a missing file that a DVC output under ``root`` holds: what to run to fetch it."""
    out = output_holding(tracked_outputs(root) if outputs is None else outputs, path)
    if out is None:
        return None
    repo = find_repo(out.sidecar.parent) or root
    sidecar = _rel(out.sidecar, repo)
    return (f"it is a DVC output of {_rel(out.sidecar, root)} that is not pulled; run in "
            f"{repo}: {pull_command(out.remote, [sidecar])} (or: ukdpack dvc-pull {root})")
