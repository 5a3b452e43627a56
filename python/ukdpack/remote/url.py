"""The address of a remote-execution service: ``grpc://HOST:PORT[/INSTANCE]`` (plain
text, a farm on a trusted network or loopback) or ``grpcs://HOST:PORT[/INSTANCE]``
(TLS, the system's roots). Credentials come as the team cache's do: the URL's userinfo
(``grpcs://TOKEN@host:443`` a bearer token, ``grpcs://user:password@host:443`` basic
auth) or the environment (``$UKDPACK_REMOTE_EXEC_TOKEN``,
``$UKDPACK_REMOTE_EXEC_BASIC_AUTH`` as ``user:password``); they travel as gRPC metadata
(``authorization``) and are never printed (ukdpack.redact)."""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from dataclasses import dataclass

from ukdpack.errors import UsageError, has_controls
from ukdpack.redact import (
    EXEC_BASIC_ENV,
    EXEC_HEADERS_ENV,
    EXEC_TOKEN_ENV,
    env_credential,
    redact_url,
    remember_url,
    userinfo,
    without_userinfo,
)

SCHEMES = ("grpc", "grpcs")
#: What a gRPC metadata name may be (lower case once read: HTTP/2 header names are).
_HEADER_NAME = re.compile(r"[0-9a-z_.-]+")
#: Names gRPC or HTTP/2 keep for themselves, and the one the credentials above use.
_RESERVED = {"authorization": "it is the credential's own header: give the token in the URL "
                              f"or ${EXEC_TOKEN_ENV}",
             "content-type": "gRPC sets it", "te": "gRPC sets it", "user-agent": "gRPC sets it",
             "host": "gRPC sets it"}


@dataclass(frozen=True)
class ServiceUrl:
    """A parsed ``grpc[s]://`` address (``shown``: as messages may print it)."""

    secure: bool
    host: str
    port: int
    instance: str  # '' for the server's default instance
    shown: str  # no userinfo
    userinfo: str | None = None

    @property
    def target(self) -> str:
        """``HOST:PORT`` as gRPC dials it (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The ``authorization`` metadata of every call, from the URL's userinfo, else the
        environment; none without a credential."""
        info = self.userinfo
        if info:
            user, colon, password = info.partition(":")
            if colon:
                return (("authorization", "Basic " + _basic(
                    urllib.parse.unquote(user), urllib.parse.unquote(password))),)
            return (("authorization", "Bearer " + urllib.parse.unquote(user)),)
        token = env_credential(EXEC_TOKEN_ENV)
        if token:
            return (("authorization", "Bearer " + token),)
        basic = env_credential(EXEC_BASIC_ENV, spaces=True)
        if basic:
            user, _, password = basic.partition(":")
            return (("authorization", "Basic " + _basic(user, password)),)
        return ()


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def parse_url(url: str, what: str = "--remote-exec") -> ServiceUrl:
    """The parsed address, or a UsageError naming ``what`` (the URL shown redacted)."""
    remember_url(url)  # its credentials are blanked in everything printed from now on
    scheme, rest = without_userinfo(url)
    shown = redact_url(url)
    expect = "expected grpc://HOST:PORT[/INSTANCE] or grpcs://HOST:PORT[/INSTANCE]"
    if scheme.removesuffix("://").lower() not in SCHEMES:
        raise UsageError(f"{what} {shown}: {expect}")
    hostport, _, instance = rest.partition("/")
    parsed = urllib.parse.urlsplit("//" + hostport)
    try:
        port = parsed.port
    except ValueError:
        port = None
    if not parsed.hostname or port is None or "?" in rest or "#" in rest:
        raise UsageError(f"{what} {shown}: {expect} (a host and a port, no query)")
    instance = instance.strip("/")
    if any(part in ("", ".", "..") for part in instance.split("/")) and instance:
        raise UsageError(f"{what} {shown}: the instance name has an empty, '.' or '..' part")
    for name in (EXEC_TOKEN_ENV, EXEC_BASIC_ENV):  # a bad one is refused now, not mid-pack
        env_credential(name, spaces=name == EXEC_BASIC_ENV)
    return ServiceUrl(scheme.lower() == "grpcs://", parsed.hostname, port, instance, shown,
                      userinfo(url))


def exec_headers() -> tuple[tuple[str, str], ...]:
    """The metadata ``$UKDPACK_REMOTE_EXEC_HEADERS`` adds to every call: one ``NAME=VALUE``
    per line (a farm's API key header: BuildBuddy's ``x-buildbuddy-api-key=KEY``), names
    lower-cased. A usage error names the line and the header, never a value: every value
    is a secret (``ukdpack.redact``)."""
    out: list[tuple[str, str]] = []
    for number, line in enumerate(os.environ.get(EXEC_HEADERS_ENV, "").splitlines(), 1):
        if not line.strip():
            continue
        name, eq, value = line.partition("=")
        name, value = name.strip().lower(), value.strip()
        where = f"${EXEC_HEADERS_ENV}, line {number}"
        if not eq or not name or not _HEADER_NAME.fullmatch(name):
            raise UsageError(f"{where}: expected NAME=VALUE, a gRPC metadata name (letters, "
                             "digits, '-', '_', '.') then '=' and its value; the line is not "
                             "shown here")
        why = ("gRPC keeps names starting with grpc- for itself" if name.startswith("grpc-")
               else "a name ending in -bin carries binary values, which this does not send"
               if name.endswith("-bin") else _RESERVED.get(name))
        if why:
            raise UsageError(f"{where}: header {name!r} cannot be set here: {why}")
        if not value or has_controls(value) or not value.isascii():
            raise UsageError(f"{where}: header {name!r} needs a value of printable ASCII "
                             "characters, which gRPC metadata carries; its value is not shown "
                             "here")
        out.append((name, value))
    return tuple(out)
