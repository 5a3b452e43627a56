"""The publish step's kept I/O pool: an interrupted command does not wait on its idle
threads (cli._end_interrupted gives live non-daemon threads a second), and a forked
child starts its own."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from ukdpack.shard import publish


def _io_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ukdpack-io")]


def test_ending_the_pool_lets_its_idle_threads_end(tmp_path: Path) -> None:
    files = [tmp_path / f"f{i}" for i in range(4)]
    for f in files:
        f.write_text("x")
    publish._concurrently(lambda p: os.stat(p), [str(f) for f in files])
    assert _io_threads(), "the pool started no thread"
    publish.end_io_pool()
    for t in _io_threads():
        t.join(10.0)
    assert not [t for t in _io_threads() if t.is_alive()]
    # A later call starts a new pool.
    publish._concurrently(lambda p: os.stat(p), [str(files[0])])
    assert any(t.is_alive() for t in _io_threads())
    publish.end_io_pool()


def test_a_forked_child_runs_its_own_pool(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    publish._concurrently(lambda p: os.stat(p), [str(tmp_path / "a")])  # the parent's pool
    pid = os.fork()
    if pid == 0:  # the parent's pool threads are not here: work queued to them never ran
        try:
            publish._concurrently(lambda p: os.stat(p), [str(tmp_path / "a")])
            os._exit(0)
        finally:
            os._exit(1)
    end = time.monotonic() + 20  # a child queueing to threads it lacks would wait forever
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < end:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child's fsyncs never ran")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    publish.end_io_pool()
