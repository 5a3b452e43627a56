"""Where the resident server of this interpreter and installation listens.

One server serves one identity: the interpreter, its version, flags and module path
(what decides which modules an import finds) and the ``PYTHON*`` variables that
change how it runs. A client of another virtual environment, another ukdpack or
``PYTHONPATH`` finds another socket, and so another server.
"""

from __future__ import annotations

import os
import stat
import sys
import zlib

#: Opt in: ``UKDPACK_RESIDENT=1`` sends ``ukdpack pack`` to the resident server.
ENABLE_ENV = "UKDPACK_RESIDENT"
#: The folder of the sockets (default ``$XDG_RUNTIME_DIR/ukdpack`` or
#: ``/tmp/ukdpack-<uid>``); it must be the user's own and closed to others.
DIR_ENV = "UKDPACK_RESIDENT_DIR"
#: Seconds a server waits for its next pack before it ends (default 900).
IDLE_ENV = "UKDPACK_RESIDENT_IDLE"
DEFAULT_IDLE_S = 900.0


def enabled() -> bool:
    """Whether this process should hand ``pack`` to a resident server."""
    return os.environ.get(ENABLE_ENV, "").strip() == "1"


def identity() -> str:
    """The interpreter, its module path and the variables that change what it imports
    or how it reads and writes text (``PYTHON*``, the locale's).

    ``sys.path[0]`` is left out: under ``python -m`` it is the working folder, which
    the worker takes from each client."""
    # The locale too: the interpreter fixes its text encodings from it at start-up.
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith(("PYTHON", "LC_")) or k == "LANG")
    return "\0".join([os.path.realpath(sys.executable), sys.version, repr(tuple(sys.flags)),
                      repr(sys.path[1:]), repr(env)])


def key_of(ident: str) -> str:
    """A short name for ``ident`` in socket paths. Not a cryptographic digest (hashlib
    costs the client milliseconds to import): two identities that share a name only
    share a socket, and the server refuses a client whose whole identity differs."""
    data = ident.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def socket_dir() -> str:
    """The folder of the servers' sockets, as configured or by default (not made)."""
    given = os.environ.get(DIR_ENV, "").strip()
    if given:
        return given
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "ukdpack")
    return f"/tmp/ukdpack-{os.getuid()}"


def idle_seconds() -> float:
    """How long a server waits for its next pack (``UKDPACK_RESIDENT_IDLE``)."""
    try:
        value = float(os.environ.get(IDLE_ENV, "") or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


class Place:
    """One identity's socket, lock and log in the socket folder (``key``: its
    ``key_of``). A plain class, not a
    dataclass: the client runs before anything else is imported, and ``dataclasses``
    (with ``inspect``) would cost it several milliseconds."""

    __slots__ = ("folder", "key")

    def __init__(self, folder: str, key: str) -> None:
        self.folder, self.key = folder, key

    @property
    def socket(self) -> str:
        return os.path.join(self.folder, f"{self.key}.sock")

    @property
    def lock(self) -> str:
        return os.path.join(self.folder, f"{self.key}.lock")

    @property
    def log(self) -> str:
        return os.path.join(self.folder, f"{self.key}.log")


def here() -> Place:
    """This process's place (the folder is not checked: see ``own_folder``)."""
    return Place(socket_dir(), key_of(identity()))


def own_folder(folder: str, make: bool) -> str | None:
    """None when ``folder`` is fit for sockets (the user's own, closed to group and
    others), made first if ``make``; else why not. Another user's folder, or one others
    may write to, could hold a socket that is not ours."""
    try:
        if make:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist"
    except OSError as e:
        return f"cannot use {folder}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != os.getuid():
        return f"{folder} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o077:
        return f"{folder} is open to other users (mode {stat.S_IMODE(st.st_mode):o}; expected 700)"
    return None
