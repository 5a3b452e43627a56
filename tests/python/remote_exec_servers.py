"""A real remote-execution farm on loopback for the tests: PostgreSQL (Debian's), a
BuildGrid server (``.venv-buildgrid``, made by scripts/setup.sh) and N workers
(tests/remote_exec/worker.py, stand-ins for a farm's buildbox or Buildbarn workers), each
on a free 127.0.0.1 port with its files and log in a tmp folder, stopped on teardown.

BuildGrid 0.4.4 is the last release for Debian 12's Python 3.11. Two settings make it
work: the database URL names psycopg2 (``postgresql+psycopg2://``; with psycopg 3 its
LISTEN/NOTIFY job notifier fails on every loop and Execute never completes), and the
sql-scheduler has ``assigners:`` (without, no job is ever handed to a worker). Polling
is set to 50 ms: the defaults cost over a second per action.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from hip_objects import hipcc, hipcc_identity
from remote_servers import free_port

from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "remote_exec" / "worker.py"
POSTGRES_BIN = Path(os.environ.get("UKDPACK_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
#: The platform property naming the compiler a worker has (the compile cache's compiler
#: fingerprint): the server hands an action only to a worker with the same value.
TOOLCHAIN_KEY = "ukdpack-toolchain"
#: Platform keys the server matches on (the REAPI convention's OSFamily, and ours).
MATCH_KEYS = ("OSFamily", TOOLCHAIN_KEY)
START_TIMEOUT = 30.0


def toolchain() -> str:
    """What the workers offer and the actions ask for under TOOLCHAIN_KEY: the tests'
    stand-in for the compile cache's compiler fingerprint (hipcc's version text)."""
    return hashlib.sha256(hipcc_identity(hipcc()).encode()).hexdigest()[:16]


def genco_argv(source: str, out: str, arch: str = "gfx90a") -> list[str]:
    """The packer's device-only hipcc command line (produce/compiler.py), with paths
    relative to the input root."""
    return [hipcc(), "--genco", f"--offload-arch={arch}", "-O3", "-fuse-cuid=none",
            source, "-o", out]


def buildgrid_venv() -> Path:
    """``$UKDPACK_BUILDGRID_VENV``, else the repository's ``.venv-buildgrid``."""
    venv = Path(os.environ.get("UKDPACK_BUILDGRID_VENV") or REPO / ".venv-buildgrid")
    if not (venv / "bin" / "bgd").is_file():
        raise AssertionError(f"BuildGrid is not installed in {venv}: run scripts/setup.sh")
    return venv


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class Farm:
    """A running server and its workers."""

    address: str  # 127.0.0.1:PORT, the REAPI and Bots services
    instance: str  # '' (the default instance)
    properties: Mapping[str, str]  # what every worker offers
    logs: tuple[Path, ...]  # postgres, bgd, worker 1..N

    @property
    def url(self) -> str:
        """``grpc://HOST:PORT`` (a ``/INSTANCE`` would follow a named instance)."""
        return f"grpc://{self.address}" + (f"/{self.instance}" if self.instance else "")

    def log_tails(self) -> str:
        """The end of every log, for an assertion's message."""
        return "\n".join(f"--- {p.name}\n{_tail(p)}" for p in self.logs)


def _wait(what: str, ready: Callable[[], bool], procs: list[subprocess.Popen[bytes]],
          logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs, strict=True):
            if proc.poll() is not None:
                raise AssertionError(f"{what}: {log.name} exited ({proc.returncode}):\n"
                                     f"{_tail(log)}")
        if ready():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not ready after {START_TIMEOUT} s:\n" +
                         "\n".join(f"--- {p.name}\n{_tail(p)}" for p in logs))


def _listening(port: int) -> Callable[[], bool]:
    import socket

    def check() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        return False
    return check


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stops a process started in its own session, with whatever it spawned."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _config(port: int, db_port: int, cas: Path, poll: float = 0.05,
            threads: int = 160) -> str:
    keys = ", ".join(MATCH_KEYS)
    # thread-pool-size: BuildGrid's gRPC server holds a thread per open call (each Execute
    # stream, each bot's long poll) and refuses calls past it (RESOURCE_EXHAUSTED); its
    # default, 5 per core, is 10 here, well under a client's 64 actions in flight.
    return f"""\
thread-pool-size: {threads}
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
authorization:
  method: none
connections:
  - !sql-connection &sql
    connection-string: postgresql+psycopg2://bgd@127.0.0.1:{db_port}/bgd
storages:
  - !disk-storage &cas
    path: {cas}
caches:
  - !lru-action-cache &action-cache
    storage: *cas
    max-cached-refs: 10000
    allow-updates: true
    cache-failed-actions: true
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    action-cache: *action-cache
    storage: *cas
    property-set: !dynamic-property-set
      match-property-keys: [{keys}]
      wildcard-property-keys: []
    assigners:
      - !priority-age-assigner
        count: 2
        interval: {poll}
        priority-assignment-percentage: 100
        bot-assignment-strategy: !assign-by-capacity
    poll-interval: {poll}
    bot-poll-interval: {poll}
instances:
  - name: ''
    services:
      - !action-cache
        cache: *action-cache
      - !execution
        scheduler: *scheduler
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
"""


def farm(base: Path, workers: int = 2, properties: Mapping[str, str] | None = None,
         poll: float = 0.05, threads: int = 160) -> Iterator[Farm]:
    """PostgreSQL, BuildGrid and ``workers`` workers offering ``properties`` (unless
    given: OSFamily linux and this machine's hipcc as the toolchain), all on loopback;
    stopped on exit. ``poll`` (s) is the scheduler's polling (jobs, bots, assigners),
    ``threads`` the server's gRPC thread pool (the bench measures other values)."""
    bgd = buildgrid_venv() / "bin" / "bgd"
    props = dict(properties or {"OSFamily": "linux", TOOLCHAIN_KEY: toolchain()})
    base.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    # PostgreSQL refuses to run as root: as root, it runs as 'postgres', in a folder of
    # its own (pytest's tmp folders are closed to other users).
    as_root = os.getuid() == 0
    db_dir = Path(tempfile.mkdtemp(prefix="ukdpack-pg-"))
    pg_user: dict[str, object] = {}
    if as_root:
        pw = pwd.getpwnam("postgres")
        os.chown(db_dir, pw.pw_uid, pw.pw_gid)
        pg_user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def start(argv: list[str], log: Path, **kw: object) -> subprocess.Popen[bytes]:
        out = log.open("ab")
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    **kw)  # type: ignore[call-overload]
        finally:
            out.close()
        procs.append(proc)
        logs.append(log)
        return proc

    try:
        pg_log = db_dir / "postgres.log"
        try:
            init = subprocess.run([str(POSTGRES_BIN / "initdb"), "-D", str(db_dir / "data"),
                                   "-A", "trust", "-U", "bgd", "-E", "UTF8", "--no-sync"],
                                  capture_output=True, text=True, check=False, cwd=db_dir,
                                  **pg_user)  # type: ignore[call-overload]
        except PermissionError as e:
            # As root the database runs as 'postgres', which must reach its programs: a
            # system whose / or /usr is closed to other users (a chroot made in a 0700
            # folder) refuses it.
            closed = [str(p) for p in (*reversed(POSTGRES_BIN.parents), POSTGRES_BIN)
                      if not p.stat().st_mode & 0o001]
            raise AssertionError(f"user postgres cannot run {e.filename}: the folders "
                                 f"{closed} are closed to other users (chmod o+x them)") from None
        if init.returncode != 0:
            raise AssertionError(f"initdb failed ({init.returncode}): {init.stderr}")
        db_port = free_port()
        start([str(POSTGRES_BIN / "postgres"), "-D", str(db_dir / "data"),
               "-h", "127.0.0.1", "-p", str(db_port), "-k", str(db_dir),
               "-c", "fsync=off", "-c", "synchronous_commit=off",
               "-c", "full_page_writes=off"], pg_log, cwd=db_dir, **pg_user)

        def db_ready() -> bool:
            return subprocess.run([str(POSTGRES_BIN / "pg_isready"), "-q", "-h", "127.0.0.1",
                                   "-p", str(db_port), "-U", "bgd"], check=False).returncode == 0
        _wait("PostgreSQL", db_ready, procs, logs)
        db_url = f"postgresql+psycopg2://bgd@127.0.0.1:{db_port}/bgd"
        for argv in ([str(POSTGRES_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(db_port),
                      "-U", "bgd", "bgd"], [str(bgd), "migrate", "apply", db_url]):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise AssertionError(f"{Path(argv[0]).name} failed ({done.returncode}):\n"
                                     f"{done.stdout}{done.stderr}")

        port = free_port()
        config = base / "bgd.yml"
        config.write_text(_config(port, db_port, base / "cas", poll, threads))
        (base / "cas").mkdir()
        start([str(bgd), "server", "start", "-v", str(config)], base / "bgd.log")
        _wait("BuildGrid", _listening(port), procs, logs)

        address = f"127.0.0.1:{port}"
        for i in range(1, workers + 1):
            argv = [sys.executable, str(WORKER), "--server", address, "--bot-id", f"w{i}"]
            for k, v in props.items():
                argv += ["--property", f"{k}={v}"]
            start(argv, base / f"worker{i}.log")
        worker_logs = logs[2:]
        _wait("the workers' bot sessions",
              lambda: all("session" in p.read_text() for p in worker_logs), procs, logs)
        yield Farm(address, "", props, tuple(logs))
    finally:
        # Workers first, then the server, then the database under it (SIGINT: its fast
        # shutdown, which does not wait for clients).
        for proc in reversed(procs[1:]):
            _stop(proc)
        if procs:
            _stop(procs[0], signal.SIGINT)
        # Keep the database's log next to the others for a failure's message.
        with contextlib.suppress(OSError):
            shutil.copy(db_dir / "postgres.log", base / "postgres.log")
        shutil.rmtree(db_dir, ignore_errors=True)


def digest(data: bytes) -> re_pb2.Digest:
    """The REAPI digest (sha256, size) of ``data``."""
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class ReapiClient:
    """The few REAPI calls a test or bench makes (a client's side), on one channel."""

    def __init__(self, remote: Farm) -> None:
        self.remote = remote
        self.channel = grpc.insecure_channel(remote.address)
        self.cas = re_grpc.ContentAddressableStorageStub(self.channel)
        self.execution = re_grpc.ExecutionStub(self.channel)

    def action(self, argv: list[str], inputs: dict[str, bytes], outputs: list[str],
               env: dict[str, str] | None = None, toolchain_value: str | None = None,
               cache: bool = True) -> re_pb2.Digest:
        """Stores an action (its command, a flat input root of ``inputs``) and its
        blobs; its digest."""
        props = dict(self.remote.properties)
        if toolchain_value is not None:
            props[TOOLCHAIN_KEY] = toolchain_value
        root = re_pb2.Directory(files=[re_pb2.FileNode(name=n, digest=digest(b))
                                       for n, b in sorted(inputs.items())])
        command = re_pb2.Command(
            arguments=argv, output_paths=sorted(outputs),
            environment_variables=[re_pb2.Command.EnvironmentVariable(name=k, value=v)
                                   for k, v in sorted((env or {}).items())],
            platform=re_pb2.Platform(properties=[
                re_pb2.Platform.Property(name=k, value=v) for k, v in sorted(props.items())]))
        blobs = [*inputs.values(), root.SerializeToString(), command.SerializeToString()]
        action = re_pb2.Action(command_digest=digest(blobs[-1]),
                               input_root_digest=digest(blobs[-2]), do_not_cache=not cache)
        blobs.append(action.SerializeToString())
        self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(requests=[
            re_pb2.BatchUpdateBlobsRequest.Request(digest=digest(b), data=b) for b in blobs]))
        return digest(blobs[-1])

    def execute(self, action: re_pb2.Digest, timeout: float = 60) -> re_pb2.ExecuteResponse:
        """Execute, streamed to the end."""
        for op in self.execution.Execute(re_pb2.ExecuteRequest(action_digest=action),
                                         timeout=timeout):
            if op.done:
                assert op.WhichOneof("result") == "response", op
                response = re_pb2.ExecuteResponse()
                op.response.Unpack(response)
                return response
        raise AssertionError(f"the Execute stream ended before the action was done\n"
                             f"{self.remote.log_tails()}")

    def read(self, d: re_pb2.Digest) -> bytes:
        """A blob of the content store."""
        reply = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(digests=[d]))
        return bytes(reply.responses[0].data)
