"""Early compiles (docs/packing.md, "Early compiles"): a pack started as a command
starts the compiles of the sources and descriptors edited since the last run of the same
command before the packer is loaded, and takes each only where it is the compile the plan
runs. What is published is byte for byte a pack from scratch; a compile not taken is
stopped and its folder removed, however the pack ends."""

from __future__ import annotations

import json
import marshal
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pack_support import shard_files, write_engine, write_json

from ukdpack.produce import early_compiles

ARCH = "gfx90a"
SOURCE = ('#include <hip/hip_runtime.h>\n#ifndef SCALE\n#define SCALE 1\n#endif\n'
          'extern "C" __global__ void k(float* o) {{ o[0] = {value} * SCALE; }}\n')


class Setup:
    """A two-kernel tree, its out root and cache, and the folder the packs run in."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tree, self.out, self.cache = tmp / "tree", tmp / "out", tmp / "cache"
        self.temp = tmp / "temp"  # the packs' TMPDIR: what they leave there is seen
        self.temp.mkdir()
        write_engine(self.tree)
        (self.tree / "src").mkdir()
        for i in range(2):
            (self.tree / "src" / f"k{i}.hip").write_text(SOURCE.format(value=i))
            write_json(self.kdp(i), {
                "id": f"kdp{i}", "version": "1.0", "name": f"p{i}", "arch": [ARCH],
                "matchers": [], "engine": "ued", "dispatch": "udd",
                "kernelDescriptors": [{
                    "id": f"k{i}", "version": "1.0", "name": f"k{i}", "priority": 0,
                    "metadata": {"v": i}, "arch": [ARCH],
                    "kernel_source": {"kind": "hip", "source": f"../src/k{i}.hip",
                                      "entry": "k", "build": {}}}]})

    def kdp(self, i: int) -> Path:
        return self.tree / f"p{i}" / "p.kdp.json"

    def argv(self, out: Path | None = None, cache: Path | None = None) -> list[str]:
        return ["pack", "--source-root", str(self.tree), "--out-root", str(out or self.out),
                "--cache-dir", str(cache or self.cache), "--arch", ARCH, "--plain",
                "--jobs", "2", "--json"]

    def start(self, argv: list[str], env: dict[str, str] | None = None
              ) -> subprocess.Popen[str]:
        full = dict(os.environ, HIP_PLATFORM="amd", TMPDIR=str(self.temp), **(env or {}))
        return subprocess.Popen([sys.executable, "-m", "ukdpack", *argv], cwd=self.tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=full)

    def pack(self, env: dict[str, str] | None = None, expect: int = 0,
             **where: Path) -> dict[str, Any]:
        proc = self.start(self.argv(**where), env)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == expect, err
        doc: dict[str, Any] = json.loads(out)
        return doc

    def record(self) -> Path:
        return Path(early_compiles.record_path(str(self.cache), self.argv(), str(self.tmp)))

    def left_in_temp(self) -> list[str]:
        """What the packs left in their TMPDIR: the compiles' folders, and what hipcc
        leaves in its temporary folder, which is the compile's own."""
        return sorted(p.name for p in self.temp.iterdir())

    def set_build(self, i: int, build: dict[str, Any]) -> None:
        doc = json.loads(self.kdp(i).read_text())
        doc["kernelDescriptors"][0]["kernel_source"]["build"] = build
        write_json(self.kdp(i), doc)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def _cold(setup: Setup) -> dict[str, bytes]:
    """The shard a pack from scratch makes of the tree as it is now."""
    out, cache = setup.tmp / "cold-out", setup.tmp / "cold-cache"
    doc = setup.pack(out=out, cache=cache)
    assert doc["compiled"] == 2
    return shard_files(out / ARCH)


def test_a_source_edit_is_compiled_from_the_start_of_the_pack(setup: Setup) -> None:
    first = setup.pack()
    assert (first["compiled"], first["compiled_early"]) == (2, 0)
    record = setup.record()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    # A pack with nothing edited starts nothing.
    again = setup.pack()
    assert (again["compiled"], again["compiled_early"]) == (0, 0)

    (setup.tree / "src" / "k1.hip").write_text(SOURCE.format(value=7))
    edit = setup.pack()
    assert (edit["compiled"], edit["compiled_early"]) == (1, 1)
    assert shard_files(setup.out / ARCH) == _cold(setup)
    assert setup.left_in_temp() == []


def test_a_descriptor_edit_starts_the_compile_it_asks_for(setup: Setup) -> None:
    setup.pack()
    setup.set_build(0, {"defines": {"SCALE": 3}})
    edit = setup.pack()
    assert (edit["compiled"], edit["compiled_early"]) == (1, 1)
    assert shard_files(setup.out / ARCH) == _cold(setup)
    # Back to a build the last pack ran: the cache has it, nothing starts early.
    setup.set_build(0, {})
    back = setup.pack()
    assert (back["compiled"], back["compiled_early"]) == (0, 0)
    assert setup.left_in_temp() == []


def _sleeper(setup: Setup) -> tuple[Path, Path]:
    """A program that writes its pid and waits, and the file it writes it to; the
    record's first unit (k0's compile) made to run it, and k0's source edited, so the
    next pack starts it early and the plan, which runs hipcc, does not take it."""
    pid_file = setup.tmp / "sleeper.pid"
    sleeper = setup.tmp / "sleeper"
    sleeper.write_text(f'#!/bin/sh\necho $$ > "{pid_file}"\nexec sleep 60\n')
    sleeper.chmod(0o755)
    record = setup.record()
    doc = marshal.loads(record.read_bytes())
    unit = next(u for u in doc["units"] if u["source"].endswith("k0.hip"))
    unit["argv"][0] = str(sleeper)
    record.write_bytes(marshal.dumps(doc))
    (setup.tree / "src" / "k0.hip").write_text(SOURCE.format(value=9))
    return sleeper, pid_file


def _gone(pid_file: Path) -> bool:
    """Whether the process named in ``pid_file`` has ended (it was started, and is not
    there now)."""
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_an_early_compile_the_plan_does_not_run_is_stopped(setup: Setup) -> None:
    setup.pack()
    _, pid_file = _sleeper(setup)
    edit = setup.pack()
    # The plan compiled k0 itself: the program the record named is not its compiler.
    assert (edit["compiled"], edit["compiled_early"]) == (1, 0)
    assert _gone(pid_file)
    assert setup.left_in_temp() == []
    assert shard_files(setup.out / ARCH) == _cold(setup)


# Not JSON, and JSON nested deeper than Python's reader goes (RecursionError, not a
# ValueError): the early start reads an edited descriptor before the runtime does.
@pytest.mark.parametrize("text", ["{ not json", "[" * 100_000], ids=["not-json", "deep"])
def test_a_failing_pack_stops_its_early_compiles(setup: Setup, text: str) -> None:
    setup.pack()
    _, pid_file = _sleeper(setup)
    setup.kdp(1).write_text(text)
    doc = setup.pack(expect=1)
    assert not doc["ok"]
    assert _gone(pid_file)
    assert setup.left_in_temp() == []


def test_a_stopped_pack_stops_its_early_compiles(setup: Setup) -> None:
    setup.pack()
    _, pid_file = _sleeper(setup)
    proc = setup.start(setup.argv())
    for _ in range(200):  # the early start has run once the sleeper has written its pid
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    # Stopped by the signal itself (before the command line took it) or by the
    # command line's handler: either way, as a stopped pack ends.
    assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
    assert _gone(pid_file)
    assert setup.left_in_temp() == []


@pytest.mark.parametrize("what", ["record", "folder"])
def test_a_record_others_may_write_is_not_read(setup: Setup, what: str) -> None:
    setup.pack()
    record = setup.record()
    target = record if what == "record" else record.parent
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWGRP)
    (setup.tree / "src" / "k1.hip").write_text(SOURCE.format(value=5))
    edit = setup.pack()
    assert (edit["compiled"], edit["compiled_early"]) == (1, 0)


def test_the_switch_turns_them_off(setup: Setup) -> None:
    setup.pack()
    (setup.tree / "src" / "k1.hip").write_text(SOURCE.format(value=4))
    edit = setup.pack(env={early_compiles.SWITCH: "0"})
    assert (edit["compiled"], edit["compiled_early"]) == (1, 0)


def test_a_damaged_record_starts_nothing(setup: Setup) -> None:
    setup.pack()
    setup.record().write_bytes(b"\x00not a record")
    (setup.tree / "src" / "k1.hip").write_text(SOURCE.format(value=6))
    edit = setup.pack()
    assert (edit["compiled"], edit["compiled_early"]) == (1, 0)
    assert shard_files(setup.out / ARCH) == _cold(setup)


@pytest.mark.parametrize("what", ["descriptor", "source"])
def test_a_fifo_in_a_recorded_files_place_is_not_waited_on(setup: Setup, what: str) -> None:
    """The early start reads recorded descriptors and sources before the packer's own
    checks: a FIFO put in one's place is passed over (the pack then refuses it), never
    opened for a read that would wait for a writer."""
    setup.pack()
    path = setup.kdp(1) if what == "descriptor" else setup.tree / "src" / "k1.hip"
    path.unlink()
    os.mkfifo(path)
    proc = setup.start(setup.argv())
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert not json.loads(out)["ok"]
    assert setup.left_in_temp() == []
