"""The remote cache's servers (docs/remote-cache.md): get, put and test records by kind
(``ac``, ``cas``) and key over HTTP(S) (httpx, one client: connections reused) or Redis
(redis-py). Every failure is a RemoteFault whose message names no credential."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ukdpack.errors import UsageError

SCHEMES = ("http", "https", "redis", "rediss")

TOKEN_ENV = "UKDPACK_REMOTE_CACHE_TOKEN"  # bearer token (HTTP)
BASIC_ENV = "UKDPACK_REMOTE_CACHE_BASIC_AUTH"  # user:password (HTTP basic, Redis ACL)


class RemoteFault(Exception):
    """The server could not be used (its message names no credential)."""


def redact(url: str) -> str:
    """The URL without its userinfo and query (where credentials live), for messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    user = "***@" if parts.username or parts.password else ""
    return urllib.parse.urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def check_url(url: str) -> None:
    """Refuse (a usage error) a URL the tier cannot use, or one whose client is missing."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise UsageError(f"--remote-cache {redact(url)}: expected an http://, https:// or "
                         "redis:// URL with a host, found "
                         + (f"scheme '{parts.scheme}'" if parts.scheme else "no scheme"))
    module = "redis" if parts.scheme.startswith("redis") else "httpx"
    try:
        __import__(module)
    except ImportError:
        raise UsageError(f"--remote-cache {redact(url)}: needs the Python package '{module}', "
                         "which is not installed: pip install 'ukdpack[remote]'") from None


class Store(Protocol):
    """Get, put and test records by kind (``ac`` or ``cas``) and key."""

    def get(self, kind: str, key: str) -> bytes | None: ...
    def has(self, kind: str, key: str) -> bool: ...
    def put(self, kind: str, key: str, data: bytes) -> None: ...
    def keys(self, kind: str) -> Iterator[str]: ...
    def close(self) -> None: ...


def secrets_of(url: str) -> list[str]:
    """The credentials a message must never show: the URL's password, the token, the
    basic-auth password."""
    parts = urllib.parse.urlsplit(url)
    found = [parts.password or "", os.environ.get(TOKEN_ENV, ""),
             os.environ.get(BASIC_ENV, "").partition(":")[2]]
    return [s for s in found if s]


def scrub(text: str, secrets: list[str]) -> str:
    """A client's message with every credential blanked (some name the URL they used)."""
    for s in secrets:
        text = text.replace(s, "***").replace(urllib.parse.quote(s, safe=""), "***")
    return text


class HttpStore:
    """``<url>/ac/<key>`` and ``<url>/cas/<sha256>`` through one httpx client (connections
    reused). Auth: the URL's userinfo or ``$UKDPACK_REMOTE_CACHE_BASIC_AUTH`` (basic), or
    ``$UKDPACK_REMOTE_CACHE_TOKEN`` (bearer)."""

    def __init__(self, url: str, timeout: float) -> None:
        import httpx

        self._httpx = httpx
        parts = urllib.parse.urlsplit(url)
        self.secrets_of = secrets_of(url)
        auth: httpx.BasicAuth | None = None
        if parts.username is not None or parts.password is not None:
            auth = httpx.BasicAuth(urllib.parse.unquote(parts.username or ""),
                                   urllib.parse.unquote(parts.password or ""))
        elif os.environ.get(BASIC_ENV):
            user, _, password = os.environ[BASIC_ENV].partition(":")
            auth = httpx.BasicAuth(user, password)
        headers = {"User-Agent": "ukdpack-remote-cache"}
        if os.environ.get(TOKEN_ENV):
            headers["Authorization"] = f"Bearer {os.environ[TOKEN_ENV]}"
        netloc = parts.netloc.rpartition("@")[2]
        self._base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"),
                                              "", "")) + "/"
        self._client = httpx.Client(timeout=timeout, auth=auth, headers=headers,
                                    follow_redirects=True)

    def _request(self, method: str, path: str, content: bytes | None = None) -> Any:
        try:
            r = self._client.request(method, self._base + path, content=content)
        except self._httpx.HTTPError as e:
            raise RemoteFault(scrub(f"{type(e).__name__}: {e}", self.secrets_of)
                              .rstrip(": ")) from None
        if r.status_code in (401, 403):
            raise RemoteFault(f"HTTP {r.status_code} (check {TOKEN_ENV} or {BASIC_ENV})")
        if r.status_code >= 500:
            raise RemoteFault(f"HTTP {r.status_code} {r.reason_phrase}")
        return r

    def get(self, kind: str, key: str) -> bytes | None:
        r = self._request("GET", f"{kind}/{key}")
        if r.status_code == 404:
            return None
        if r.status_code != 200:
            raise RemoteFault(f"HTTP {r.status_code} for GET {kind}/")
        data: bytes = r.content
        return data

    def has(self, kind: str, key: str) -> bool:
        r = self._request("HEAD", f"{kind}/{key}")
        return bool(r.status_code == 200)

    def put(self, kind: str, key: str, data: bytes) -> None:
        r = self._request("PUT", f"{kind}/{key}", data)
        if r.status_code not in (200, 201, 204):
            raise RemoteFault(f"HTTP {r.status_code} for PUT {kind}/ (does the server "
                              "accept PUT? nginx: dav_methods PUT)")

    def keys(self, kind: str) -> Iterator[str]:
        """The keys of a folder, from a JSON listing (nginx: ``autoindex on;
        autoindex_format json;``); a server that lists nothing is a fault."""
        r = self._request("GET", f"{kind}/")
        if r.status_code == 404:
            return
        try:
            listing = json.loads(r.content)
        except ValueError:
            listing = None
        if r.status_code != 200 or not isinstance(listing, list):
            raise RemoteFault(f"the server gives no JSON listing of {kind}/ (HTTP "
                              f"{r.status_code}); stats and verify need one (nginx: "
                              "autoindex on; autoindex_format json;)")
        for item in listing:
            if isinstance(item, dict) and item.get("type") == "file" and \
                    isinstance(item.get("name"), str):
                yield item["name"]

    def close(self) -> None:
        self._client.close()


class RedisStore:
    """Keys ``ukdpack:ac:<key>`` and ``ukdpack:cas:<sha256>`` through redis-py (a
    connection pool). Auth: the URL's userinfo or ``$UKDPACK_REMOTE_CACHE_BASIC_AUTH``."""

    PREFIX = "ukdpack"

    def __init__(self, url: str, timeout: float) -> None:
        import redis

        self._redis = redis
        self.secrets_of = secrets_of(url)
        extra: dict[str, Any] = {}
        parts = urllib.parse.urlsplit(url)
        if parts.password is None and os.environ.get(BASIC_ENV):
            user, _, password = os.environ[BASIC_ENV].partition(":")
            extra = {"username": user or None, "password": password}
        self._client = redis.Redis.from_url(url, socket_timeout=timeout,
                                            socket_connect_timeout=timeout, **extra)

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self._redis.RedisError as e:
            raise RemoteFault(scrub(f"{type(e).__name__}: {e}", self.secrets_of)) from None

    def _key(self, kind: str, key: str) -> str:
        return f"{self.PREFIX}:{kind}:{key}"

    def get(self, kind: str, key: str) -> bytes | None:
        found = self._call(lambda: self._client.get(self._key(kind, key)))
        return bytes(found) if found is not None else None

    def has(self, kind: str, key: str) -> bool:
        return bool(self._call(lambda: self._client.exists(self._key(kind, key))))

    def put(self, kind: str, key: str, data: bytes) -> None:
        self._call(lambda: self._client.set(self._key(kind, key), data))

    def keys(self, kind: str) -> Iterator[str]:
        prefix = self._key(kind, "")
        found = self._call(lambda: list(self._client.scan_iter(match=prefix + "*",
                                                               count=1000)))
        for k in found:
            yield (k.decode() if isinstance(k, bytes) else str(k))[len(prefix):]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing never matters to a pack
            self._client.close()


def open_store(url: str, timeout: float) -> Store:
    """The store a (checked) URL names."""
    if urllib.parse.urlsplit(url).scheme.startswith("redis"):
        return RedisStore(url, timeout)
    return HttpStore(url, timeout)
