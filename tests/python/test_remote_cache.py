"""The remote compile cache tier against real servers on loopback (nginx with WebDAV PUT,
redis-server): two machines (two local cache folders) share one server; read-only mode,
damage on the server and a dead server."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pack_support import REPO, compiles, counting_compiler, run_pack, shard_files
from remote_servers import Server, free_port, nginx, redis_server

ARCHES = ("gfx90a", "gfx1030")
MINIMAL = REPO / "tests" / "corpus" / "ok_minimal" / "tree"


@pytest.fixture(scope="module", params=["http", "redis"])
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp(f"server-{request.param}")
    yield from (nginx(base) if request.param == "http" else redis_server(base))


def _tree(dst: Path) -> Path:
    """ok_minimal with its kernel reading a header: the header's digest is in the key."""
    shutil.copytree(MINIMAL, dst)
    (dst / "k.h").write_text("#define VALUE 1.0f\n")
    (dst / "k.hip").write_text('#include "k.h"\n' + (dst / "k.hip").read_text()
                               .replace("1.0f", "VALUE"))
    return dst


@dataclass(frozen=True)
class Machine:
    """A checkout and a local cache folder of its own; packs with the counting hipcc."""

    tree: Path
    cache: Path
    hipcc: Path
    log: Path

    def pack(self, out: Path, *extra: str, env: dict[str, str] | None = None
             ) -> tuple[int, str, str, int]:
        """(exit status, stdout, stderr, compiles run)."""
        before = len(compiles(self.log))
        r = run_pack(self.tree, out, ARCHES, "--jobs", "2", "--hipcc", str(self.hipcc),
                     *extra, cache=self.cache, env=env)
        return r.returncode, r.stdout, r.stderr, len(compiles(self.log)) - before


def machine(base: Path, like: Machine | None = None) -> Machine:
    """A fresh machine; ``like``: with the same hipcc (the wrapper's bytes are part of the
    compiler's identity, so machines sharing entries run the same one)."""
    base.mkdir(parents=True)
    hipcc, log = (like.hipcc, like.log) if like is not None else counting_compiler(base)
    return Machine(_tree(base / "tree"), base / "cache", hipcc, log)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "warning" in line]


def _remote_doc(stdout: str) -> dict[str, object]:
    doc = json.loads(stdout)["remote_cache"]
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def seeded(server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Machine, dict[str, dict[str, bytes]], dict[str, bytes]]:
    """Machine A packed with the server (read-write): its shards and the server's records."""
    server.clear()
    a = machine(tmp_path_factory.mktemp("a") / "m")
    rc, out, err, n = a.pack(a.tree.parent / "out", "--remote-cache", server.url, "--json")
    assert rc == 0, err
    assert n == len(ARCHES)
    doc = _remote_doc(out)
    assert (doc["misses"], doc["remote_hits"], doc["uploads"]) == (2, 0, 2), doc
    assert "0 local hits, 0 remote hits, 2 misses" in err  # the summary line
    shards = {arch: shard_files(a.tree.parent / "out" / arch) for arch in ARCHES}
    return a, shards, server.records()


def test_a_second_machine_packs_with_no_compile(server: Server, seeded: tuple[
        Machine, dict[str, dict[str, bytes]], dict[str, bytes]], tmp_path: Path) -> None:
    like, shards, records = seeded
    assert sum(k.startswith("ac/") for k in records) == 2
    assert sum(k.startswith("cas/") for k in records) == 2

    b = machine(tmp_path / "b", like)
    rc, out, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url, "--json")
    assert rc == 0, err
    assert n == 0  # every object came from the server
    for arch in ARCHES:
        assert shard_files(tmp_path / "out" / arch) == shards[arch]
    doc = _remote_doc(out)
    assert (doc["local_hits"], doc["remote_hits"], doc["misses"], doc["uploads"]) == \
        (0, 2, 0, 0), doc
    assert doc["bytes_down"] == sum(len(v) for k, v in records.items() if k.startswith("cas/"))
    assert doc["seconds_saved"] > 0  # A's recorded compile times
    assert not _warnings(err), err
    assert server.records() == records  # a hit uploads nothing

    # What came down was kept locally: the next pack asks the server for nothing.
    rc, out, err, n = b.pack(tmp_path / "out2", "--remote-cache", server.url, "--json")
    assert (rc, n) == (0, 0), err
    doc = _remote_doc(out)
    assert (doc["local_hits"], doc["remote_hits"], doc["bytes_down"]) == (2, 0, 0), doc


def test_a_changed_header_misses_and_adds_an_entry(server: Server, seeded: tuple[
        Machine, dict[str, dict[str, bytes]], dict[str, bytes]], tmp_path: Path) -> None:
    like, _, records = seeded
    b = machine(tmp_path / "b", like)
    (b.tree / "k.h").write_text("#define VALUE 3.0f\n")
    rc, out, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url, "--json")
    assert rc == 0, err
    assert n == len(ARCHES)  # the entries bind the header's digest: not this header
    assert _remote_doc(out)["uploads"] == 2
    after = server.records()
    # Same action keys (the header is not in the base key), each now with two entries.
    assert {k for k in after if k.startswith("ac/")} == {k for k in records
                                                        if k.startswith("ac/")}
    for k in after:
        if k.startswith("ac/"):
            assert len(json.loads(after[k])["entries"]) == 2
    # Put the server back as the other tests expect it.
    server.clear()
    for k, v in records.items():
        server.put(k, v)


def test_read_mode_uploads_nothing(server: Server, seeded: tuple[
        Machine, dict[str, dict[str, bytes]], dict[str, bytes]], tmp_path: Path) -> None:
    like, _, records = seeded
    b = machine(tmp_path / "b", like)
    (b.tree / "k.h").write_text("#define VALUE 2.0f\n")  # a presubmit's change: misses
    rc, out, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url,
                             "--remote-cache-mode", "read", "--json")
    assert rc == 0, err
    assert n == len(ARCHES)
    doc = _remote_doc(out)
    assert (doc["misses"], doc["uploads"], doc["bytes_up"]) == (2, 0, 0), doc
    assert server.records() == records

    # read-write, but every object above the size cap: nothing goes up either.
    (b.tree / "k.h").write_text("#define VALUE 5.0f\n")
    rc, out, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url,
                             "--remote-cache-max-object", "100", "--json")
    assert (rc, n) == (0, len(ARCHES)), err
    assert _remote_doc(out)["uploads"] == 0
    assert server.records() == records


def test_a_damaged_object_is_compiled_here(server: Server, seeded: tuple[
        Machine, dict[str, dict[str, bytes]], dict[str, bytes]], tmp_path: Path) -> None:
    like, shards, records = seeded
    try:
        for k, v in records.items():
            if k.startswith("cas/"):
                server.put(k, v[:-1] + bytes([v[-1] ^ 1]))
        b = machine(tmp_path / "b", like)
        rc, out, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url, "--json",
                                 "--remote-cache-mode", "read")
        assert rc == 0, err
        assert n == len(ARCHES)
        for arch in ARCHES:
            assert shard_files(tmp_path / "out" / arch) == shards[arch]
        warnings = _warnings(err)
        assert len(warnings) == 1, err  # one line for the pack, not one per object
        assert "damaged" in warnings[0]
        doc = _remote_doc(out)
        assert (doc["remote_hits"], doc["damaged"]) == (0, 2), doc

        verify = run_pack_cache("verify", server.url)
        assert verify.returncode == 1
        assert "damaged" in verify.stderr
    finally:
        for k, v in records.items():
            server.put(k, v)
    verify = run_pack_cache("verify", server.url)
    assert verify.returncode == 0, verify.stderr
    assert "4 records checked: 4 sound" in verify.stdout
    stats = run_pack_cache("stats", server.url)
    assert stats.returncode == 0, stats.stderr
    assert "entries  2 under 2 action keys" in stats.stdout


def test_a_damaged_action_entry_is_ignored(server: Server, seeded: tuple[
        Machine, dict[str, dict[str, bytes]], dict[str, bytes]], tmp_path: Path) -> None:
    like, shards, records = seeded
    # An entry moved to another key (its own digest recomputed): it names another compile.
    keys = sorted(k for k in records if k.startswith("ac/"))
    try:
        server.put(keys[0], records[keys[1]])
        b = machine(tmp_path / "b", like)
        rc, _, err, n = b.pack(tmp_path / "out", "--remote-cache", server.url, "--json",
                                 "--remote-cache-mode", "read")
        assert rc == 0, err
        assert n == 1
        assert len(_warnings(err)) == 1, err
        for arch in ARCHES:
            assert shard_files(tmp_path / "out" / arch) == shards[arch]
    finally:
        server.put(keys[0], records[keys[0]])


def run_pack_cache(action: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ukdpack", "cache", action,
                           "--remote-cache", url], capture_output=True, text=True,
                          env=dict(os.environ), check=False)


@pytest.mark.parametrize("url", ["http://user:s3cret@127.0.0.1:{port}/cache",
                                 "redis://:s3cret@127.0.0.1:{port}/0"])
def test_a_dead_server_costs_one_warning(tmp_path: Path, url: str) -> None:
    url = url.format(port=free_port())  # nothing listens there
    m = machine(tmp_path / "m")
    rc, out, err, n = m.pack(tmp_path / "out", "--remote-cache", url, "--json",
                             "--remote-cache-timeout", "1")
    assert rc == 0, err
    assert n == len(ARCHES)
    warnings = _warnings(err)
    assert len(warnings) == 1, err
    assert "remote compile cache" in warnings[0]
    assert "s3cret" not in err + out  # credentials are never printed
    doc = _remote_doc(out)
    assert doc["fault"] and doc["misses"] == 2 and doc["uploads"] == 0


@pytest.mark.parametrize("scheme", ["http", "redis"])
def test_a_silent_server_costs_one_timeout(tmp_path: Path, scheme: str) -> None:
    """A server that takes the connection and never answers: one timeout, one warning."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # never accepted: connections wait in the backlog, unanswered
        url = f"{scheme}://127.0.0.1:{listener.getsockname()[1]}/0"
        m = machine(tmp_path / "m")
        rc, out, err, n = m.pack(tmp_path / "out", "--remote-cache", url, "--json",
                                 "--remote-cache-timeout", "0.5")
    assert rc == 0, err
    assert n == len(ARCHES)
    warnings = _warnings(err)
    assert len(warnings) == 1 and "imeout" in warnings[0], err
    assert _remote_doc(out)["fault"]


def test_a_5xx_server_costs_one_warning(tmp_path: Path) -> None:
    gen = nginx(tmp_path / "nginx")
    server = next(gen)
    try:
        m = machine(tmp_path / "m")
        env = {"UKDPACK_REMOTE_CACHE": server.url + "broken/",
               "UKDPACK_REMOTE_CACHE_TOKEN": "t0ken-value"}
        rc, out, err, n = m.pack(tmp_path / "out", "--json", env=env)
        assert rc == 0, err
        assert n == len(ARCHES)
        warnings = _warnings(err)
        assert len(warnings) == 1 and "503" in warnings[0], err
        assert "t0ken-value" not in err + out
    finally:
        gen.close()


def _cmakedir() -> str:
    """The CMake package of the ukdpack installed in this interpreter (as a user finds it)."""
    return subprocess.run([sys.executable, "-m", "ukdpack", "--cmakedir"], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.parametrize("value", ["http://cache.example:8080/ukdpack", ""])
def test_cmake_passes_the_remote_cache_to_each_pack(tmp_path: Path, value: str) -> None:
    """-DUKDPACK_REMOTE_CACHE reaches every arch's pack command; empty adds nothing."""
    project = tmp_path / "p"
    shutil.copytree(MINIMAL, project / "tree")
    (project / "CMakeLists.txt").write_text("""cmake_minimum_required(VERSION 3.20)
project(remote_flag CXX)
find_package(ukdpack CONFIG REQUIRED)
ukd_add_pack_target(NAME k SOURCE_ROOT tree OUT_ROOT shards ARCHES gfx90a gfx1030)
""")
    build = tmp_path / "b"
    r = subprocess.run(["cmake", "-S", str(project), "-B", str(build), "-G", "Ninja",
                        f"-Dukdpack_DIR={_cmakedir()}", f"-DUKDPACK_REMOTE_CACHE={value}",
                        "-DUKDPACK_REMOTE_CACHE_MODE=read"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    commands = [line for line in (build / "build.ninja").read_text().splitlines()
                if " pack " in line and "--source-root" in line]
    assert len(commands) == 2, commands
    for line in commands:
        if value:
            assert f"--remote-cache {value}" in line and "--remote-cache-mode read" in line
        else:
            assert "--remote-cache" not in line


def test_an_entry_must_recompute_to_its_key() -> None:
    """A record re-sealed under another key (its digest made to match) is still refused:
    each compile it lists must give that key from what it records."""
    from ukdpack.produce.cache import _bound, base_key
    from ukdpack.produce.remote import action_record, checked_entries, parse_entries

    rerun = {"kind": "hip", "argv": ["--offload-arch=gfx90a"], "source": "k.hip",
             "compiler": "id", "compiler_path": "/usr/bin/hipcc"}
    entry = {"deps": {"root:k.hip": "a" * 64, "/usr/include/x.h": "b" * 64},
             "object": "c" * 64, "size": 1, "seconds": 1.5, "rerun": rerun}
    key = base_key({"compiler": "id", "argv": ["--offload-arch=gfx90a"], "source": "k.hip",
                    "source_sha256": "a" * 64})
    assert parse_entries(key, action_record(key, [entry])) == [entry]
    other = base_key({"compiler": "id", "argv": ["--offload-arch=gfx1030"],
                      "source": "k.hip", "source_sha256": "a" * 64})
    # Refused (a reason instead of entries):
    assert isinstance(checked_entries(other, {"digest": _bound(other, [entry]),
                                              "entries": [entry]}), str)
    changed = {**entry, "deps": {**entry["deps"], "root:k.hip": "d" * 64}}  # another source
    assert isinstance(checked_entries(key, {"digest": _bound(key, [changed]),
                                            "entries": [changed]}), str)
    assert isinstance(parse_entries(key, action_record(key, [entry])[:-1]), str)  # truncated
    for hostile in (b'{"digest": "x", "entries": ["\\ud800"]}',  # no UTF-8 form to digest
                    b'{"digest": "x", "entries": [' + b"[" * 900 + b"]" * 901 + b"}"):
        assert isinstance(parse_entries(key, hostile), str)
    # The compiler's include folders given, an absolute path elsewhere is refused.
    assert isinstance(parse_entries(key, action_record(key, [entry]), ["/opt/rocm"]), str)
    assert parse_entries(key, action_record(key, [entry]), ["/usr/include"]) == [entry]
