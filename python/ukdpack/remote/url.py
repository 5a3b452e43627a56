"""The address of a remote-execution service: ``grpc://HOST:PORT[/INSTANCE]`` (plain
text, a farm on a trusted network or loopback) or ``grpcs://HOST:PORT[/INSTANCE]``
(TLS, the system's roots). Credentials come as the team cache's do: the URL's userinfo
(``grpcs://TOKEN@host:443`` a bearer token, ``grpcs://user:password@host:443`` basic
auth) or the environment (``$UKDPACK_REMOTE_EXEC_TOKEN``,
``$UKDPACK_REMOTE_EXEC_BASIC_AUTH`` as ``user:password``); they travel as gRPC metadata
(``authorization``) and are never printed (ukdpack.redact)."""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass

from ukdpack.errors import UsageError
from ukdpack.redact import (
    EXEC_BASIC_ENV,
    EXEC_TOKEN_ENV,
    env_credential,
    redact_url,
    remember_url,
    userinfo,
    without_userinfo,
)

SCHEMES = ("grpc", "grpcs")


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
