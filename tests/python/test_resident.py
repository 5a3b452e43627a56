"""The resident packer (UKDPACK_RESIDENT=1): a pack handed to the server's worker is the
pack itself (same shard, output, exit status, folder, environment), stops when its
client is stopped or killed, and the server steps aside when ukdpack changes or its
socket folder is not the user's own."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pack_support import BUILDERS, copy_example, run_pack, shard_files
from reliability_support import ARCH, residue, set_define

import ukdpack


class Resident:
    """A socket folder of its own, the environment that uses it, and its server."""

    def __init__(self, folder: Path, **extra: str) -> None:
        self.folder = folder
        # The module path of run_pack's packs: the server's identity (and so its socket)
        # follows it, and `resident status` must look for the same one.
        path = os.pathsep.join([str(BUILDERS), *filter(None, [os.environ.get("PYTHONPATH")])])
        self.env = {"UKDPACK_RESIDENT": "1", "UKDPACK_RESIDENT_DIR": str(folder),
                    "UKDPACK_RESIDENT_IDLE": "120", "PYTHONPATH": path, **extra}

    def full_env(self) -> dict[str, str]:
        env = dict(os.environ, HIP_PLATFORM="amd", **self.env)
        return env

    def ukdpack(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                              text=True, env=self.full_env(), check=False)

    def server_pid(self) -> int | None:
        import json

        r = self.ukdpack("resident", "status", "--json")
        assert r.returncode == 0, r.stderr
        pid = json.loads(r.stdout)["server_pid"]
        return int(pid) if pid else None

    def wait_for_server(self) -> int:
        for _ in range(300):
            pid = self.server_pid()
            if pid is not None:
                return pid
            time.sleep(0.05)
        raise AssertionError(f"no server started; its log: {self.log()}")

    def log(self) -> str:
        return "".join(p.read_text() for p in self.folder.glob("*.log"))

    def workers(self) -> list[str]:
        return [line for line in self.log().splitlines() if " worker " in line]

    def stop(self) -> None:
        pid = self.server_pid()
        self.ukdpack("resident", "stop")
        if pid is not None and not _gone(pid, 10.0):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int, within: float) -> bool:
    """Whether ``pid`` ends (or is a zombie: its parent may be gone) within ``within``."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        with contextlib.suppress(ChildProcessError):  # reap it if it is ours
            os.waitpid(pid, os.WNOHANG)
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2][1:2]
        except OSError:
            return True
        if state in (b"Z", b"X"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def resident() -> Iterator[Resident]:
    # Under /tmp, not tmp_path: a socket's path must fit 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="ukres-"))
    r = Resident(folder)
    yield r
    r.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example tree and a compile cache that holds its objects."""
    base = tmp_path_factory.mktemp("resident")
    tree, cache = copy_example(base / "tree"), base / "cache"
    r = run_pack(tree, base / "out", [ARCH], cache=cache)
    assert r.returncode == 0, r.stderr
    return tree, cache


def _started(resident: Resident, tree: Path, cache: Path, out: Path) -> int:
    """A first pack (in its own process; it starts the server); the server's pid."""
    r = run_pack(tree, out, [ARCH], cache=cache, env=resident.env)
    assert r.returncode == 0, r.stderr
    assert resident.workers() == []
    return resident.wait_for_server()


def test_a_pack_through_the_server_is_the_pack_itself(
        resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    _started(resident, tree, cache, tmp_path / "first")
    set_define(tree, "RESIDENT_TEST", 1)  # one compile: the worker runs the compiler too
    served = run_pack(tree, tmp_path / "served", [ARCH], cache=cache, env=resident.env)
    assert served.returncode == 0, served.stderr
    assert len(resident.workers()) == 2, resident.log()  # started, then ended
    assert " exit 0 after " in resident.workers()[-1], resident.log()
    alone = run_pack(tree, tmp_path / "alone", [ARCH], cache=cache)
    assert alone.returncode == 0, alone.stderr
    assert shard_files(tmp_path / "served" / ARCH) == shard_files(tmp_path / "alone" / ARCH)
    assert residue(tmp_path / "served") == []
    # The report on the client's own streams: the compile it ran, the shard it made.
    assert "RESIDENT_TEST=1] for gfx90a" in served.stderr
    assert f"-> {tmp_path / 'served' / ARCH}" in served.stderr
    assert served.stderr.splitlines()[-1].split(",")[0] == \
        alone.stderr.splitlines()[-1].split(",")[0] == "ukdpack: gfx90a: 9 kernels"


def _first_json_pack(resident: Resident, warm: tuple[Path, Path], tmp_path: Path
                     ) -> tuple[Path, Path, Path]:
    """A copy of the warm tree packed once with ``--json`` in its own process (it starts
    the server and writes the record of this command line): (tree, out root, cache)."""
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    out = tmp_path / "out"
    first = run_pack(tree, out, [ARCH], "--json", cache=cache, env=resident.env)
    assert first.returncode == 0, first.stderr
    resident.wait_for_server()
    return tree, out, cache


def _served_report(tree: Path, out: Path, cache: Path, env: dict[str, str]
                   ) -> tuple[dict[str, Any], str]:
    """The ``--json`` report of the same command line, run with ``env``, and its stderr."""
    served = run_pack(tree, out, [ARCH], "--json", cache=cache, env=env)
    assert served.returncode == 0, served.stderr
    doc: dict[str, Any] = json.loads(served.stdout)
    return doc, served.stderr


def test_a_served_edit_starts_its_compile_before_the_tree_is_loaded(
        resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    """The worker starts the compiles of what was edited since the last run of the same
    command line, as ``python -m ukdpack`` does, from the record the first pack (in its
    own process) wrote; and it writes the record for the next pack in turn."""
    tree, out, cache = _first_json_pack(resident, warm, tmp_path)
    for n in (1, 2):  # the second edit starts from the record the first served pack wrote
        set_define(tree, "RESIDENT_EARLY", n)
        doc, stderr = _served_report(tree, out, cache, resident.env)
        assert len(resident.workers()) == 2 * n, resident.log()
        assert (doc["compiled"], doc["compiled_early"]) == (1, 1), stderr
    alone = run_pack(tree, tmp_path / "alone", [ARCH], cache=cache)
    assert alone.returncode == 0, alone.stderr
    assert shard_files(out / ARCH) == shard_files(tmp_path / "alone" / ARCH)
    assert residue(out) == []


#: Put first on the server's module path: the early start fails in every process whose
#: environment asks for it (the served pack's, which the worker takes).
FAILING_EARLY_START = """import os
from ukdpack.produce import early_compiles


def _fails(argv):
    if os.environ.get("UKDPACK_TEST_EARLY_START_FAILS") == "1":
        raise RuntimeError("an early start that fails")
    return _start(argv)


_start = early_compiles.start
early_compiles.start = _fails
"""


def test_a_served_pack_whose_early_start_fails_runs_without_it(
        warm: tuple[Path, Path], tmp_path: Path) -> None:
    """An early start only saves time: where it fails in the worker, the pack runs and
    compiles as if none had been started, rather than ending without a word."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FAILING_EARLY_START)
    folder = Path(tempfile.mkdtemp(prefix="ukres-"))
    resident = Resident(folder, PYTHONPATH=os.pathsep.join([str(hook), str(BUILDERS)]))
    try:
        tree, out, cache = _first_json_pack(resident, warm, tmp_path)
        set_define(tree, "RESIDENT_EARLY_FAILS", 1)
        doc, stderr = _served_report(tree, out, cache,
                                     {**resident.env, "UKDPACK_TEST_EARLY_START_FAILS": "1"})
        assert len(resident.workers()) == 2, resident.log()
        assert (doc["compiled"], doc["compiled_early"]) == (1, 0), stderr
    finally:
        resident.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_worker_takes_the_clients_folder_environment_and_exit_status(
        resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    _started(resident, tree, cache, tmp_path / "first")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(tree, work / "tree")
    # Relative paths from the client's folder; the cache from the client's environment.
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", "tree", "--out-root",
            "out", "--arch", ARCH, "--plain", "--jobs", "2"]
    env = dict(resident.full_env(), UKDPACK_CACHE_DIR=str(tmp_path / "env-cache"))
    shutil.copytree(cache, tmp_path / "env-cache")
    r = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert any("worker " in w and str(work) in w for w in resident.workers()), resident.log()
    assert (work / "out" / ARCH).is_dir()
    # Bad input: exit 1 and the very words of a pack in its own process.
    (work / "tree" / "broken.kdp.json").write_text("{ not json\n")
    shutil.copytree(work / "out", work / "twin")
    bad = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env, check=False)
    plain_env = {k: v for k, v in env.items() if k != "UKDPACK_RESIDENT"}
    alone = subprocess.run([*argv, "--out-root", "twin"], cwd=work, capture_output=True,
                           text=True, env=plain_env, check=False)
    assert (bad.returncode, bad.stdout, bad.stderr) == \
        (1, alone.stdout, alone.stderr.replace(str(work / "twin"), str(work / "out")))
    assert alone.returncode == 1 and "broken.kdp.json" in alone.stderr
    assert resident.workers()[-1].split(": ")[-1].startswith("exit 1")
    # A usage error: exit 2, argparse's words.
    usage = subprocess.run([*argv, "--no-such-flag"], cwd=work, capture_output=True, text=True,
                           env=env, check=False)
    assert usage.returncode == 2 and "--no-such-flag" in usage.stderr, usage.stderr
    assert resident.workers()[-1].split(": ")[-1].startswith("exit 2")


def test_the_clients_niceness_and_environment_reach_its_compiles(
        resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    _started(resident, tree, cache, tmp_path / "out")
    seen = tmp_path / "seen"
    hipcc = shutil.which("hipcc")
    wrapper = tmp_path / "noting-hipcc"
    wrapper.write_text(f'#!/bin/sh\necho "$(nice) $RESIDENT_MARK" >> {seen}\nexec {hipcc} "$@"\n')
    wrapper.chmod(0o755)
    set_define(tree, "RESIDENT_NICE", 1)
    argv = ["nice", "-n", "7", sys.executable, "-m", "ukdpack", "pack", "--source-root",
            str(tree), "--out-root", str(tmp_path / "out"), "--arch", ARCH, "--cache-dir",
            str(cache), "--plain", "--hipcc", str(wrapper)]
    r = subprocess.run(argv, capture_output=True, text=True, check=False,
                       env=dict(resident.full_env(), RESIDENT_MARK="from-the-client"))
    assert r.returncode == 0, r.stderr
    assert len(resident.workers()) == 2, resident.log()
    compiles = [line.split() for line in seen.read_text().splitlines()
                if "--version" not in line]
    assert compiles and all(int(n) >= 7 and mark == "from-the-client" for n, mark in compiles)


def _slow_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """hipcc behind a wrapper that waits before each compile and says it started (its
    pid in the marker): a pack that is surely compiling when it is stopped."""
    marker = tmp_path / "compiling"
    hipcc = shutil.which("hipcc")
    assert hipcc is not None
    wrapper = tmp_path / "slow-hipcc"
    wrapper.write_text("#!/bin/sh\n"
                       f"case \" $* \" in *' --version '*|*' -dumpversion '*) exec {hipcc} \"$@\";; esac\n"
                       f"echo $$ > {marker}\nsleep 60\nexec {hipcc} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, marker


def _stop_while_compiling(resident: Resident, tree: Path, cache: Path, out: Path,
                          wrapper: Path, marker: Path, how: signal.Signals
                          ) -> tuple[subprocess.Popen[str], int, int]:
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(out), "--arch", ARCH, "--cache-dir", str(cache), "--plain", "--jobs", "1",
            "--hipcc", str(wrapper)]
    proc = subprocess.Popen(argv, env=resident.full_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    compiler = int(marker.read_text())
    worker = int(resident.workers()[-1].split("worker ")[1].split(":")[0])
    proc.send_signal(how)
    return proc, worker, compiler


def test_a_stopped_client_stops_its_pack(resident: Resident, warm: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    _started(resident, tree, cache, tmp_path / "out")
    before = shard_files(tmp_path / "out" / ARCH)
    wrapper, marker = _slow_compiler(tmp_path)
    set_define(tree, "RESIDENT_STOP", 1)
    proc, worker, compiler = _stop_while_compiling(resident, tree, cache, tmp_path / "out",
                                                   wrapper, marker, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "ukdpack: stopped by SIGTERM" in err
    assert _gone(worker, 10.0) and _gone(compiler, 10.0)
    # What a stopped pack leaves: the previous shard, nothing staged.
    assert shard_files(tmp_path / "out" / ARCH) == before
    assert residue(tmp_path / "out") == []


def test_a_killed_client_stops_its_pack(resident: Resident, warm: tuple[Path, Path],
                                        tmp_path: Path) -> None:
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    _started(resident, tree, cache, tmp_path / "out")
    wrapper, marker = _slow_compiler(tmp_path)
    set_define(tree, "RESIDENT_KILL", 1)
    proc, worker, compiler = _stop_while_compiling(resident, tree, cache, tmp_path / "out",
                                                   wrapper, marker, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _gone(worker, 15.0) and _gone(compiler, 15.0), resident.log()
    end = time.monotonic() + 10  # the server logs the worker's end once it has reaped it
    while "(its client had gone)" not in resident.log() and time.monotonic() < end:
        time.sleep(0.05)
    assert "(its client had gone)" in resident.log()
    assert residue(tmp_path / "out") == []


def test_a_pack_whose_server_is_killed_is_stopped_by_its_client(
        resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    tree = Path(shutil.copytree(tree, tmp_path / "tree"))
    server = _started(resident, tree, cache, tmp_path / "out")
    before = shard_files(tmp_path / "out" / ARCH)
    wrapper, marker = _slow_compiler(tmp_path)
    set_define(tree, "RESIDENT_SERVER_KILLED", 1)
    argv = [sys.executable, "-m", "ukdpack", "pack", "--source-root", str(tree), "--out-root",
            str(tmp_path / "out"), "--arch", ARCH, "--cache-dir", str(cache), "--plain",
            "--jobs", "1", "--hipcc", str(wrapper)]
    proc = subprocess.Popen(argv, env=resident.full_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.05)
    worker = int(resident.workers()[-1].split("worker ")[1].split(":")[0])
    os.kill(server, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "the resident packer's server went away" in err and "the pack was stopped" in err
    assert _gone(worker, 15.0) and _gone(int(marker.read_text()), 15.0)
    assert shard_files(tmp_path / "out" / ARCH) == before
    assert residue(tmp_path / "out") == []


def test_a_changed_installation_sends_packs_back_to_their_own_process(
        warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    # ukdpack as installed, copied where this test may change it.
    site = tmp_path / "site"
    shutil.copytree(Path(ukdpack.__path__[0]), site / "ukdpack",
                    ignore=shutil.ignore_patterns("__pycache__"))
    folder = Path(tempfile.mkdtemp(prefix="ukres-"))
    resident = Resident(folder, PYTHONPATH=os.pathsep.join([str(site), str(BUILDERS)]))
    try:
        first = _started(resident, tree, cache, tmp_path / "out")
        changed = site / "ukdpack" / "shard" / "pack.py"
        os.utime(changed, ns=(time.time_ns(), time.time_ns() + 10**9))
        r = run_pack(tree, tmp_path / "out", [ARCH], cache=cache, env=resident.env)
        assert r.returncode == 0, r.stderr
        assert resident.workers() == []  # it ran in its own process
        assert f"ukdpack's installation changed ({changed} changed)" in resident.log()
        assert _gone(first, 10.0)
        # The next pack starts a server of the installation as it now is.
        r = run_pack(tree, tmp_path / "out", [ARCH], cache=cache, env=resident.env)
        assert r.returncode == 0, r.stderr
        assert resident.wait_for_server() != first
    finally:
        resident.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_socket_folder_open_to_others_is_not_used(warm: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    tree, cache = warm
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    resident = Resident(folder)
    r = run_pack(tree, tmp_path / "out", [ARCH], cache=cache, env=resident.env)
    assert r.returncode == 0, r.stderr
    assert list(folder.iterdir()) == []  # no server started, no socket made
    status = resident.ukdpack("resident", "status")
    assert status.returncode == 0
    assert f"unusable: {folder} is open to other users (mode 777; expected 700)" in status.stdout


def test_an_idle_server_ends_by_itself(warm: tuple[Path, Path], tmp_path: Path) -> None:
    tree, cache = warm
    folder = Path(tempfile.mkdtemp(prefix="ukres-"))
    resident = Resident(folder, UKDPACK_RESIDENT_IDLE="1")
    try:
        pid = _started(resident, tree, cache, tmp_path / "out")
        r = run_pack(tree, tmp_path / "out", [ARCH], cache=cache, env=resident.env)
        assert r.returncode == 0, r.stderr
        assert len(resident.workers()) == 2  # served, and the idle clock starts again
        assert _gone(pid, 15.0), resident.log()
        assert f"pid {pid} ends" in resident.log()
        assert not any(folder.glob("*.sock"))
    finally:
        resident.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_status_and_stop(resident: Resident, warm: tuple[Path, Path], tmp_path: Path) -> None:
    r = resident.ukdpack("resident", "status")
    assert r.returncode == 0 and "server:          none at" in r.stdout, r.stdout
    assert "resident packer: on" in r.stdout
    tree, cache = warm
    pid = _started(resident, tree, cache, tmp_path / "out")
    r = resident.ukdpack("resident", "status")
    assert f"server:          pid {pid} at {resident.folder}" in r.stdout, r.stdout
    # The console script hands its pack over too.
    script = Path(sys.executable).parent / "ukdpack"
    r = subprocess.run([str(script), "pack", "--source-root", str(tree), "--out-root",
                        str(tmp_path / "out"), "--arch", ARCH, "--cache-dir", str(cache),
                        "--plain"], capture_output=True, text=True, env=resident.full_env(),
                       check=False)
    assert r.returncode == 0, r.stderr
    assert len(resident.workers()) == 2, resident.log()
    r = resident.ukdpack("resident", "stop")
    assert r.returncode == 0 and f"server pid {pid} stops" in r.stdout
    assert _gone(pid, 10.0)
    assert not any(resident.folder.glob("*.sock"))
