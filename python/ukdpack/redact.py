"""The one place that keeps credentials out of what ukdpack prints or writes.

A credential reaches ukdpack as the userinfo of a URL (``redis://:pw@host/0``) or from
the environment (``$UKDPACK_REMOTE_CACHE_TOKEN``, ``$UKDPACK_REMOTE_CACHE_BASIC_AUTH``, and
remote execution's ``$UKDPACK_REMOTE_EXEC_TOKEN``, ``$UKDPACK_REMOTE_EXEC_BASIC_AUTH`` and
the values of ``$UKDPACK_REMOTE_EXEC_HEADERS``).
``redact`` blanks every one of them in a text, whatever form it takes there: as given,
percent-encoded or decoded, and escaped as ``repr`` or JSON write it (a token ending in
``\\r`` shows as ``tok\\r``), nested up to twice (the JSON of a message quoting a repr).
It works on the raw string, never on a parse of the URL: ``redis://:Xy/SECRET@host/0``
has no userinfo for ``urllib``, but everything up to its last ``@`` is blanked here.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Callable

from ukdpack.errors import UsageError, escape_controls, has_controls

TOKEN_ENV = "UKDPACK_REMOTE_CACHE_TOKEN"  # bearer token (HTTP)
BASIC_ENV = "UKDPACK_REMOTE_CACHE_BASIC_AUTH"  # user:password (HTTP basic, Redis ACL)
EXEC_TOKEN_ENV = "UKDPACK_REMOTE_EXEC_TOKEN"  # bearer token (remote execution, gRPC)
EXEC_BASIC_ENV = "UKDPACK_REMOTE_EXEC_BASIC_AUTH"  # user:password (remote execution)
#: ``NAME=VALUE`` lines, gRPC metadata of every remote-execution call (a farm's API key
#: header, BuildBuddy's ``x-buildbuddy-api-key``): each value is a secret
EXEC_HEADERS_ENV = "UKDPACK_REMOTE_EXEC_HEADERS"
BLANK = "***"

#: ``scheme://`` then anything up to the last ``@`` before a space: the userinfo, however
#: many ``/``, ``?``, ``#`` or ``@`` the password holds unencoded (over-blanking a path
#: holding an ``@`` is the safe side).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s]*@")

_urls: set[str] = set()
_lock = threading.Lock()


def userinfo(url: str) -> str | None:
    """The userinfo of a URL read off the raw string: between ``://`` and the last ``@``
    (or the whole head before the last ``@`` when there is no ``://``); None when no
    ``@``."""
    head, sep, rest = url.partition("://")
    body = rest if sep else head
    info, at, _ = body.rpartition("@")
    return info if at else None


def without_userinfo(url: str) -> tuple[str, str]:
    """(scheme with ``://``, everything after the userinfo) of a URL, from the raw string."""
    head, sep, rest = url.partition("://")
    body = rest if sep else head
    return (head + sep if sep else ""), body.rpartition("@")[2]


def remember_url(url: str) -> None:
    """Note a URL this run uses (the remote cache's): its credentials are blanked in
    everything printed from now on."""
    with _lock:
        _urls.add(url)


@functools.lru_cache(maxsize=16)
def _url_secrets(url: str) -> list[str]:
    info = userinfo(url)
    found: list[str] = []
    if info:
        user, colon, password = info.partition(":")
        # A password; a userinfo without one is a token (https://TOKEN@host) unless it is
        # too short to be one (a user name such as "ci" would blank every "ci" printed)
        found += [password, info] if colon else [user] if len(user) >= 4 else []
        if password or len(user) >= 4:  # as basic auth sends it
            found.append(_basic(f"{urllib.parse.unquote(user)}:"
                                f"{urllib.parse.unquote(password)}"))
    _, after = without_userinfo(url)
    query = after.partition("?")[2].partition("#")[0]
    if query:
        found.append(query)
        found += [v for _, v in urllib.parse.parse_qsl(query) if len(v) >= 4]
    return found


def secrets() -> list[str]:
    """Every credential known now: the remembered URLs' userinfo and query, the token and
    the basic-auth password of the environment (as given and stripped)."""
    with _lock:
        urls = sorted(_urls)
    found: list[str] = []
    for url in urls:
        found += _url_secrets(url)
    for token_env, basic_env in ((TOKEN_ENV, BASIC_ENV), (EXEC_TOKEN_ENV, EXEC_BASIC_ENV)):
        token = os.environ.get(token_env, "")
        basic = os.environ.get(basic_env, "")
        for s in (token, basic.partition(":")[2]):
            found += [s, s.strip()]
        if basic.partition(":")[2].strip():
            found.append(_basic(basic.strip()))
    for line in os.environ.get(EXEC_HEADERS_ENV, "").splitlines():
        value = line.partition("=")[2]
        # As a URL's token: a value too short to be a key ("x-debug=1") would blank
        # every "1" printed.
        if len(value.strip()) >= 4:
            found += [value, value.strip()]
    return [s for s in dict.fromkeys(found) if s]


def _basic(pair: str) -> str:
    """``user:password`` as an ``Authorization: Basic`` header carries it."""
    return base64.b64encode(pair.encode("utf-8", "surrogateescape")).decode("ascii")


_ESCAPES: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    lambda s: urllib.parse.quote(s, safe=""),
    urllib.parse.quote,
    urllib.parse.quote_plus,
    urllib.parse.unquote,
    lambda s: repr(s)[1:-1],
    lambda s: repr(s.encode("utf-8", "surrogateescape"))[2:-1],
    lambda s: json.dumps(s)[1:-1],
    lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
    escape_controls,
    lambda s: s.replace("'", "\\'").replace('"', '\\"'),
    lambda s: s.replace("/", "\\/"),  # JSON's optional escape of '/'
)


@functools.lru_cache(maxsize=64)
def _forms(secret: str) -> tuple[str, ...]:
    """Every form of ``secret`` a message may hold: each escape, and each escape of an
    escape; longest first, so a longer form is blanked whole."""
    first = {f(secret) for f in _ESCAPES}
    both = {g(f) for f in first for g in _ESCAPES}
    return tuple(sorted((s for s in first | both if s), key=len, reverse=True))


@functools.lru_cache(maxsize=16)
def _pattern(known: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for every form of every secret, longest first (at one place, the
    longest form is blanked whole)."""
    forms = sorted({f for s in known for f in _forms(s)}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, forms))) if forms else None


def _blank_userinfo(m: re.Match[str]) -> str:
    return m.group(1) + BLANK + "@"


def redactor() -> Callable[[str], str]:
    """``redact`` for many texts, with the credentials known now gathered once: a report
    of 10,000 kernels holds hundreds of thousands of strings, and gathering them (the
    environment, the remembered URLs) for each was most of writing the report."""
    pattern = _pattern(tuple(secrets()))

    def one(text: str) -> str:
        if "@" in text:  # a URL's userinfo ends in one
            text = _USERINFO.sub(_blank_userinfo, text)
        return pattern.sub(BLANK, text) if pattern is not None else text
    return one


def redact(text: str) -> str:
    """``text`` with every credential blanked: any URL's userinfo, and every known
    secret in every form (module docstring)."""
    return redactor()(text)


def redact_url(url: str) -> str:
    """A URL as messages show it: no userinfo, no query or fragment, controls escaped."""
    scheme, rest = without_userinfo(url)
    shown = scheme + ("***@" if userinfo(url) is not None else "") + \
        rest.partition("?")[0].partition("#")[0]
    return escape_controls(redact(shown))


def env_credential(name: str, *, spaces: bool = False) -> str:
    """A credential from the environment, stripped of surrounding whitespace (a token
    file saved with CRLF ends in ``\\r``); a usage error, naming none of it, when one
    holds a control character (or, unless ``spaces``, a space) inside."""
    value = os.environ.get(name, "").strip()
    if has_controls(value) or (not spaces and any(c.isspace() for c in value)):
        raise UsageError(f"${name}: holds a control character{'' if spaces else ' or a space'} "
                         "inside it (check the file it was read from); it is not shown here")
    return value
