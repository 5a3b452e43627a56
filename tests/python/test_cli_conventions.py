"""The conventions every command shares (docs/cli.md): exit statuses, ``--version``, the
shape of ``--json`` reports, problems told once, suggestions for misspelt names, honest
progress counts, plain tables off a terminal, comma lists of arches. Real commands on
small trees: the minimal corpus tree, compiled with the real hipcc."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pack_support import REPO, read_json, run_pack, write_json
from shard_support import ukdpack

import ukdpack as package
from ukdpack import cli

VALIDATE = Path(sys.executable).parent / "ukdpack-validate"
CORPUS = REPO / "tests" / "corpus"
MINIMAL = CORPUS / "ok_minimal" / "tree"
PROBLEM_KEYS = {"file", "path", "code", "severity", "message"}


def validate_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VALIDATE), *args], capture_output=True, text=True, check=False)


def check_shape(doc: Any) -> dict[str, Any]:
    """The shared fields of every report, first and typed as docs/cli.md says."""
    assert isinstance(doc, dict)
    assert list(doc)[:3] == ["format_version", "ok", "problems"]
    assert doc["format_version"] == 1
    assert isinstance(doc["ok"], bool)
    for p in doc["problems"]:
        assert set(p) >= PROBLEM_KEYS, p
        assert isinstance(p["file"], str) and isinstance(p["code"], str) and p["code"]
        assert p["path"] is None or p["path"].startswith("$"), p
        assert p["severity"] in ("error", "warning", "note")
        assert isinstance(p["message"], str) and p["message"]
    return doc


def report(r: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return check_shape(json.loads(r.stdout))


def minimal(tmp_path: Path, name: str = "tree") -> Path:
    return Path(shutil.copytree(MINIMAL, tmp_path / name))


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any], Path]:
    """The minimal tree packed for gfx90a with --json: (tree, shard, report, cache)."""
    base = tmp_path_factory.mktemp("conventions")
    tree = Path(shutil.copytree(MINIMAL, base / "tree"))
    cache = base / "cache"
    r = run_pack(tree, base / "out", ["gfx90a"], "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    return tree, base / "out" / "gfx90a", report(r), cache


# ----------------------------------------------------------------------------- version
def test_one_version_everywhere() -> None:
    found = re.search(r'^version = "([0-9.]+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert found is not None
    pyproject = found.group(1)
    cmake = re.search(r"project\(ukdpack VERSION ([0-9.]+)",
                      (REPO / "CMakeLists.txt").read_text())
    assert cmake is not None
    assert pyproject == cmake.group(1) == package.__version__
    r = ukdpack("--version")
    assert (r.returncode, r.stdout) == (0, f"ukdpack {pyproject}\n")
    r = validate_tool("--version")
    assert (r.returncode, r.stdout) == (0, f"ukdpack-validate {pyproject}\n")


# ------------------------------------------------------------------------- exit status
@pytest.mark.parametrize("args", [
    ["validate", "{nowhere}"],
    ["pack", "--source-root", "{nowhere}", "--out-root", "{tmp}/out", "--arch", "gfx90a"],
    ["pack", "--source-root", str(MINIMAL), "--out-root", "{tmp}/out", "--arch", "x86_64"],
    ["pack", "--source-root", str(MINIMAL), "--out-root", "{tmp}/out", "--arch", "gfx90a",
     "--handlers", "{nowhere}.json"],
    ["pack", "--source-root", str(MINIMAL), "--out-root", str(MINIMAL / "out"), "--arch",
     "gfx90a"],
    ["dvc-status", "{nowhere}"],
    ["dvc-pull", "{nowhere}"],
    ["inspect", "{nowhere}"],
    ["verify", "{nowhere}", "--source-root", str(MINIMAL)],
    ["desk-check", "{nowhere}"],
    ["diff", "{nowhere}", "{nowhere}"],
    ["generate", "{nowhere}.yaml", "--out", "{tmp}/gen"],
    ["migrate", "{nowhere}", "--out", "{tmp}/new"],
    ["cache", "stats", "--cache-dir", "{nowhere}"],
    ["cache", "verify", "--cache-dir", "{nowhere}"],
], ids=lambda a: " ".join(a[:2]))
def test_a_path_that_is_not_there_is_usage(tmp_path: Path, args: list[str]) -> None:
    filled = [a.format(nowhere=tmp_path / "nowhere", tmp=tmp_path) for a in args]
    r = ukdpack(*filled)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("ukdpack: error: ") and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "new").exists()


@pytest.mark.parametrize("args", [
    ["validate", "{nowhere}", "--json"],
    ["inspect", "{nowhere}", "--json"],
    ["pack", "--source-root", "{nowhere}", "--out-root", "{tmp}/out", "--arch", "gfx90a",
     "--json"],
], ids=lambda a: a[0])
def test_json_still_reports_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    r = ukdpack(*[a.format(nowhere=tmp_path / "nowhere", tmp=tmp_path) for a in args])
    assert r.returncode == 2
    doc = report(r)
    assert doc["ok"] is False and list(doc) == ["format_version", "ok", "problems"]
    (problem,) = doc["problems"]
    assert problem["code"] == "USAGE" and "nowhere" in problem["file"] + problem["message"]


def test_usage_and_findings_of_the_cpp_validator(tmp_path: Path) -> None:
    assert validate_tool(str(tmp_path / "nowhere")).returncode == 2
    assert validate_tool("--frobnicate", str(MINIMAL)).returncode == 2
    assert validate_tool().returncode == 2
    assert validate_tool(str(MINIMAL)).returncode == 0
    assert validate_tool(str(CORPUS / "common_duplicate_id" / "tree")).returncode == 1


def test_findings_exit_1_and_argparse_refusals_exit_2() -> None:
    assert ukdpack("validate", str(MINIMAL)).returncode == 0
    assert ukdpack("validate", str(CORPUS / "common_duplicate_id" / "tree")).returncode == 1
    assert ukdpack("validate", "--bogus", str(MINIMAL)).returncode == 2
    assert ukdpack("cache").returncode == 2
    assert ukdpack("inspect", str(MINIMAL), "--arch", "gfx90a,gfx1030").returncode == 2


# ------------------------------------------------------------------------- JSON shapes
def test_validate_json(tmp_path: Path) -> None:
    r = ukdpack("validate", str(MINIMAL), "--json")
    doc = report(r)
    assert r.returncode == 0 and doc["ok"] is True and doc["problems"] == []
    assert "valid" not in doc and doc["root"] == str(MINIMAL)
    r = ukdpack("validate", str(CORPUS / "common_unknown_key" / "tree"), "--json")
    doc = report(r)
    assert r.returncode == 1 and doc["ok"] is False
    (p,) = [p for p in doc["problems"] if p["severity"] == "error"]
    assert (p["file"], p["path"], p["code"]) == (
        "a.kdp.json", "$.kernelDescriptors[0].bogus", "SCHEMA")


def test_pack_json_reports_each_arch(packed: tuple[Path, Path, dict[str, Any], Path]) -> None:
    tree, shard, doc, _ = packed
    assert doc["ok"] is True and doc["dormant"] is False
    (arch,) = doc["arches"]
    assert arch == {"arch": "gfx90a", "ok": True, "dormant": False, "shard": str(shard),
                    "kernels": 1, "launches": 1, "code_objects": 1,
                    "archive_bytes": arch["archive_bytes"], "problems": []}
    assert arch["archive_bytes"] == (shard / "kpack" / "kernels_gfx90a.kpack").stat().st_size
    assert doc["source_root"] == str(tree)


def test_shard_tool_reports(packed: tuple[Path, Path, dict[str, Any], Path],
                            tmp_path: Path) -> None:
    tree, shard, _, _ = packed
    doc = report(ukdpack("inspect", str(shard), "--json"))
    assert doc["ok"] is True and doc["arch"] == "gfx90a"
    assert [k["name"] for p in doc["packs"] for k in p["kernels"]] == ["a1"]
    doc = report(ukdpack("verify", str(shard), "--source-root", str(tree), "--json"))
    assert doc["ok"] is True and doc["source_root"] == str(tree)
    doc = report(ukdpack("desk-check", str(shard), "--json"))
    assert doc["ok"] is True and doc["arch"] == "gfx90a"
    other = Path(shutil.copytree(shard, tmp_path / "gfx90a"))
    r = ukdpack("diff", str(shard), str(other), "--json")
    doc = report(r)
    assert r.returncode == 0 and doc["ok"] is True and "equal" not in doc
    kdp = other / "a.kdp.json"
    d = read_json(kdp)
    d["kernelDescriptors"][0]["priority"] = 5
    kdp.write_text(json.dumps(d))
    r = ukdpack("diff", str(shard), str(other), "--json")
    doc = report(r)
    assert r.returncode == 1 and doc["ok"] is False
    assert [k["name"] for k in doc["kernels"]["changed"]] == ["a1"]


def test_dvc_status_json(tmp_path: Path) -> None:
    r = ukdpack("dvc-status", str(MINIMAL), "--json")
    doc = report(r)
    assert r.returncode == 0 and doc["ok"] is True and doc["outputs"] == []


def test_cpp_validator_json_has_the_shared_fields(tmp_path: Path) -> None:
    tree = minimal(tmp_path)
    (tree / "extra.udd.json").write_text('{"id": "udd-1", "version": "1.0", "name": "two", '
                                         '"dispatch_symbol": "s"}')
    r = validate_tool(str(tree), "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    # Upstream-compatible fields stay as they were.
    assert doc["format_version"] == 2 and doc["success"] is False
    assert doc["ok"] is False and len(doc["problems"]) == len(doc["diagnostics"]) > 0
    for p, d in zip(doc["problems"], doc["diagnostics"], strict=True):
        assert set(p) == PROBLEM_KEYS
        assert p["path"] == (d["path"] or None)
        assert (p["file"], p["code"], p["message"]) == (d["file"], d["code"], d["message"])


# ----------------------------------------------------------------- told once, honestly
def test_a_tree_error_is_told_once_for_all_arches(tmp_path: Path) -> None:
    tree = Path(shutil.copytree(CORPUS / "common_duplicate_id" / "tree", tmp_path / "t"))
    r = run_pack(tree, tmp_path / "out", ["gfx90a,gfx1030"], "--json")
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ukdpack: error: ")]
    assert lines and len(lines) == len(set(lines)), lines
    doc = report(r)
    assert [(a["arch"], a["ok"], a["shard"]) for a in doc["arches"]] == [
        ("gfx90a", False, None), ("gfx1030", False, None)]
    assert len(doc["problems"]) == len(lines)


def test_a_problem_every_arch_meets_is_told_once(
        packed: tuple[Path, Path, dict[str, Any], Path], tmp_path: Path) -> None:
    # The runtime check of each arch's shard finds the same dispatch symbol missing from
    # the handler manifest: one problem, told once, both arches failed.
    tree = minimal(tmp_path)
    write_json(tmp_path / "handlers.json", {"other_symbol": []})
    r = run_pack(tree, tmp_path / "out", ["gfx90a", "gfx1030"], "--json", "--handlers",
                 str(tmp_path / "handlers.json"), cache=packed[3])
    assert r.returncode == 1
    said = [ln for ln in r.stderr.splitlines() if "'sym_one' is not in the handler" in ln]
    assert len(said) == 1, r.stderr
    doc = report(r)
    assert [p["code"] for p in doc["problems"]] == ["DISPATCH_UNKNOWN"]
    assert [(a["ok"], len(a["problems"])) for a in doc["arches"]] == [(False, 1), (False, 1)]
    assert doc["source_root"] == str(tree) and not (tmp_path / "out" / "gfx90a").exists()


def test_a_missing_compiler_is_told_once(tmp_path: Path) -> None:
    tree = minimal(tmp_path)
    r = run_pack(tree, tmp_path / "out", ["gfx90a", "gfx1030"], "--json", "--hipcc",
                 "/nonexistent/hipcc", cache=tmp_path / "cache")
    assert r.returncode == 1
    said = [ln for ln in r.stderr.splitlines() if "no hip compiler found" in ln]
    assert len(said) == 1, r.stderr
    assert "'/nonexistent/hipcc' (from --hipcc)" in said[0]
    assert "2 code objects: 0 compiled, 0 from cache or prebuilt, 2 failed" in r.stderr
    doc = report(r)
    assert (doc["compiled"], doc["failed_code_objects"]) == (0, 2)
    (problem,) = doc["problems"]
    assert problem["code"] == "NO_COMPILER"
    assert [a["ok"] for a in doc["arches"]] == [False, False]


def test_a_failed_compile_is_not_counted_as_compiled(tmp_path: Path) -> None:
    tree = minimal(tmp_path)
    (tree / "k.hip").write_text('extern "C" __global__ void ka(float* p) { p[0] = ; }\n')
    r = run_pack(tree, tmp_path / "out", ["gfx90a"], cache=tmp_path / "cache")
    assert r.returncode == 1
    assert "1 code object: 0 compiled, 0 from cache or prebuilt, 1 failed" in r.stderr
    assert re.search(r"\[1/1\] .*k\.hip.*: failed \(", r.stderr), r.stderr


# ------------------------------------------------------------------ messages for people
def test_did_you_mean(tmp_path: Path) -> None:
    tree = minimal(tmp_path)
    udd = read_json(tree / "one.udd.json")
    udd["dispach_symbol"] = udd.pop("dispatch_symbol")
    write_json(tree / "one.udd.json", udd)
    kdp = read_json(tree / "a.kdp.json")
    kdp["kernelDescriptors"][0]["kernel_source"]["kind"] = "hpi"
    kdp["engine"] = "ued-l"
    write_json(tree / "a.kdp.json", kdp)
    r = ukdpack("validate", str(tree))
    assert r.returncode == 1
    assert ("one.udd.json: $.dispach_symbol: unknown key 'dispach_symbol'; extension keys "
            "start with 'x-' or '_'; did you mean 'dispatch_symbol'?") in r.stderr
    assert "found 'hpi'; did you mean 'hip'?" in r.stderr
    assert re.search(r"'ued-l' names no descriptor of this root; expected the id of a "
                     r"UED; did you mean 'ued-1'\?", r.stderr), r.stderr
    # Nothing close: no suggestion.
    kdp["kernelDescriptors"][0]["kernel_source"]["kind"] = "fortran"
    write_json(tree / "a.kdp.json", kdp)
    r = ukdpack("validate", str(tree))
    assert "found 'fortran'" in r.stderr and "did you mean 'hip'" not in r.stderr


def test_json_syntax_errors_name_line_and_column(tmp_path: Path) -> None:
    tree = minimal(tmp_path)
    (tree / "one.udd.json").write_text('{\n  "id": "udd-1",\n  "name": ,\n}\n')
    r = ukdpack("validate", str(tree))
    assert r.returncode == 1
    assert re.search(r"one\.udd\.json: not valid JSON: .* at line 3 column 11", r.stderr), \
        r.stderr


def test_tables_are_plain_ascii_off_a_terminal(
        packed: tuple[Path, Path, dict[str, Any], Path]) -> None:
    _, shard, _, _ = packed
    env = dict(os.environ, FORCE_COLOR="1", TERM="xterm-256color")
    r = subprocess.run([sys.executable, "-m", "ukdpack", "inspect", str(shard)],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.isascii() and "\x1b" not in r.stdout
    assert re.search(r"^\| kernel +\| prio", r.stdout, re.M), r.stdout
    assert "+-" in r.stdout


# ----------------------------------------------------------------------------- closed pipe
CONSOLE_SCRIPT = Path(sys.executable).parent / "ukdpack"


@pytest.mark.parametrize("launcher", ["module", "console-script"])
@pytest.mark.parametrize("command", [["inspect", "{shard}"], ["inspect", "{shard}", "--json"],
                                     ["validate", "{tree}", "--json"],
                                     ["desk-check", "{shard}", "--json"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(
        packed: tuple[Path, Path, dict[str, Any], Path], launcher: str,
        command: list[str]) -> None:
    """``ukdpack inspect SHARD | head``: the reader closes the pipe before the command
    writes; the command ends with status 141 (as a tool stopped by SIGPIPE) and says
    nothing: no traceback, no internal error, no second error from the exit's flush."""
    tree, shard, _, _ = packed
    argv = [a.format(shard=shard, tree=tree) for a in command]
    start = [sys.executable, "-m", "ukdpack"] if launcher == "module" else [str(CONSOLE_SCRIPT)]
    p = subprocess.Popen([*start, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, HIP_PLATFORM="amd"))
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # gone before the first write
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141, err
    assert err == "", err


def _subparsers(parser: Any) -> dict[str, Any]:
    found = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(found[0].choices) if found else {}


@pytest.mark.parametrize("command", sorted(cli._COMMANDS))
def test_a_command_line_gets_its_commands_parser_as_the_full_one_has_it(command: str) -> None:
    """main makes only the subparser its command line names: it must be the very parser
    the full one holds (its help, every option's default), and the only one made."""
    alone, full = cli.build_parser(command), cli.build_parser()
    assert list(_subparsers(alone)) == [command]
    mine, theirs = _subparsers(alone)[command], _subparsers(full)[command]
    assert mine.format_help() == theirs.format_help()
    def options(parser: Any) -> list[tuple[Any, ...]]:
        return [(a.dest, a.default, tuple(a.option_strings), a.required, a.type)
                for a in parser._actions] + [tuple(sorted(parser._defaults.items()))]

    assert options(mine) == options(theirs)
    for name, sub in _subparsers(mine).items():  # cache and resident have actions
        assert sub.format_help() == _subparsers(theirs)[name].format_help()
