"""``ukdpack doctor``: finds hipcc and the extension here; a PATH without hipcc reports it
missing with the way to get it and exits 1; DVC remotes and the compile cache of a root."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from machine import need_nvcc
from pack_support import EXAMPLE, REPO

from ukdpack import _runtime
from ukdpack.produce import compiler


def _doctor(*args: str | Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("UKDPACK_HIPCC", "UKDPACK_NVCC")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "ukdpack", "doctor", *map(str, args)],
                          capture_output=True, text=True, check=False, env=full, timeout=300)


def _checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def test_doctor_finds_hipcc_and_the_extension_here(tmp_path: Path) -> None:
    r = _doctor("--source-root", EXAMPLE, "--cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    hip = next(ln for ln in lines if ln.split()[1:2] == ["hipcc"])
    assert hip.startswith("ok "), hip
    assert re.search(r"HIP \d+\.\d+", hip) and " gfx90a " in hip, hip
    ext = next(ln for ln in lines if ln.split()[1:2] == ["extension"])
    assert ext.startswith("ok ") and "zstd 1." in ext and "OpenSSL" in ext, ext
    assert lines[-1].startswith("ukdpack: doctor: everything a pack needs is here"), lines[-1]

    j = _doctor("--source-root", EXAMPLE, "--cache-dir", tmp_path / "cache", "--json")
    assert j.returncode == 0, j.stderr
    report = json.loads(j.stdout)
    assert report["format_version"] == 1 and report["ok"] is True
    checks = _checks(report)
    assert [c["name"] for c in report["checks"]] == ["extension", "hipcc", "clang", "nvcc",
                                                     "dvc", "cache"]
    assert checks["hipcc"]["status"] == "ok" and checks["hipcc"]["required"]
    assert {"gfx90a", "gfx1030"} <= set(checks["hipcc"]["details"]["arches"])
    # hipcc's fingerprint, the remote-execution workers' ukdpack-toolchain value: the one
    # a pack with this hipcc keys its compiles by, on both lines.
    toolchain = checks["hipcc"]["details"]["toolchain"]
    assert toolchain == compiler.identify("hip", checks["hipcc"]["path"], None).identity
    assert re.fullmatch(r"[0-9a-f]{64}", toolchain) and f"toolchain {toolchain};" in hip
    assert not (tmp_path / "cache").exists()  # the doctor looks; it makes no cache
    assert not checks["nvcc"]["required"] and not checks["clang"]["required"]
    # The extension's report is the extension's own answer.
    info = _runtime.build_info()
    assert checks["extension"]["details"]["zstd"] == info["zstd"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", info["zstd"])
    assert info["zstd"].rsplit(".", 1)[0] == info["zstd_headers"].rsplit(".", 1)[0]
    assert info["openssl"].startswith("OpenSSL ") and info["cplusplus"] >= 201703
    # Only notes (optional tools) may be problems when everything required is there.
    assert all(p["severity"] == "note" for p in report["problems"]), report["problems"]
    # The example's DVC repository and its committed remote.
    dvc = checks["dvc"]
    (remote,) = dvc["details"]["remotes"]
    assert (remote["name"], remote["default"]) == ("example", True)
    assert Path(remote["url"]).resolve() == (REPO / "dvc-remote").resolve()
    assert dvc["details"]["repo"] == str(REPO) and dvc["status"] == "ok"


def test_a_path_without_hipcc_reports_it_missing_with_the_install_hint(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    r = _doctor("--source-root", tmp_path, "--cache-dir", tmp_path / "cache", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    hip = next(ln for ln in r.stdout.splitlines() if ln.split()[1:2] == ["hipcc"])
    assert hip.startswith("missing  hipcc "), hip
    assert "not found: 'hipcc' on PATH" in hip
    assert "apt-get install hipcc" in hip and "--hipcc PATH" in hip, hip
    nvcc = next(ln for ln in r.stdout.splitlines() if ln.split()[1:2] == ["nvcc"])
    assert nvcc.startswith("missing  nvcc (optional)"), nvcc
    assert r.stdout.splitlines()[-1].startswith(
        "ukdpack: doctor: a pack needs what is missing: hipcc ("), r.stdout

    j = _doctor("--source-root", tmp_path, "--cache-dir", tmp_path / "cache", "--json", env=env)
    assert j.returncode == 1
    report = json.loads(j.stdout)
    assert report["ok"] is False
    by_code = {p["code"]: p for p in report["problems"]}
    assert by_code["DOCTOR_HIPCC_MISSING"]["severity"] == "error"
    assert "apt-get install hipcc" in by_code["DOCTOR_HIPCC_MISSING"]["message"]
    assert by_code["DOCTOR_NVCC_MISSING"]["severity"] == "note"
    assert set(report["problems"][0]) == {"file", "path", "code", "severity", "message"}


def test_an_explicit_hipcc_that_is_not_there_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "no-hipcc"
    r = _doctor("--source-root", tmp_path, "--cache-dir", tmp_path / "c", "--hipcc", gone)
    assert r.returncode == 1
    assert f"not found: '{gone}' (from --hipcc)" in r.stdout, r.stdout


def test_dvc_remotes_of_a_root_and_missing_outputs_make_dvc_required(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".dvc").mkdir(parents=True)
    (repo / ".dvc" / "config").write_text(
        "[core]\n    remote = store\n['remote \"store\"']\n    url = /srv/objects\n"
        "['remote \"spare\"']\n    url = s3://bucket/objects\n")
    root = repo / "kernels"
    root.mkdir()
    (root / "objects.dvc").write_text(
        "outs:\n- md5: 0123456789abcdef0123456789abcdef.dir\n  size: 10\n  nfiles: 1\n"
        "  path: objects\n")
    r = _doctor("--source-root", root, "--cache-dir", tmp_path / "cache", "--json")
    report = json.loads(r.stdout)
    dvc = _checks(report)["dvc"]
    assert dvc["required"] is True, "a pack of this root needs its outputs pulled"
    assert dvc["status"] == "ok", dvc
    assert dvc["details"]["missing"] == 1 and dvc["details"]["outputs"] == 1
    assert {(x["name"], x["url"]) for x in dvc["details"]["remotes"]} == {
        ("store", "/srv/objects"), ("spare", "s3://bucket/objects")}
    assert "0 of 1 DVC outputs present" in dvc["summary"]
    assert f"ukdpack dvc-pull {root}" in dvc["summary"]


def test_the_cache_line_says_where_and_how_big(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "objects").mkdir(parents=True)
    (cache / "objects" / "a").write_bytes(b"x" * 3000)
    (cache / "b").write_bytes(b"y" * 72)
    r = _doctor("--source-root", tmp_path, "--cache-dir", cache, "--json")
    c = _checks(json.loads(r.stdout))["cache"]
    assert c["status"] == "ok" and c["path"] == str(cache)
    assert (c["details"]["files"], c["details"]["bytes"]) == (2, 3072)
    assert c["summary"] == f"{cache}: 2 files, 3.0 KiB"


def test_a_cache_that_is_not_a_folder_fails(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.write_text("")
    r = _doctor("--source-root", tmp_path, "--cache-dir", cache)
    assert r.returncode == 1
    line = next(ln for ln in r.stdout.splitlines() if ln.split()[1:2] == ["cache"])
    assert line.startswith("error    cache ") and "not a folder" in line, line


def test_a_hipcc_set_to_the_nvidia_platform_is_an_error_with_the_fix(tmp_path: Path) -> None:
    """A pack would compile with nvcc through it and make no AMDGPU code object."""
    need_nvcc()  # hipcc's NVIDIA platform runs it
    r = _doctor("--source-root", tmp_path, "--cache-dir", tmp_path / "c",
                env={"HIP_PLATFORM": "nvidia"})
    assert r.returncode == 1
    hip = next(ln for ln in r.stdout.splitlines() if ln.split()[1:2] == ["hipcc"])
    assert hip.startswith("error    hipcc ") and "runs nvcc" in hip, hip
    assert hip.endswith("— set HIP_PLATFORM=amd"), hip


def test_an_extension_that_cannot_be_imported_is_missing_and_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ukdpack
    from ukdpack.doctor.checks import check_extension
    from ukdpack.doctor.command import line

    monkeypatch.delattr(ukdpack, "_runtime")
    monkeypatch.setitem(sys.modules, "ukdpack._runtime", None)  # import fails
    c = check_extension()
    assert (c.status, c.required) == ("missing", True)
    assert line(c).startswith("missing  extension           ukdpack._runtime cannot be "
                              "imported: ")
    assert line(c).endswith("— build and install it: scripts/setup.sh in a ukdpack checkout "
                            "(or pip install ukdpack, which builds it)")
