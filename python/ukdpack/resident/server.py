"""The resident server: ukdpack's modules imported once, a worker forked per pack.

``python -m ukdpack.resident.server`` (started by the first client that finds none)
takes the socket of its identity, imports what a pack imports and waits. Per pack
request it forks a worker that becomes the client's process in all that a pack reads
(standard streams, working folder, environment, umask, arguments, ignored signals) and
runs the command line's ``main``; the server reports the worker's exit status to the
client, stops the worker when the client goes away, and refuses (so the client runs the
pack itself) when any module it imported has changed on disk since it started. It ends
after ``UKDPACK_RESIDENT_IDLE`` seconds without a pack (default 900), on ``ukdpack
resident stop``, or on SIGTERM.

The server itself never runs a pack: every cache a pack fills (``lru_cache`` and the
like) starts empty in each worker, as in a fresh process.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import os
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any

from ukdpack.redact import redact
from ukdpack.resident import place, wire

#: What a pack imports, imported once here so that workers start with them.
WARM = ("ukdpack.cli", "ukdpack.shard.pack", "ukdpack.produce.producers",
        "ukdpack.produce.plan", "ukdpack.authored.load", "ukdpack.shard.runtime_check",
        "ukdpack.shard.reuse", "ukdpack.shard.publish", "ukdpack.collector",
        "ukdpack.produce.early_compiles",
        "ctypes")  # the collector's trim and publishing's exchange import it when first used


def _module_files() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every imported module's file: the server is stale once one
    differs."""
    out: dict[str, tuple[int, int]] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path not in out:
            try:
                st = os.stat(path)
            except OSError:
                continue
            out[path] = (st.st_mtime_ns, st.st_size)
    return out


def _changed(files: dict[str, tuple[int, int]]) -> str | None:
    for path, seen in files.items():
        try:
            st = os.stat(path)
        except OSError:
            return f"{path} is gone"
        if (st.st_mtime_ns, st.st_size) != seen:
            return f"{path} changed"
    return None


class Server:
    """One identity's server: its socket, its running workers and its deadline."""

    def __init__(self, where: place.Place, ident: str, listener: socket.socket,
                 lock_fd: int) -> None:
        self.where, self.ident, self.listener, self.lock_fd = where, ident, listener, lock_fd
        self.files = _module_files()
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, ("accept", 0))
        #: worker pid -> (the client's connection or None once it went, the pidfd, when
        #: it started)
        self.running: dict[int, tuple[socket.socket | None, int, float]] = {}
        self.accepting = True
        self.idle_s = place.idle_seconds()
        self.last = time.monotonic()

    def retire(self) -> None:
        """Take no more packs (the socket goes, so the next client starts a new server);
        end once the running workers have."""
        if self.accepting:
            self.accepting = False
            self.selector.unregister(self.listener)
            self.listener.close()
            with contextlib.suppress(OSError):
                os.unlink(self.where.socket)

    def serve(self) -> None:
        """Answer requests until stopped, idle, or stale."""
        while self.accepting or self.running:
            timeout = None
            if self.accepting and not self.running:
                timeout = self.last + self.idle_s - time.monotonic()
                if timeout <= 0:
                    self.retire()
                    continue
            events = self.selector.select(timeout)
            for key, _ in events:
                what, pid = key.data
                if what == "accept":
                    self._accept()
                elif what == "exit":
                    self._reap(pid)
                elif what == "client":
                    self._client_gone(pid)
            if events:  # a select that timed out is no activity: the idle clock runs on
                self.last = time.monotonic()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.settimeout(wire.ANSWER_S)
        fds: list[int] = []
        try:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))[1]
            if uid != os.getuid():
                conn.close()
                return
            request, fds = wire.receive(conn, max_fds=3)
            self._answer(conn, request, fds)
        except (OSError, wire.WireError) as e:
            _log(f"a request failed: {e}")
            for fd in fds:
                wire.close_quietly(fd)
            conn.close()

    def _answer(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        op = request.get("op")
        if op == "ping":
            wire.send(conn, {"server": os.getpid(), "running": len(self.running),
                             "idle_s": self.idle_s})
            conn.close()
            return
        if op == "stop":
            wire.send(conn, {"stopping": os.getpid(), "running": len(self.running)})
            conn.close()
            self.retire()
            return
        why = None
        if op != "pack" or len(fds) != 3:
            why = "not a pack request"
        elif request.get("identity") != self.ident:
            why = "another interpreter or module path"
        elif (changed := _changed(self.files)) is not None:
            why = f"ukdpack's installation changed ({changed})"
            self.retire()
        if why is not None:
            _log(f"refused a request: {why}")
            wire.send(conn, {"refused": why})
            for fd in fds:
                wire.close_quietly(fd)
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            self._become_worker(conn, request, fds)  # never returns
        for fd in fds:
            wire.close_quietly(fd)
        pidfd = os.pidfd_open(pid)
        conn.settimeout(None)
        self.running[pid] = (conn, pidfd, time.monotonic())
        # Redacted: a remote cache's URL on the command line may carry credentials.
        _log(redact(f"worker {pid}: {request['cwd']}: ukdpack {' '.join(request['argv'][1:])}"))
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))
        try:
            wire.send(conn, {"pid": pid})
        except OSError:  # the client went before it learnt the pid: its pack stops
            self._client_gone(pid)

    def _reap(self, pid: int) -> None:
        conn, pidfd, started = self.running.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        ended = f"exit {code}" if code >= 0 else f"signal {-code}"
        _log(f"worker {pid}: {ended} after {time.monotonic() - started:.2f} s"
             + ("" if conn is not None else " (its client had gone)"))
        if conn is not None:
            self.selector.unregister(conn)
            with contextlib.suppress(OSError):
                wire.send(conn, {"exit": code} if code >= 0 else {"signal": -code})
            conn.close()

    def _client_gone(self, pid: int) -> None:
        """The client's connection is readable: it closed (it was killed, or ended
        without waiting). Its pack stops as if it had been sent SIGTERM."""
        conn, pidfd, started = self.running[pid]
        if conn is None:
            return
        self.selector.unregister(conn)
        conn.close()
        self.running[pid] = (None, pidfd, started)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)

    def _become_worker(self, conn: socket.socket, request: dict[str, Any],
                       fds: list[int]) -> None:
        """In the forked child: become the client's process and run its command."""
        code = 1
        try:
            try:
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                # Nothing of the server's stays open in the worker (its lock above all:
                # a pack still running must not keep a new server from starting).
                self.selector.close()
                for sock in (self.listener, conn, *(c for c, _, _ in self.running.values() if c)):
                    sock.detach()
                os.closerange(3, _max_fd())
                _take_client(request)
            except Exception as e:  # the client's folder went, ...: say so where it reads
                print(f"ukdpack: the resident packer could not take this pack: {e}",
                      file=sys.stderr)
                sys.stderr.flush()
                os._exit(1)
            from ukdpack.cli import main
            from ukdpack.produce import early_compiles

            argv = list(request["argv"][1:])
            # As `python -m ukdpack` does: the compiles of what was edited since the last
            # run of this command start before the worker loads the tree, and their
            # record is written for the next (the same record as a pack in its own process).
            if argv[:1] == ["pack"]:
                try:
                    early_compiles.start(argv)
                except Exception:  # an early start only saves time: the pack runs without
                    early_compiles.discard()
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's usage errors, as the interpreter ends them
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            finally:
                early_compiles.discard()  # any the pack did not take
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    code = code or 1
        finally:
            os._exit(code)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 65536


def _text_stream(fd: int, mode: str, encoding: tuple[str, str] | None) -> io.TextIOWrapper:
    enc, errors = encoding if encoding is not None else ("utf-8", "strict")
    tty = os.isatty(fd)
    if mode == "r":
        return io.TextIOWrapper(open(fd, "rb", closefd=False),
                                enc, errors, line_buffering=tty)
    raw = open(fd, "wb", closefd=False)  # noqa: SIM115 (the process's own stream)
    # stderr is line-buffered even into a pipe, as the interpreter makes it.
    return io.TextIOWrapper(raw, enc, errors, line_buffering=tty or fd == 2)


def _take_client(request: dict[str, Any]) -> None:
    """The client's folder, environment, umask, niceness, arguments, streams and
    signals."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(int(request["umask"]))
    # As nice as the client (a build run under `nice`); a worker can be made nicer, never
    # less nice than the server.
    more = int(request.get("nice", 0)) - os.nice(0)
    if more > 0:
        os.nice(more)
    sys.argv = list(request["argv"])
    if sys.path and sys.path[0] == place.socket_dir():
        sys.path[0] = request["cwd"]  # as under the client's `python -m`
    streams = request.get("streams") or [None, None, None]
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        stream = _text_stream(fd, mode, streams[fd])
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    ignored = set(request.get("ignored") or [])
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if s in ignored:
            signal.signal(s, signal.SIG_IGN)
        else:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)


def _log(text: str) -> None:
    """A line in the server's log (its standard error: the log file)."""
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}", file=sys.stderr, flush=True)



def main() -> int:
    """Serve this interpreter's identity until idle, stopped or stale."""
    ident = place.identity()
    where = place.Place(place.socket_dir(), place.key_of(ident))
    why = place.own_folder(where.folder, make=True)
    if why is not None:
        print(f"ukdpack resident: {why}", file=sys.stderr)
        return 1
    lock_fd = os.open(where.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server of this identity runs
    for name in WARM:
        __import__(name)
    from ukdpack import cli

    cli.made_parser = cli.build_parser()
    # What is imported stays as it is: the collector need not walk it (nor so copy its
    # pages into every worker, which would write to them).
    gc.freeze()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(where.socket)  # a server that died left it; the lock says none runs
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(where.socket)
    os.chmod(where.socket, 0o600)
    listener.listen(64)
    server = Server(where, ident, listener, lock_fd)
    signal.signal(signal.SIGTERM, lambda s, f: server.retire())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _log(f"pid {os.getpid()} serving {where.socket}")
    server.serve()
    _log(f"pid {os.getpid()} ends")
    return 0


if __name__ == "__main__":
    sys.exit(main())
