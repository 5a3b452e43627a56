"""Helpers shared by the reliability tests (kill, concurrency, escapes, cache damage)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pack_support import BUILDERS, read_json, write_json

from ukdpack import _runtime

ARCH = "gfx90a"
HERE = Path(__file__).resolve().parent


def pack_argv(src: Path, out: Path, cache: Path, *extra: str, runner: bool = False
              ) -> list[str]:
    """The command line of one plain, single-job pack (``runner``: through kill_runner)."""
    head = [sys.executable, str(HERE / "kill_runner.py")] if runner else \
        [sys.executable, "-m", "ukdpack"]
    return [*head, "pack", "--source-root", str(src), "--out-root", str(out), "--arch", ARCH,
            "--cache-dir", str(cache), "--jobs", "1", "--plain", *extra]


def pack_env(**extra: str) -> dict[str, str]:
    """The environment run_pack gives a pack, so subprocesses see this checkout."""
    env = dict(os.environ, HIP_PLATFORM="amd")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(BUILDERS), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def assert_loads(shard: Path, arch: str = ARCH) -> int:
    """The shard loads clean and the state manager keeps every kernel; how many."""
    dset = _runtime.load_shard(str(shard))
    assert dset.ok, dset.diagnostics
    assert [d for d in dset.diagnostics if d.get("severity") == "error"] == []
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=arch)
    assert sm.dropped() == [], sm.log()
    assert sm.kept(), "a shard with nothing kept"
    return len(sm.kept())


def residue(out_root: Path) -> list[str]:
    """What the out root holds besides shards and the documented lock files."""
    return sorted(p.name for p in out_root.iterdir()
                  if not (p.name.startswith(".") and p.name.endswith(".lock"))
                  and not p.name.startswith("gfx"))


def set_define(tree: Path, name: str, value: int) -> None:
    """Give the second scale kernel one more define: a new object, one compile."""
    kdp = tree / "attention" / "scale.kdp.json"
    doc = read_json(kdp)
    doc["kernelDescriptors"][1]["kernel_source"]["build"]["defines"][name] = value
    write_json(kdp, doc)
