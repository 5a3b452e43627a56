"""The remote cache's servers (docs/remote-cache.md): get, put and test records by kind
(``ac``, ``cas``) and key over HTTP(S) (httpx, one client: connections reused) or Redis
(redis-py). Every failure is a RemoteFault whose message names no credential (redact.py).

The server is untrusted (docs/hostile-input.md, "The remote cache as an attacker sees
it"): every request has a total deadline (not only one per read: a server dripping a
byte a second would otherwise hold a pack forever), every read a size limit, and names
are checked before they become a URL or a key."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ukdpack.errors import UsageError, escape_controls, has_controls
from ukdpack.redact import (
    BASIC_ENV,
    TOKEN_ENV,
    env_credential,
    redact,
    redact_url,
    remember_url,
    userinfo,
)

SCHEMES = ("http", "https", "redis", "rediss")
KINDS = ("ac", "cas")

#: Bytes an action record may have: 8 compiles of a few thousand headers each fit.
MAX_ENTRY_BYTES = 16 << 20
#: Bytes of an HTTP listing of ``ac/``, and keys a listing may name (stats, verify).
MAX_LISTING_BYTES = 64 << 20
MAX_LISTED_KEYS = 1_000_000

#: A record's name: a sha256 in hex (action keys and objects alike).
KEY = re.compile(r"[0-9a-f]{64}")

T = TypeVar("T")


class RemoteFault(Exception):
    """The server could not be used (its message names no credential)."""

    def __init__(self, message: str) -> None:
        super().__init__(escape_controls(redact(message)))


class Oversize(Exception):
    """A record larger than its limit: damage (a pack ignores it), not a fault."""


def check_url(url: str) -> None:
    """Refuse (a usage error) a URL the tier cannot use, or one whose client is missing;
    check the credentials in the environment; remember the URL's credentials so nothing
    printed from now on shows them."""
    remember_url(url)
    shown = redact_url(url)
    if has_controls(url) or any(c.isspace() for c in url):
        raise UsageError(f"--remote-cache {shown}: expected a URL without spaces or control "
                         "characters")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise UsageError(f"--remote-cache {shown}: expected an http://, https:// or "
                         "redis:// URL with a host, found "
                         + (f"scheme '{escape_controls(redact(parts.scheme))}'"
                            if parts.scheme else "no scheme"))
    # urllib takes the userinfo up to the first '/', '?' or '#'; a password holding one
    # unencoded would be cut there and sent to the wrong host as a path.
    raw = userinfo(url)
    parsed = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else None
    if raw != parsed:
        raise UsageError(f"--remote-cache {shown}: the part before its last '@' holds '/', "
                         "'?' or '#' (a user name or password with them unencoded, or an '@' "
                         "in the path): percent-encode them (%2F, %3F, %23, %40)")
    try:
        parts.port  # noqa: B018 (raises on a port that is no number)
    except ValueError:
        raise UsageError(f"--remote-cache {shown}: expected a port number after the host"
                         ) from None
    if not parts.hostname:
        raise UsageError(f"--remote-cache {shown}: expected an http://, https:// or "
                         "redis:// URL with a host, found none")
    module = "redis" if parts.scheme.startswith("redis") else "httpx"
    try:
        __import__(module)
    except ImportError:
        raise UsageError(f"--remote-cache {shown}: needs the Python package '{module}', "
                         "which is not installed: pip install 'ukdpack[remote]'") from None
    env_credential(TOKEN_ENV)
    env_credential(BASIC_ENV, spaces=True)


class Store(Protocol):
    """Get, put and test records by kind (``ac`` or ``cas``) and key (a sha256 in hex).
    ``get`` returns at most ``limit`` bytes (Oversize beyond); every call ends within the
    store's deadline (RemoteFault)."""

    def get(self, kind: str, key: str, limit: int) -> bytes | None: ...
    def has(self, kind: str, key: str) -> bool: ...
    def put(self, kind: str, key: str, data: bytes) -> None: ...
    def keys(self, kind: str) -> list[str]: ...
    def close(self) -> None: ...


def _name(kind: str, key: str) -> str:
    """``kind/key`` once both are checked: a name from a hostile record never becomes a
    URL or a key (a control character in a URL made the client raise)."""
    if kind not in KINDS or not KEY.fullmatch(key):
        raise Oversize(f"{kind}/{escape_controls(key[:80])} is no record name")
    return f"{kind}/{key}"


class _Deadline:
    """Runs each request on a thread of its own and waits for it at most ``seconds``: a
    client's timeouts bound each read, not the request (a server answering a byte at a
    time passes every one). A request still running then is abandoned (its thread is a
    daemon, and the tier is off from then on) and the store is not closed under it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.abandoned = False

    def run(self, what: str, fn: Callable[[], T]) -> T:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # handed to the caller, never printed by the thread
                box["error"] = e

        t = threading.Thread(target=call, daemon=True, name="ukdpack-remote-request")
        t.start()
        t.join(self.seconds)
        if t.is_alive():
            self.abandoned = True
            raise RemoteFault(f"no whole answer to {what} within {self.seconds:g} s "
                              "(--remote-cache-timeout)")
        if "error" in box:
            raise box["error"]
        value: T = box["value"]
        return value


class HttpStore:
    """``<url>/ac/<key>`` and ``<url>/cas/<sha256>`` through one httpx client (connections
    reused). Auth: the URL's userinfo or ``$UKDPACK_REMOTE_CACHE_BASIC_AUTH`` (basic), or
    ``$UKDPACK_REMOTE_CACHE_TOKEN`` (bearer)."""

    def __init__(self, url: str, timeout: float) -> None:
        import httpx

        self._httpx = httpx
        self._deadline = _Deadline(timeout)
        parts = urllib.parse.urlsplit(url)
        auth: httpx.BasicAuth | None = None
        basic = env_credential(BASIC_ENV, spaces=True)
        if parts.username is not None or parts.password is not None:
            auth = httpx.BasicAuth(urllib.parse.unquote(parts.username or ""),
                                   urllib.parse.unquote(parts.password or ""))
        elif basic:
            user, _, password = basic.partition(":")
            auth = httpx.BasicAuth(user, password)
        # identity: the bytes read are the bytes counted (no gzip expanding past a limit)
        headers = {"User-Agent": "ukdpack-remote-cache", "Accept-Encoding": "identity"}
        token = env_credential(TOKEN_ENV)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        netloc = parts.netloc.rpartition("@")[2]
        self._base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"),
                                              "", "")) + "/"
        self._client = httpx.Client(timeout=timeout, auth=auth, headers=headers,
                                    follow_redirects=True)

    def _send(self, method: str, path: str, content: bytes | None = None,
              limit: int = 0) -> tuple[int, bytes]:
        """(status, body of at most ``limit`` bytes) within the deadline."""
        def call() -> tuple[int, bytes]:
            with self._client.stream(method, self._base + path, content=content) as r:
                self._check(r)
                if r.status_code != 200 or method != "GET":
                    return r.status_code, b""
                length = r.headers.get("content-length", "")
                if length.isdigit() and int(length) > limit:
                    raise Oversize(f"{path} is larger than {limit} bytes")
                body = bytearray()
                for chunk in r.iter_raw():
                    body += chunk
                    if len(body) > limit:
                        raise Oversize(f"{path} is larger than {limit} bytes")
                return r.status_code, bytes(body)

        try:
            return self._deadline.run(f"{method} {path.partition('/')[0]}/", call)
        except (RemoteFault, Oversize):
            raise
        except Exception as e:  # httpx's errors, and whatever else the client raises
            raise RemoteFault(f"{type(e).__name__}: {e}".rstrip(": ")) from None

    def _check(self, r: Any) -> None:
        if r.status_code in (401, 403):
            raise RemoteFault(f"HTTP {r.status_code} (check {TOKEN_ENV} or {BASIC_ENV})")
        if r.status_code >= 500:
            raise RemoteFault(f"HTTP {r.status_code} {str(r.reason_phrase)[:80]}")

    def get(self, kind: str, key: str, limit: int) -> bytes | None:
        path = _name(kind, key)
        status, body = self._send("GET", path, limit=limit)
        if status == 404:
            return None
        if status != 200:
            raise RemoteFault(f"HTTP {status} for GET {kind}/")
        return body

    def has(self, kind: str, key: str) -> bool:
        return self._send("HEAD", _name(kind, key))[0] == 200

    def put(self, kind: str, key: str, data: bytes) -> None:
        status, _ = self._send("PUT", _name(kind, key), data)
        if status not in (200, 201, 204):
            raise RemoteFault(f"HTTP {status} for PUT {kind}/ (does the server "
                              "accept PUT? nginx: dav_methods PUT)")

    def keys(self, kind: str) -> list[str]:
        """The record names of a folder, from a JSON listing (nginx: ``autoindex on;
        autoindex_format json;``) of at most MAX_LISTING_BYTES; names that are no record
        name are left out; a server that lists nothing is a fault."""
        try:
            status, body = self._send("GET", f"{kind}/", limit=MAX_LISTING_BYTES)
        except Oversize:
            raise RemoteFault(f"the listing of {kind}/ is larger than {MAX_LISTING_BYTES} "
                              "bytes") from None
        if status == 404:
            return []
        try:
            listing = json.loads(body)
        except (ValueError, RecursionError):  # deep nesting included
            listing = None
        if status != 200 or not isinstance(listing, list):
            raise RemoteFault(f"the server gives no JSON listing of {kind}/ (HTTP "
                              f"{status}); stats and verify need one (nginx: "
                              "autoindex on; autoindex_format json;)")
        names = [item["name"] for item in listing
                 if isinstance(item, dict) and item.get("type") == "file"
                 and isinstance(item.get("name"), str) and KEY.fullmatch(item["name"])]
        return _capped(kind, names)

    def close(self) -> None:
        if not self._deadline.abandoned:  # a request still running keeps its client
            self._client.close()


def _capped(kind: str, names: list[str]) -> list[str]:
    if len(names) > MAX_LISTED_KEYS:
        raise RemoteFault(f"the listing of {kind}/ names more than {MAX_LISTED_KEYS} records")
    return names


class RedisStore:
    """Keys ``ukdpack:ac:<key>`` and ``ukdpack:cas:<sha256>`` through redis-py (a
    connection pool). Auth: the URL's userinfo or ``$UKDPACK_REMOTE_CACHE_BASIC_AUTH``.
    Values are read with GETRANGE, so a value larger than its limit is never sent whole."""

    PREFIX = "ukdpack"

    def __init__(self, url: str, timeout: float) -> None:
        import redis

        self._redis = redis
        self._deadline = _Deadline(timeout)
        extra: dict[str, Any] = {}
        parts = urllib.parse.urlsplit(url)
        basic = env_credential(BASIC_ENV, spaces=True)
        if parts.password is None and basic:
            user, _, password = basic.partition(":")
            extra = {"username": user or None, "password": password}
        try:
            self._client = redis.Redis.from_url(url, socket_timeout=timeout,
                                                socket_connect_timeout=timeout, **extra)
        except Exception as e:  # options it refuses (a db that is no number, ...)
            raise RemoteFault(f"{type(e).__name__}: {e}") from None

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return self._deadline.run(what, fn)
        except RemoteFault:
            raise
        except Exception as e:  # redis-py's errors, and whatever else the client raises
            raise RemoteFault(f"{type(e).__name__}: {e}") from None

    def _key(self, kind: str, key: str) -> str:
        return f"{self.PREFIX}:{_name(kind, key).replace('/', ':')}"

    def get(self, kind: str, key: str, limit: int) -> bytes | None:
        name = self._key(kind, key)
        # GETRANGE of a missing key is empty, and no record is empty: both are a miss.
        found = self._call(f"GET {kind}:", lambda: self._client.getrange(name, 0, limit))
        if not found:
            return None
        if not isinstance(found, bytes) or len(found) > limit:
            raise Oversize(f"{kind}:{key[:16]} is larger than {limit} bytes")
        return found

    def has(self, kind: str, key: str) -> bool:
        name = self._key(kind, key)
        return bool(self._call(f"EXISTS {kind}:", lambda: self._client.exists(name)))

    def put(self, kind: str, key: str, data: bytes) -> None:
        name = self._key(kind, key)
        self._call(f"SET {kind}:", lambda: self._client.set(name, data))

    def keys(self, kind: str) -> list[str]:
        """The record names under ``kind``, by SCAN (each call within the deadline), at
        most MAX_LISTED_KEYS; names that are no record name are left out."""
        prefix = f"{self.PREFIX}:{kind}:"
        names: list[str] = []
        cursor: Any = 0
        while True:
            cursor, found = self._call(f"SCAN {kind}:", functools.partial(
                self._client.scan, cursor, match=prefix + "*", count=1000))
            for k in found:
                name = (k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k))
                if KEY.fullmatch(name[len(prefix):]):
                    names.append(name[len(prefix):])
            _capped(kind, names)
            if not cursor:
                return names

    def close(self) -> None:
        if not self._deadline.abandoned:
            with contextlib.suppress(Exception):  # closing never matters to a pack
                self._client.close()


def open_store(url: str, timeout: float) -> Store:
    """The store a (checked) URL names; RemoteFault when its client refuses it."""
    if urllib.parse.urlsplit(url).scheme.startswith("redis"):
        return RedisStore(url, timeout)
    try:
        return HttpStore(url, timeout)
    except UsageError:
        raise
    except Exception as e:
        raise RemoteFault(f"{type(e).__name__}: {e}") from None
