"""What ``python -m ukdpack`` runs first under ``UKDPACK_RESIDENT=1``: hand ``pack`` to
the resident server, or say to run it here.

The server forks a worker that takes this process's standard streams, working folder,
environment, umask and arguments and runs the pack as this process would have; this
process forwards the stop signals to it and ends with its exit status. Anything that
keeps the hand-over from starting (no server yet, another interpreter's server, a
socket folder that is not the user's own) runs the pack here instead: the resident
packer only ever saves time, it never changes what a pack does.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's enums: an import saved
import _socket
import os
import sys

from ukdpack.resident import place, wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The signals a pack ends on (``ukdpack.cli.STOP_SIGNALS``: SIGINT, SIGTERM, SIGHUP),
#: as numbers: ``signal`` (enums) is not imported here.
STOP_SIGNALS = (2, 15, 1)


def connect(path: str, timeout: float = wire.ANSWER_S) -> _socket.socket | None:
    """A connection to the server at ``path``; None when none listens there."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def ask(where: place.Place, message: dict[str, Any]) -> dict[str, Any] | None:
    """The server's one answer to ``message`` (``ping``, ``stop``); None when no server
    answers."""
    sock = connect(where.socket)
    if sock is None:
        return None
    try:
        wire.send(sock, message)
        return wire.receive(sock)[0]
    except (OSError, wire.WireError):
        return None
    finally:
        sock.close()


def start_server(where: place.Place) -> None:
    """Start the server of this interpreter and identity, detached, and do not wait: it
    serves the next pack (this one runs here). It ends by itself when idle."""
    import subprocess

    log = os.open(where.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        # The interpreter's own options (-X, -O, ...) as this process has them: the
        # server's identity must be this one's.
        argv = [sys.executable, *subprocess._args_from_interpreter_flags(),  # type: ignore[attr-defined]
                "-m", "ukdpack.resident.server"]
        subprocess.Popen(argv, cwd=where.folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True, close_fds=True)
    except OSError:
        pass  # no server: every pack runs in its own process, as without the setting
    finally:
        os.close(log)


def _streams() -> list[tuple[str, str] | None]:
    return [(s.encoding, s.errors or "strict") if s is not None and hasattr(s, "encoding")
            else None for s in (sys.stdin, sys.stdout, sys.stderr)]


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie whose parent died is done running)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2][1:2] not in (b"Z", b"X")
    except OSError:
        return False


def _wait_gone(pid: int, within: float) -> None:
    import time

    end = time.monotonic() + within
    while _running(pid) and time.monotonic() < end:
        time.sleep(0.05)


def delegate(argv: list[str]) -> int | None:
    """Run the command ``argv`` (``pack ...``) in a worker of the resident server and
    return its exit status; None to run it in this process instead (no server answered,
    and one has been started for the next pack; or the server could not take it)."""
    ident = place.identity()
    where = place.Place(place.socket_dir(), place.key_of(ident))
    if place.own_folder(where.folder, make=True) is not None:
        return None  # `ukdpack resident status` says why
    sock = connect(where.socket)
    if sock is None:
        start_server(where)
        return None
    try:
        return _hand_over(sock, ident, argv)
    finally:
        sock.close()


def _hand_over(sock: _socket.socket, ident: str, argv: list[str]) -> int | None:
    try:
        cwd = os.getcwd()
        ignored = [s for s in STOP_SIGNALS if _signal.getsignal(s) == _signal.SIG_IGN]
        request = {"op": "pack", "identity": ident, "argv": [sys.argv[0], *argv], "cwd": cwd,
                   "env": dict(os.environ), "umask": _umask(), "nice": os.nice(0),
                   "ignored": ignored,
                   "streams": _streams()}
        wire.send(sock, request, [0, 1, 2])
        reply, _ = wire.receive(sock)
    except (OSError, wire.WireError):
        return None  # nothing started: run it here
    except KeyboardInterrupt:
        # Ctrl-C before the worker was known: the server sees this connection close and
        # stops the worker, if it started one.
        print("ukdpack: interrupted", file=sys.stderr)
        return 130
    pid = reply.get("pid")
    if not isinstance(pid, int):
        return None  # refused (another identity, or ukdpack changed): run it here

    def forward(signum: int, frame: object) -> None:
        try:  # noqa: SIM105 (contextlib: an import the client saves)
            os.kill(pid, signum)
        except OSError:
            pass

    previous = {s: _signal.signal(s, forward) for s in STOP_SIGNALS if s not in ignored}
    try:
        sock.settimeout(None)  # a pack takes as long as it takes
        while True:
            try:
                final, _ = wire.receive(sock)
                break
            except InterruptedError:
                continue
    except (OSError, wire.WireError) as e:
        # Nobody is left to report the pack's end: stop it (as SIGTERM stops a pack: its
        # staging removed) rather than leave it running unwatched.
        forward(15, None)
        _wait_gone(pid, 30.0)
        print(f"ukdpack: the resident packer's server went away while its worker (pid {pid}) "
              f"ran this pack ({e}); the pack was stopped: run it again", file=sys.stderr)
        return 1
    finally:
        for s, handler in previous.items():
            _signal.signal(s, handler)
    if isinstance(final.get("exit"), int):
        return int(final["exit"])
    signum = final.get("signal")
    if isinstance(signum, int):
        return 128 + signum  # as a shell reports a process a signal ended
    return 1
