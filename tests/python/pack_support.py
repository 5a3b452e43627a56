"""Helpers shared by the packer tests: building trees and running packs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ukdpack import _runtime

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "descriptors"
OBJECTS = REPO / "tests" / "data" / "objects"
BUILDERS = Path(__file__).resolve().parent / "builders"


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def write_engine(root: Path) -> None:
    """The smallest engine a test tree needs: a KMD with one int field ``v``, a UED
    ``ued`` and a UDD ``udd`` with dispatch symbol ``sym``."""
    write_json(root / "e.kmd.json", {"id": "kmd", "version": "1.0", "name": "md",
                                     "fields": [{"name": "v", "type": "int"}]})
    write_json(root / "e.ued.json", {"id": "ued", "version": "1.0", "name": "t:e",
                                     "metadata": "kmd"})
    write_json(root / "d.udd.json", {"id": "udd", "version": "1.0", "name": "d",
                                     "dispatch_symbol": "sym"})


def read_json(path: Path) -> Any:
    """A descriptor as written, key order kept (tests look at the order the packer
    writes); one with comments is read by the runtime's reader."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        doc, where, why = _runtime.read_json_file(str(path))
        assert why is None, f"{path}: {where}: {why}"
        return doc


# The example's slotted engine, added with kernel slots: tests that count the example's
# compiles or cache entries leave it out (copy_example(..., leave_out=SLOTTED)).
SLOTTED = ("attention_bwd",)


def copy_example(dst: Path, leave_out: Sequence[str] = ()) -> Path:
    """The example tree copied to ``dst``, without the top-level folders ``leave_out``."""
    shutil.copytree(EXAMPLE, dst, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if Path(folder) == EXAMPLE
                                                  and n in leave_out])
    return dst


def run_pack(src: Path, out: Path, arches: Sequence[str], *extra: str,
             cache: Path | None = None, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """``python -m ukdpack pack`` as a build would run it."""
    args = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(src),
            "--out-root", str(out), "--plain", "--jobs", "2"]
    for a in arches:
        args += ["--arch", a]
    if cache is not None:
        args += ["--cache-dir", str(cache)]
    full_env = dict(os.environ, HIP_PLATFORM="amd")
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(BUILDERS), *filter(None, [os.environ.get("PYTHONPATH")])])
    full_env.update(env or {})
    return subprocess.run([*args, *extra], capture_output=True, text=True, env=full_env,
                          check=False)


def _hipcc_wrapper(folder: Path, on_compile: str) -> Path:
    """A hipcc wrapper running the shell command ``on_compile`` before each compile (not
    --version), then hipcc."""
    real = shutil.which("hipcc")
    assert real, "hipcc is installed by scripts/setup.sh"
    wrapper = folder / "hipcc"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" --genco "*) {on_compile};; esac\n'
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def counting_compiler(folder: Path) -> tuple[Path, Path]:
    """A hipcc wrapper that logs each compile (not --version) to a file."""
    log = folder / "compiles.log"
    return _hipcc_wrapper(folder, f'echo "$*" >> "{log}"'), log


def slow_compiler(folder: Path, seconds: float) -> Path:
    """A hipcc wrapper that waits ``seconds`` before each compile."""
    return _hipcc_wrapper(folder, f"sleep {seconds:g}")


def compiles(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def shard_files(shard: Path) -> dict[str, bytes]:
    """Every file of a shard by relative path (lock files and the like excluded)."""
    return {str(p.relative_to(shard)): p.read_bytes()
            for p in sorted(shard.rglob("*")) if p.is_file()}


def dvc_workspace(tmp_path: Path) -> Path:
    """The example as a fresh clone has it: sidecars and remote, no objects."""
    from ukdpack.authored import dvc

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws / "descriptors")
    shutil.copytree(REPO / ".dvc", ws / ".dvc",
                    ignore=shutil.ignore_patterns("tmp", "cache", "config.local"))
    shutil.copytree(REPO / "dvc-remote", ws / "dvc-remote")
    for out in dvc.tracked_outputs(ws / "descriptors"):
        shutil.rmtree(out.path, ignore_errors=True)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws
