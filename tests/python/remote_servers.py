"""Real cache servers on loopback for the remote-tier tests: nginx with its WebDAV module
(PUT) and redis-server, each on a free port with its files in a tmp folder, stopped by
the test session."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; a server takes it moments later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}): "
                                 f"{log.read_text() if log.exists() else ''}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after 20 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class Server:
    kind: str  # "http" or "redis"
    url: str
    files: Path | None  # where nginx keeps what is PUT (http)

    def clear(self) -> None:
        """Forget every record."""
        if self.files is not None:
            for child in self.files.iterdir():
                shutil.rmtree(child)
        else:
            subprocess.run(["redis-cli", "-u", self.url, "FLUSHDB"], check=True,
                           capture_output=True)

    def records(self) -> dict[str, bytes]:
        """Every record as ``ac/<key>`` or ``cas/<sha>``."""
        if self.files is not None:
            return {str(p.relative_to(self.files)): p.read_bytes()
                    for p in sorted(self.files.rglob("*")) if p.is_file()}
        import redis

        client = redis.Redis.from_url(self.url)
        found = {}
        for k in client.scan_iter(match="ukdpack:*"):
            kind, key = k.decode().split(":", 2)[1:]
            found[f"{kind}/{key}"] = bytes(client.get(k) or b"")
        client.close()
        return found

    def put(self, name: str, data: bytes) -> None:
        """Write a record behind the packer's back (damage)."""
        if self.files is not None:
            (self.files / name).parent.mkdir(exist_ok=True)
            (self.files / name).write_bytes(data)
            return
        import redis

        client = redis.Redis.from_url(self.url)
        kind, key = name.split("/", 1)
        client.set(f"ukdpack:{kind}:{key}", data)
        client.close()


def nginx(base: Path) -> Iterator[Server]:
    """nginx serving ``base/store`` with PUT (dav_methods) and JSON listings; ``/broken/``
    answers 503 to everything."""
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    version = subprocess.run([nginx_bin, "-V"], capture_output=True, text=True, check=True)
    assert "http_dav_module" in version.stderr, "nginx-light (with the DAV module) is needed"
    store = base / "store"
    store.mkdir(parents=True)
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (base / d).mkdir()
    port = free_port()
    # As root, nginx would hand its workers to 'nobody', who cannot write the tmp folder.
    user = (f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"
            if os.getuid() == 0 else "")
    conf = base / "nginx.conf"
    conf.write_text(f"""
{user}
daemon off;
worker_processes 1;
pid {base}/nginx.pid;
error_log {base}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log {base}/access.log;
  client_body_temp_path {base}/body;
  proxy_temp_path {base}/proxy;
  fastcgi_temp_path {base}/fastcgi;
  uwsgi_temp_path {base}/uwsgi;
  scgi_temp_path {base}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location /broken/ {{ return 503; }}
    location / {{
      root {store};
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 0;
      autoindex on;
      autoindex_format json;
    }}
  }}
}}
""")
    proc = subprocess.Popen([nginx_bin, "-p", str(base), "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc, base / "error.log")
        yield Server("http", f"http://127.0.0.1:{port}/", store)
    finally:
        _stop(proc)


def redis_server(base: Path) -> Iterator[Server]:
    """redis-server on a free port, nothing persisted."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(base),
                             "--logfile", str(base / "redis.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc, base / "redis.log")
        yield Server("redis", f"redis://127.0.0.1:{port}/0", None)
    finally:
        _stop(proc)
