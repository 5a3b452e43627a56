"""The remote compile cache as an attacker sees it (docs/hostile-input.md, "The remote
cache as an attacker sees it"): credentials never printed in any channel, a cache server
that cannot learn the client's files, servers that drip, flood, nest or name records with
control characters, and `dvc pull` with a deadline. Real nginx and Redis on loopback
(remote_servers.py) where the attack is a record; a small socket server of this file
where it is the protocol (each stops by itself within its lifetime)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pack_support import compiles, dvc_workspace
from remote_servers import Server, free_port, nginx, redis_server
from test_remote_cache import ARCHES, Machine, _remote_doc, _warnings, machine

from ukdpack.produce.remote import action_record

# ---------------------------------------------------------------- a hostile HTTP server
Reply = Callable[[socket.socket, str, str, dict[str, str]], None]


class HostileHttp:
    """An HTTP/1.1 server on 127.0.0.1 whose every answer ``reply`` writes (method, path,
    headers); it stops by itself after ``lifetime`` seconds. ``sent``: bytes written."""

    def __init__(self, reply: Reply, lifetime: float = 30.0) -> None:
        self.reply = reply
        self.sent = 0
        self._lock = threading.Lock()
        self._end = time.monotonic() + lifetime
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/"
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def alive(self) -> bool:
        return time.monotonic() < self._end

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def _serve(self) -> None:
        with self._listener:
            while self.alive:
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    continue
                threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            self.reply(conn, method, path, headers)


def echo_reply(server: HostileHttp) -> Reply:
    """503, its reason phrase echoing the credentials the client sent, as a proxy that
    quotes the request might."""
    def reply(conn: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
        echo = repr(headers.get("authorization", "")) + " " + path
        server.send(conn, f"HTTP/1.1 503 {echo}\r\nContent-Length: 0\r\n"
                          "Connection: close\r\n\r\n".encode("latin-1"))
    return reply


def drip_reply(server: HostileHttp) -> Reply:
    """A status line, then a header a byte every 0.2 s: every read is quick, the answer
    never ends (until the server's lifetime does)."""
    def reply(conn: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
        server.send(conn, b"HTTP/1.1 200 OK\r\nX-Drip: ")
        while server.alive:
            server.send(conn, b"a")
            time.sleep(0.2)
    return reply


def flood_reply(server: HostileHttp, total: int) -> Reply:
    """200 with no length and ``total`` bytes of body as fast as the client takes them."""
    def reply(conn: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
        server.send(conn, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        chunk = b"\0" * (1 << 16)
        for _ in range(total // len(chunk)):
            server.send(conn, chunk)
    return reply


def body_reply(server: HostileHttp, body: bytes) -> Reply:
    def reply(conn: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
        server.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    return reply


def _ukdpack(*args: str, env: dict[str, str] | None = None, timeout: float = 90
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", *args], capture_output=True,
                          text=True, check=False, timeout=timeout,
                          env={**os.environ, "HIP_PLATFORM": "amd", **(env or {})})


def _strict_json(text: str) -> object:
    """JSON as the standard has it: no NaN or Infinity."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------- High 1: credentials
def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: (id, URL with {port}, environment, what must never be printed)
SECRET_CASES = [
    ("password-with-slash", "http://u:Xy/SECRET@127.0.0.1:{port}/", {}, ["SECRET", "Xy/"]),
    ("redis-password-with-slash", "redis://:Xy/SECRET@127.0.0.1:{port}/0", {},
     ["SECRET", "Xy/"]),
    ("password-encoded", "http://u:p%2FSECRET%40x@127.0.0.1:{port}/", {},
     ["SECRET", _b64("u:p/SECRET@x")]),
    ("userinfo-token", "http://SECRETTOKEN@127.0.0.1:{port}/", {},
     ["SECRET", _b64("SECRETTOKEN:")]),
    ("query", "http://127.0.0.1:{port}/?token=SECRETQUERY", {}, ["SECRET"]),
    ("token-crlf", "http://127.0.0.1:{port}/", {"UKDPACK_REMOTE_CACHE_TOKEN": "SECRET-t0k\r"},
     ["SECRET"]),
    ("token-spaces", "http://127.0.0.1:{port}/",
     {"UKDPACK_REMOTE_CACHE_TOKEN": "  SECRET-t0k\n"}, ["SECRET"]),
    ("token-inner-newline", "http://127.0.0.1:{port}/",
     {"UKDPACK_REMOTE_CACHE_TOKEN": "SEC\r\nRET-t0k"}, ["SEC", "RET-t0k"]),
    ("basic-auth", "http://127.0.0.1:{port}/",
     {"UKDPACK_REMOTE_CACHE_BASIC_AUTH": "user:SECRET pw\r"},
     ["SECRET", _b64("user:SECRET pw")]),
]


@pytest.mark.parametrize(("url", "env", "hidden"), [c[1:] for c in SECRET_CASES],
                         ids=[c[0] for c in SECRET_CASES])
def test_no_channel_prints_a_credential(tmp_path: Path, url: str, env: dict[str, str],
                                        hidden: list[str]) -> None:
    """Every channel — pack's stderr and --json, cache stats and verify, argparse's usage
    error — against a server that echoes the credentials it is sent in its answer."""
    echo = HostileHttp(lambda *a: None, lifetime=60)
    echo.reply = echo_reply(echo)
    url = url.format(port=echo.url.split(":")[2].rstrip("/"))
    m = machine(tmp_path / "m")
    runs = {
        "pack": _ukdpack("pack", "--source-root", str(m.tree), "--out-root",
                         str(tmp_path / "out"), "--arch", "gfx90a", "--hipcc", str(m.hipcc),
                         "--cache-dir", str(m.cache), "--plain", "--json", "--remote-cache",
                         url, env=env),
        "stats": _ukdpack("cache", "stats", "--remote-cache", url, env=env),
        "verify": _ukdpack("cache", "verify", "--remote-cache", url, env=env),
        "usage": _ukdpack("pack", "--no-such-flag", url, env=env),
        "env": _ukdpack("pack", "--source-root", str(m.tree), "--out-root",
                        str(tmp_path / "out"), "--arch", "gfx90a", "--hipcc", str(m.hipcc),
                        "--cache-dir", str(m.cache), "--plain", "--json",
                        env={**env, "UKDPACK_REMOTE_CACHE": url}),
    }
    assert runs["usage"].returncode == 2
    for name, r in runs.items():
        assert r.returncode != 0 or name in ("pack", "env"), (name, r.stderr)
        assert "internal error" not in r.stderr, (name, r.stderr)
        for secret in hidden:
            assert secret not in r.stdout + r.stderr, (name, secret, r.stdout, r.stderr)
    if runs["pack"].returncode == 0:  # the tier went off; the pack compiled
        doc = _remote_doc(runs["pack"].stdout)
        assert doc["fault"] and "503" in str(doc["fault"]), doc
        assert "***" in str(doc["fault"]) or "authorization" not in str(doc["fault"])


def test_redact_blanks_every_form() -> None:
    """The one redaction function on the raw string and on escaped forms."""
    from ukdpack.redact import redact, redact_url, remember_url

    remember_url("redis://:Xy/SECRET@host/0")
    assert redact_url("redis://:Xy/SECRET@host/0") == "redis://***@host/0"
    for text in ("redis://:Xy/SECRET@host/0", "'Xy/SECRET'", "Xy%2FSECRET", '"Xy\\/SECRET"',
                 "b'Xy/SECRET'", json.dumps(json.dumps("Xy/SECRET"))):
        assert "SECRET" not in redact(f"error: {text} failed"), text
    os.environ["UKDPACK_REMOTE_CACHE_TOKEN"] = "tok-\u00e9t\u00e9-9\r"
    try:
        for form in (repr("tok-\u00e9t\u00e9-9\r"), json.dumps("tok-\u00e9t\u00e9-9\r"),
                     repr("tok-\u00e9t\u00e9-9\r".encode()), "tok-%C3%A9t%C3%A9-9"):
            assert "9" not in redact(form).replace("***", ""), form
    finally:
        del os.environ["UKDPACK_REMOTE_CACHE_TOKEN"]


def test_report_blanks_credentials_in_every_string(monkeypatch: pytest.MonkeyPatch) -> None:
    """A --json report gathers the credentials once for all its strings and blanks them
    in keys and nested values alike; a URL's userinfo goes whatever secrets are known."""
    from ukdpack.reports import print_report

    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_TOKEN", "tok-SECRET-42")
    out = io.StringIO()
    print_report({"kernels": [{"name": "x tok-SECRET-42 y"},
                              {"tok-SECRET-42": ["https://user:PW-77@host/path"]}],
                  "plain": "https://host/no-userinfo"}, out)
    text = out.getvalue()
    assert "SECRET" not in text and "PW-77" not in text, text
    doc = json.loads(text)
    assert doc["kernels"][0]["name"] == "x *** y"
    assert doc["kernels"][1] == {"***": ["https://***@host/path"]}
    assert doc["plain"] == "https://host/no-userinfo"


# ---------------------------------------------------------------- High 2: deps
@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from nginx(tmp_path_factory.mktemp("nginx"))


@pytest.fixture(scope="module")
def seeded(web: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Machine, dict[str, bytes]]:
    """Machine A packed read-write: the server's sound records."""
    web.clear()
    a = machine(tmp_path_factory.mktemp("a") / "m")
    rc, _, err, n = a.pack(a.tree.parent / "out", "--remote-cache", web.url, "--json")
    assert (rc, n) == (0, len(ARCHES)), err
    return a, web.records()


def _rewrite(web: Server, records: dict[str, bytes],
             change: Callable[[dict[str, object]], list[dict[str, object]]],
             spelled: Callable[[bytes], bytes] = lambda b: b) -> None:
    """The server's records with each action entry replaced by what ``change`` makes of it,
    sealed again under its key (the digest is no secret: any writer can seal), its bytes
    then ``spelled``."""
    web.clear()
    for name, data in records.items():
        if name.startswith("ac/"):
            key = name[3:]
            (entry,) = json.loads(data)["entries"]
            data = spelled(action_record(key, change(entry)))
        web.put(name, data)


@contextlib.contextmanager
def _poisoned(web: Server, records: dict[str, bytes],
              change: Callable[[dict[str, object]], list[dict[str, object]]],
              spelled: Callable[[bytes], bytes] = lambda b: b) -> Iterator[None]:
    """The server's records rewritten (``_rewrite``) for the block, put back after."""
    _rewrite(web, records, change, spelled)
    try:
        yield
    finally:
        _rewrite(web, records, lambda e: [e])


def _read_pack(m: Machine, out: Path, web: Server) -> tuple[int, str, str, int]:
    """A presubmit's pack: read mode, --json."""
    return _pack(m, out, "--remote-cache", web.url, "--json", "--remote-cache-mode", "read")


def _pack(m: Machine, out: Path, *extra: str) -> tuple[int, str, str, int]:
    """Machine.pack, stopped after 90 s: an old client hangs on a FIFO or /dev/zero."""
    before = len(compiles(m.log))
    r = _ukdpack("pack", "--source-root", str(m.tree), "--out-root", str(out), "--plain",
                 "--jobs", "2", "--hipcc", str(m.hipcc), "--cache-dir", str(m.cache),
                 *(f"--arch={a}" for a in ARCHES), *extra)
    return r.returncode, r.stdout, r.stderr, len(compiles(m.log)) - before


def _cas_requests(web: Server) -> list[str]:
    assert web.files is not None
    log = web.files.parent / "access.log"
    return [ln for ln in log.read_text().splitlines() if "/cas/" in ln] if log.exists() else []


@pytest.mark.parametrize("where", ["root:../secret.env", "absolute", "/dev/zero",
                                   "fifo-outside", "root:fifo.h"])
def test_a_server_cannot_make_the_client_open_a_file(
        web: Server, seeded: tuple[Machine, dict[str, bytes]], tmp_path: Path,
        where: str) -> None:
    """An entry naming a file outside the root (with its true digest: the client would
    fetch the object and tell the server the guess was right) or a file that is no regular
    file is refused before anything is opened: one warning, compiled here, no object
    fetched."""
    like, records = seeded
    b = machine(tmp_path / "b", like)
    secret = tmp_path / "b" / "secret.env"
    secret.write_text("PIN=4711\n")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    fifo = tmp_path / "b" / "pipe"
    os.mkfifo(fifo)
    os.mkfifo(b.tree / "fifo.h")
    name = {"root:../secret.env": "root:../secret.env", "absolute": str(secret),
            "/dev/zero": "/dev/zero", "fifo-outside": str(fifo),
            "root:fifo.h": "root:fifo.h"}[where]
    with _poisoned(web, records, lambda e: [{**e, "deps": {**e["deps"], name: digest}}]):
        before = len(_cas_requests(web))
        rc, out, err, n = _read_pack(b, tmp_path / "out", web)
        assert rc == 0, err
        assert n == len(ARCHES), err  # compiled here
        warnings = _warnings(err)
        assert len(warnings) == 1 and "refused" in warnings[0], err
        assert "4711" not in err + out
        assert len(_cas_requests(web)) == before  # the server learnt nothing
        assert _remote_doc(out)["damaged"] == len(ARCHES)


# ---------------------------------------------------------------- Medium 9: the tier
def test_a_control_character_in_an_object_name_is_an_invalid_entry(
        web: Server, seeded: tuple[Machine, dict[str, bytes]], tmp_path: Path) -> None:
    like, records = seeded
    b = machine(tmp_path / "b", like)
    with _poisoned(web, records, lambda e: [{**e, "object": "ab\ncd" + str(e["object"])[5:]}]):
        rc, out, err, n = _read_pack(b, tmp_path / "out", web)
    assert (rc, n) == (0, len(ARCHES)), err
    assert len(_warnings(err)) == 1 and "internal error" not in err, err
    assert _strict_json(out)


def test_an_infinite_compile_time_never_reaches_the_report(
        web: Server, seeded: tuple[Machine, dict[str, bytes]], tmp_path: Path) -> None:
    like, records = seeded
    b = machine(tmp_path / "b", like)
    # sealed over inf, spelled 1e999: JSON that Python reads as inf
    with _poisoned(web, records, lambda e: [{**e, "seconds": float("inf")}],
                   lambda b: b.replace(b"Infinity", b"1e999")):
        rc, out, err, _ = _read_pack(b, tmp_path / "out", web)
        stats = _ukdpack("cache", "stats", "--remote-cache", web.url)
    assert rc == 0, err
    assert isinstance(_strict_json(out), dict)
    assert "Infinity" not in out and "inf s" not in err
    assert "inf" not in stats.stdout, stats.stdout


def test_cache_stats_and_verify_survive_a_hostile_listing(web: Server, seeded: tuple[
        Machine, dict[str, bytes]]) -> None:
    """nginx lists a file named with a newline and an escape; a socket server answers the
    listing with 100,000 nested arrays."""
    del seeded  # the server holds sound records too
    assert web.files is not None
    odd = web.files / "ac" / "bad\n\x1bname"
    odd.write_bytes(b"{}")
    try:
        for action in ("stats", "verify"):
            r = _ukdpack("cache", action, "--remote-cache", web.url)
            assert r.returncode == 0, r.stderr
            assert "internal error" not in r.stderr
        nested = HostileHttp(lambda *a: None, lifetime=30)
        nested.reply = body_reply(nested, b"[" * 100_000 + b"]" * 100_000)
        for action in ("stats", "verify"):
            r = _ukdpack("cache", action, "--remote-cache", nested.url)
            assert r.returncode == 1, r.stderr
            assert "internal error" not in r.stderr and "no JSON listing" in r.stderr
    finally:
        odd.unlink()


@pytest.mark.parametrize("scheme", ["http", "redis"])
def test_a_dripping_server_costs_one_deadline(tmp_path: Path, scheme: str) -> None:
    """A server answering a byte every 0.2 s passes every per-read timeout; the request's
    deadline (--remote-cache-timeout 1) ends it: one warning, the pack compiles."""
    drip = HostileHttp(lambda *a: None, lifetime=40)
    drip.reply = drip_reply(drip)
    if scheme == "redis":  # redis-py's first command waits for a reply that drips too
        def resp(conn: socket.socket, *_: object) -> None:
            drip.send(conn, b"$1000\r\n")
            while drip.alive:
                drip.send(conn, b"a")
                time.sleep(0.2)
        drip.reply = resp
    url = drip.url if scheme == "http" else drip.url.replace("http", "redis") + "0"
    m = machine(tmp_path / "m")
    started = time.monotonic()
    rc, _, err, n = _pack(m, tmp_path / "out", "--remote-cache", url,
                          "--remote-cache-timeout", "1")
    took = time.monotonic() - started
    assert rc == 0, err
    assert n == len(ARCHES)
    assert drip.alive and took < 30, took  # not held until the server gave up
    warnings = _warnings(err)
    assert len(warnings) == 1 and "within 1 s" in warnings[0], err


def test_a_flooding_server_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    """An action entry of 512 MiB with no length: the client stops reading at its cap."""
    flood = HostileHttp(lambda *a: None, lifetime=60)
    flood.reply = flood_reply(flood, 512 << 20)
    m = machine(tmp_path / "m")
    rc, out, err, n = _pack(m, tmp_path / "out", "--remote-cache", flood.url, "--json",
                             "--remote-cache-timeout", "20")
    assert (rc, n) == (0, len(ARCHES)), err
    assert flood.sent < 128 << 20, flood.sent
    assert _remote_doc(out)["damaged"] >= 1


def test_a_redis_value_larger_than_its_entry_says_is_not_read(tmp_path: Path) -> None:
    """Objects are read up to the size their entry records (GETRANGE): a 64 MiB value
    under an object's name costs the size of the object, not 64 MiB."""
    gen = redis_server(tmp_path / "redis")
    server = next(gen)
    try:
        a = machine(tmp_path / "a")
        rc, _, err, _ = a.pack(tmp_path / "outa", "--remote-cache", server.url)
        assert rc == 0, err
        for name in server.records():
            if name.startswith("cas/"):
                server.put(name, b"\0" * (64 << 20))
        import redis

        client = redis.Redis.from_url(server.url)
        before = int(client.info("stats")["total_net_output_bytes"])
        b = machine(tmp_path / "b", a)
        rc, out, err, n = _pack(b, tmp_path / "outb", "--remote-cache", server.url, "--json",
                                 "--remote-cache-mode", "read")
        sent = int(client.info("stats")["total_net_output_bytes"]) - before
        client.close()
        assert (rc, n) == (0, len(ARCHES)), err
        assert sent < 8 << 20, sent
        assert _remote_doc(out)["damaged"] == len(ARCHES)
    finally:
        gen.close()


def test_a_bad_port_or_ambiguous_userinfo_is_a_usage_error(tmp_path: Path) -> None:
    for url in (f"http://127.0.0.1:{free_port()}x/", "http://u:a#b@127.0.0.1/"):
        r = _ukdpack("cache", "stats", "--remote-cache", url)
        assert r.returncode == 2, r.stderr
        assert "internal error" not in r.stderr and "a#b" not in r.stderr


# ---------------------------------------------------------------- dvc pull
def test_dvc_pull_stops_at_its_timeout(tmp_path: Path) -> None:
    """A remote that never delivers (its objects are FIFOs: DVC's read waits forever)
    holds `dvc pull` only until --timeout: exit 1, one line, no DVC process left."""
    ws = dvc_workspace(tmp_path)
    for obj in (ws / "dvc-remote").rglob("*"):
        if obj.is_file() and not obj.name.endswith(".dir"):
            obj.unlink()
            os.mkfifo(obj)
    started = time.monotonic()
    r = _ukdpack("dvc-pull", str(ws / "descriptors"), "--timeout", "3", timeout=60)
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - started < 30
    assert "did not finish within 3 s and was stopped" in r.stderr, r.stderr
    left = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "cwd").resolve() == ws.resolve():
                left.append(proc.name)
    assert not left, left  # DVC and its helpers were stopped
    r = _ukdpack("dvc-pull", str(ws / "descriptors"),
                 env={"UKDPACK_DVC_PULL_TIMEOUT": "soon"})
    assert r.returncode == 2 and "UKDPACK_DVC_PULL_TIMEOUT" in r.stderr, r.stderr


def test_doctor_shows_no_dvc_remote_credential(tmp_path: Path) -> None:
    """A DVC remote whose URL holds a password: doctor lists it without the password."""
    ws = dvc_workspace(tmp_path)
    with (ws / ".dvc" / "config").open("a") as f:
        f.write("['remote \"team\"']\n    url = https://ci:Pa/SECRET@dvc.example/store\n")
    for extra in ((), ("--json",)):
        r = _ukdpack("doctor", "--source-root", str(ws / "descriptors"), "--cache-dir",
                     str(tmp_path / "cache"), *extra)
        assert "dvc.example/store" in r.stdout, r.stdout + r.stderr
        assert "SECRET" not in r.stdout + r.stderr
