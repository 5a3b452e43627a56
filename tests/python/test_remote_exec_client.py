"""The remote-execution client's pure parts: the URL, credentials as metadata, the
action a compile becomes (canonical, hermetic, spelled for byte-identical objects), and
what of a worker's answer is refused."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from pack_support import REPO, run_pack

from ukdpack.errors import UsageError
from ukdpack.produce import remote_exec
from ukdpack.produce.compiler import Compiler
from ukdpack.redact import redact
from ukdpack.remote.action import ActionSpec, build_action
from ukdpack.remote.url import exec_headers, parse_url

COMP = Compiler("hip", "/opt/rocm/bin/hipcc", "HIP version: 6", "f" * 64,
                ("/opt/rocm/include",))


def test_urls_parse_and_refuse_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UKDPACK_REMOTE_EXEC_TOKEN", raising=False)
    monkeypatch.delenv("UKDPACK_REMOTE_EXEC_BASIC_AUTH", raising=False)
    u = parse_url("grpc://farm.example:8980/main/ci")
    assert (u.secure, u.host, u.port, u.instance, u.target) == \
        (False, "farm.example", 8980, "main/ci", "farm.example:8980")
    assert u.metadata() == ()
    assert parse_url("grpcs://[::1]:443").target == "[::1]:443"
    for bad in ("http://farm:80", "grpc://farm", "grpc://farm:x", "grpc://farm:1/a/../b",
                "grpc://farm:1?key=v"):
        with pytest.raises(UsageError, match="--remote-exec"):
            parse_url(bad)


def test_credentials_become_metadata_and_are_redacted(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    monkeypatch.delenv("UKDPACK_REMOTE_EXEC_TOKEN", raising=False)
    monkeypatch.delenv("UKDPACK_REMOTE_EXEC_BASIC_AUTH", raising=False)
    u = parse_url("grpcs://ci-bot:Hunter2-pw@farm:443")
    assert u.shown == "grpcs://***@farm:443"
    [(name, value)] = u.metadata()
    assert name == "authorization" and value.startswith("Basic ")
    assert "Hunter2-pw" not in redact("failed with Hunter2-pw " + value)
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_TOKEN", "Tok-123456\r\n")
    assert parse_url("grpc://farm:1").metadata() == (("authorization", "Bearer Tok-123456"),)
    assert "Tok-123456" not in redact("token Tok-123456")
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_TOKEN", "a b")
    with pytest.raises(UsageError, match="not shown"):
        parse_url("grpc://farm:1")


def test_headers_of_the_environment_become_metadata_and_their_values_are_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_HEADERS",
                       "X-BuildBuddy-API-Key = Bb-Key-7788\r\n\nx-team=alpha beta\n")
    assert exec_headers() == (("x-buildbuddy-api-key", "Bb-Key-7788"), ("x-team", "alpha beta"))
    text = redact("refused key Bb-Key-7788 for team alpha beta")
    assert "Bb-Key-7788" not in text and "alpha beta" not in text
    # A value too short to be a key is sent, and not blanked wherever it appears.
    monkeypatch.setenv("UKDPACK_REMOTE_EXEC_HEADERS", "x-debug=1")
    assert exec_headers() == (("x-debug", "1"),) and redact("1 of 1") == "1 of 1"
    monkeypatch.delenv("UKDPACK_REMOTE_EXEC_HEADERS")
    assert exec_headers() == ()
    for line, says in (("no-equals-Sign-Key9", "expected NAME=VALUE"),
                       ("x key=Secret-Value9", "expected NAME=VALUE"),
                       ("=Secret-Value9", "expected NAME=VALUE"),
                       ("authorization=Secret-Value9", "credential's own header"),
                       ("grpc-timeout=Secret-Value9", "grpc-"),
                       ("x-key-bin=Secret-Value9", "binary"),
                       ("x-key=", "printable ASCII"),
                       ("x-key=Secret-Value9\x1b[2J", "printable ASCII"),
                       ("x-key=Secret-Välue9", "printable ASCII")):
        monkeypatch.setenv("UKDPACK_REMOTE_EXEC_HEADERS", "x-ok=1\n" + line)
        with pytest.raises(UsageError) as e:
            exec_headers()
        assert says in str(e.value) and "line 2" in str(e.value), (line, str(e.value))
        assert "Secret-V" not in str(e.value)


def test_an_action_is_canonical_and_names_every_blob() -> None:
    spec = ActionSpec(("cc", "x.c"), {"b/x.h": b"h", "a.c": b"a", "b/c/y.h": b"y"},
                      ("out.o",), "b", {"Z": "1", "A": "2"}, {"k": "v"}, 30)
    one, two = build_action(spec), build_action(ActionSpec(
        spec.argv, dict(reversed(list(spec.inputs.items()))), spec.outputs,
        spec.working_directory, dict(reversed(list(spec.env.items()))), spec.platform, 30))
    assert one.digest == two.digest
    assert {b"h", b"a", b"y"} <= set(one.blobs.values())
    assert build_action(ActionSpec(("cc",), {"a.c": b"other"}, ("o",))).digest != one.digest
    with pytest.raises(ValueError):
        build_action(ActionSpec(("cc",), {"../etc/passwd": b""}, ("o",)))


def test_a_compile_is_spelled_relative_to_its_input_root() -> None:
    spec = remote_exec.compile_spec(COMP, ["--genco", "--offload-arch=gfx90a", "-O3"],
                                    "sub/deep/k.hip", {"sub/deep/k.hip": b"x"},
                                    (("OSFamily", "linux"),), 60)
    assert spec.working_directory == "sub/deep"
    assert spec.argv[0] == COMP.path and "-ffile-prefix-map=../..=." in spec.argv
    assert spec.argv[-1] == "../../sub/deep/k.hip"
    assert spec.platform == {"OSFamily": "linux", remote_exec.TOOLCHAIN_PROPERTY: "f" * 64}
    # Its temporary files stay in its working directory, in the input root the worker drops.
    assert spec.env["TMPDIR"] == "."
    top = remote_exec.compile_spec(COMP, ["--genco"], "k.hip", {"k.hip": b"x"}, (), 60)
    assert (top.working_directory, top.argv[-1]) == ("", "./k.hip")
    assert "-ffile-prefix-map=.=." in top.argv


def test_inputs_outside_the_root_and_toolchain_stay_local(tmp_path: Path) -> None:
    (tmp_path / "k.hip").write_text("x")
    found = remote_exec.input_files([str(tmp_path / "k.hip"), "/opt/rocm/include/hip.h"],
                                    tmp_path, COMP.include_dirs)
    assert found == {"k.hip": str(tmp_path / "k.hip")}
    why = remote_exec.input_files([str(tmp_path / "k.hip"), "/home/me/.env"], tmp_path,
                                  COMP.include_dirs)
    assert isinstance(why, str) and "/home/me/.env" in why


def _answer(exit_code: int = 0, depfile: bytes = b"", stderr: bytes = b"") -> object:
    return SimpleNamespace(exit_code=exit_code, stderr=stderr, stdout=b"", cached=False,
                           outputs={remote_exec.OBJECT: b"\x7fELF", remote_exec.DEPFILE: depfile})


def test_a_depfile_naming_a_file_it_was_not_given_is_refused(tmp_path: Path) -> None:
    inputs = {"sub/k.hip": str(tmp_path / "sub" / "k.hip")}
    ok = remote_exec.remote_compile(_answer(depfile=b"o: ../sub/k.hip /opt/rocm/include/a.h"),
                                    "sub/k.hip", inputs, tmp_path, COMP.include_dirs, 1.0)
    assert not isinstance(ok, str) and ok.deps == (inputs["sub/k.hip"], "/opt/rocm/include/a.h")
    for named in (b"o: /home/me/.ssh/id_rsa", b"o: ../../outside.h"):
        why = remote_exec.remote_compile(_answer(depfile=named), "sub/k.hip", inputs, tmp_path,
                                         COMP.include_dirs, 1.0)
        assert isinstance(why, str) and "not given" in why


def test_a_failure_reads_with_the_paths_a_local_compile_prints(tmp_path: Path) -> None:
    inputs = {"sub/k.hip": str(tmp_path / "sub" / "k.hip"), "k.h": str(tmp_path / "k.h")}
    err = b"../sub/k.hip:3:1: error: boom\nIn file included from ../k.h:1:\n../../sub/k.hip x\n"
    got = remote_exec.remote_compile(_answer(1, stderr=err), "sub/k.hip", inputs, tmp_path,
                                     (), 1.0)
    assert not isinstance(got, str) and not got.ok
    assert got.message.splitlines() == [
        f"{tmp_path}/sub/k.hip:3:1: error: boom", f"In file included from {tmp_path}/k.h:1:",
        "../../sub/k.hip x"]


def test_without_grpcio_the_pack_names_the_remote_extra(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "grpc"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'grpc'\")\n")
    path = os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))
    r = run_pack(REPO / "tests" / "corpus" / "ok_minimal" / "tree", tmp_path / "out",
                 ["gfx90a"], "--remote-exec", "grpc://127.0.0.1:1", cache=tmp_path / "c",
                 env={"PYTHONPATH": path})
    assert r.returncode == 1, r.stderr
    assert "pip install 'ukdpack[remote]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "gfx90a").exists()


def test_the_include_closure_follows_quoted_and_angle_includes_in_the_root(
        tmp_path: Path) -> None:
    from ukdpack.produce.compiler import include_closure

    (tmp_path / "inc" / "lib").mkdir(parents=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "inc" / "lib" / "a.h").write_text('#include "b.h"\n#include <hip/hip_runtime.h>\n')
    (tmp_path / "inc" / "lib" / "b.h").write_text("#if X\n#include <lib/a.h>\n#endif\n")
    (tmp_path / "src" / "local.h").write_text("")
    text = b'#include <lib/a.h>\n#include "local.h"\n#include HEADER\n'
    found = include_closure(tmp_path / "src" / "k.hip", text, ["-O3", "-I../inc"])
    assert sorted(found) == sorted(str(tmp_path / p) for p in
                                   ("inc/lib/a.h", "inc/lib/b.h", "src/local.h"))


def test_the_shared_include_walk_still_finds_a_quoted_fifo_only(tmp_path: Path) -> None:
    from ukdpack.produce.compiler import include_closure, special_include

    (tmp_path / "inc").mkdir()
    os.mkfifo(tmp_path / "inc" / "pipe.h")
    (tmp_path / "a.h").write_text('#include "pipe.h"\n')
    quoted = special_include(tmp_path / "k.hip", b'#include "a.h"\n', ["-Iinc"])
    assert quoted is not None and (quoted.name, quoted.kind) == ("pipe.h", "a FIFO")
    assert quoted.including == tmp_path / "a.h"
    assert special_include(tmp_path / "k.hip", b"#include <pipe.h>\n", ["-I", "inc"]) is None
    # The closure lists regular files only: the FIFO is no input.
    assert include_closure(tmp_path / "k.hip", b'#include "a.h"\n', ["-Iinc"]) == \
        [str(tmp_path / "a.h")]
