"""The messages between a client and the resident server: a 4-byte little-endian
length, then a ``marshal``-ed dict of plain values (both ends are the same interpreter:
the socket is named by its identity, which the server checks). A pack request carries
the client's standard streams as file descriptors (``SCM_RIGHTS``).

Built on ``_socket``, not ``socket``: the client runs before anything else is imported,
and ``socket`` builds its enums on import (tens of milliseconds of CPU on some
interpreters), which is the start-up the resident packer is there to save.
"""

from __future__ import annotations

import _socket
import marshal
import os
import sys

# Not ``typing.TYPE_CHECKING``: importing typing costs the client milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Sock = _socket.socket

#: Seconds either end waits for the other's answer once connected (it answers at once:
#: the server forks, the client has sent its request).
ANSWER_S = 10.0
#: A message larger than this is no message of ours (an environment of some MiB).
MAX_MESSAGE = 16 << 20
_FD_BYTES = 4  # a C int in SCM_RIGHTS data


class WireError(Exception):
    """The other end closed, or sent something that is not a message of ours."""


def send(sock: Sock, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send ``message``, with ``fds`` passed along when given."""
    body = marshal.dumps(message)
    data = len(body).to_bytes(4, "little") + body
    if fds:
        rights = b"".join(fd.to_bytes(_FD_BYTES, sys.byteorder, signed=True) for fd in fds)
        sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    else:
        sent = sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def _more(sock: Sock, buffer: bytearray, count: int) -> None:
    """Read until ``buffer`` holds ``count`` bytes."""
    while len(buffer) < count:
        chunk = sock.recv(min(count - len(buffer), 1 << 20))
        if not chunk:
            raise WireError("the other end closed in the middle of a message")
        buffer += chunk


def receive(sock: Sock, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """The next message and the descriptors that came with it (at most ``max_fds``;
    any beyond are closed). WireError when the other end has closed."""
    fds: list[int] = []
    if max_fds:
        data, ancillary, _, _ = sock.recvmsg(65536, _socket.CMSG_SPACE(max_fds * _FD_BYTES))
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % _FD_BYTES
                fds += [int.from_bytes(payload[i:i + _FD_BYTES], sys.byteorder, signed=True)
                        for i in range(0, usable, _FD_BYTES)]
    else:
        data = sock.recv(65536)
    try:
        if not data:
            raise WireError("the other end closed")
        buffer = bytearray(data)
        _more(sock, buffer, 4)
        size = int.from_bytes(buffer[:4], "little")
        if size > MAX_MESSAGE:
            raise WireError(f"a message of {size} bytes (at most {MAX_MESSAGE})")
        _more(sock, buffer, 4 + size)
        if len(buffer) != 4 + size:
            raise WireError("more bytes than the message holds")
        try:
            message = marshal.loads(bytes(buffer[4:]))
        except (EOFError, ValueError, TypeError) as e:
            raise WireError(f"not a message: {e}") from e
        if not isinstance(message, dict):
            raise WireError("not a message: not a dict")
    except BaseException:
        for fd in fds:
            close_quietly(fd)
        raise
    for fd in fds[max_fds:]:
        close_quietly(fd)
    return message, fds[:max_fds]


def close_quietly(fd: int) -> None:
    """Close ``fd``, already closed or not."""
    try:  # noqa: SIM105 (contextlib: an import the client saves)
        os.close(fd)
    except OSError:
        pass
