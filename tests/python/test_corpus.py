"""The conformance corpus (SPEC 15): every case is run through every judge its
``expect.json`` lists, and each judge must give the case's verdict, print every
message fragment, exit 0 or 1, and never show a traceback.

Judges (see tests/corpus/README.md): ``validate`` and ``pack`` on an authored
``tree/``; ``ukdpack-validate`` and ``loader`` on a packed ``shard/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ukdpack import _runtime
from ukdpack.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expect.json").is_file())
JUDGES = ("validate", "pack", "ukdpack-validate", "loader")
AUTHORED = {"validate", "pack"}
DEFAULT_ARCH = "gfx90a"


def _expect(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CORPUS / case / "expect.json").read_text())
    return doc


def _verdict(expect: dict[str, Any], judge: str) -> str:
    # validate runs no compiler, so a producer failure is "ok" to it and "fail" to pack.
    verdict: str = expect.get("verdict_by_judge", {}).get(judge, expect["verdict"])
    return verdict


@dataclass
class Verdict:
    code: int
    text: str


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Verdict:
    # In-process: an escaping exception fails the test with its own traceback.
    code = main(argv)
    out = capsys.readouterr()
    return Verdict(code, out.out + out.err)


def _judge_validate(case: str, expect: dict[str, Any], _tmp: Path,
                    capsys: pytest.CaptureFixture[str], _cache: Path) -> Verdict:
    return _run_cli(["validate", str(CORPUS / case / "tree"), *expect.get("args", [])], capsys)


def _judge_pack(case: str, expect: dict[str, Any], tmp: Path,
                capsys: pytest.CaptureFixture[str], cache: Path) -> Verdict:
    out_root = tmp / "out"
    arch = expect.get("arch", DEFAULT_ARCH)
    got = _run_cli(["pack", "--source-root", str(CORPUS / case / "tree"), "--out-root",
                    str(out_root), "--arch", arch, "--plain", "--jobs", "1", "--cache-dir",
                    str(cache), *expect.get("args", [])], capsys)
    left = sorted(p.name for p in out_root.iterdir()) if out_root.is_dir() else []
    if got.code != 0:
        # SPEC 8: a failing arch leaves neither its shard nor its staging folder.
        assert arch not in left and f".{arch}.staging" not in left, (case, left)
    else:
        assert (out_root / arch).is_dir() and f".{arch}.staging" not in left, (case, left)
    return got


def _judge_cpp_validator(case: str, _expect: dict[str, Any], _tmp: Path,
                         _capsys: pytest.CaptureFixture[str], _cache: Path) -> Verdict:
    exe = Path(sys.executable).parent / "ukdpack-validate"
    done = subprocess.run([str(exe), str(CORPUS / case / "shard")], capture_output=True,
                          text=True, check=False, timeout=60)
    return Verdict(done.returncode, done.stdout + done.stderr)


def _judge_loader(case: str, expect: dict[str, Any], _tmp: Path,
                  _capsys: pytest.CaptureFixture[str], _cache: Path) -> Verdict:
    """The loader and state manager as a program would use them, then every launch's
    integrity checks; any error diagnostic, drop or refusal is a fail."""
    arch = expect.get("arch", DEFAULT_ARCH)
    dset = _runtime.load_shard(str(CORPUS / case / "shard"))
    lines = [": ".join(filter(None, (d["severity"], d.get("file"), d.get("path"),
                                     d.get("message")))) for d in dset.diagnostics]
    failed = any(d["severity"] == "error" for d in dset.diagnostics)
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=arch)
    for d in sm.dropped():
        failed = True
        lines.append(f"dropped {d['name']}: {d['reason']}")
    loaded = 0
    for k in sm.kept():
        if not k["packed"]:
            continue
        for launch in k["launches"] or [None]:
            try:
                sm.load_launch_code(k["kernel_id"], launch, arch)
                loaded += 1
            except _runtime.RuntimeCheckError as e:
                failed = True
                lines.append(str(e))
    if not failed and loaded == 0:
        failed = True  # a shard that yields nothing to launch is no working shard
        lines.append("no launch loaded")
    return Verdict(1 if failed else 0, "\n".join(lines))


RUNNERS = {"validate": _judge_validate, "pack": _judge_pack,
           "ukdpack-validate": _judge_cpp_validator, "loader": _judge_loader}
PAIRS = [(c, j) for c in CASES for j in _expect(c)["judges"]]


@pytest.fixture(scope="session")
def pack_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for every pack of the session: the corpus shares sources."""
    return tmp_path_factory.mktemp("corpus-cache")


@pytest.fixture(autouse=True)
def _amd_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    # An NVIDIA toolchain is installed too; hipcc must target AMD.
    monkeypatch.setenv("HIP_PLATFORM", "amd")


def test_corpus_is_large_and_well_formed() -> None:
    assert len(CASES) >= 150
    by_judge: dict[str, set[str]] = {j: set() for j in JUDGES}
    for case in CASES:
        expect = _expect(case)
        assert expect["about"] and expect["verdict"] in ("ok", "fail"), case
        assert expect["judges"] and set(expect["judges"]) <= set(JUDGES), case
        shape = "tree" if set(expect["judges"]) <= AUTHORED else "shard"
        assert set(expect["judges"]) <= (AUTHORED if shape == "tree" else set(JUDGES) - AUTHORED)
        assert (CORPUS / case / shape).is_dir(), case
        assert set(expect.get("fragments_by_judge", {})) <= set(expect["judges"]), case
        assert set(expect.get("verdict_by_judge", {})) <= set(expect["judges"]), case
        for judge in expect["judges"]:
            verdict = _verdict(expect, judge)
            assert verdict in ("ok", "fail"), case
            # A refusal must say why: every failing judge has a fragment to match.
            if verdict == "fail":
                assert expect.get("fragments_by_judge", {}).get(judge, expect["fragments"]), (
                    case, judge)
            by_judge[judge].add(verdict)
    assert all(v == {"ok", "fail"} for v in by_judge.values()), by_judge


@pytest.mark.parametrize(("case", "judge"), PAIRS, ids=[f"{c}-{j}" for c, j in PAIRS])
def test_judge_verdict(case: str, judge: str, tmp_path: Path, pack_cache: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    expect = _expect(case)
    got = RUNNERS[judge](case, expect, tmp_path, capsys, pack_cache)
    text = got.text
    assert "Traceback" not in text and "internal error" not in text, text
    verdict = _verdict(expect, judge)
    assert got.code == (0 if verdict == "ok" else 1), f"{case} [{judge}]:\n{text}"
    fragments = expect.get("fragments_by_judge", {}).get(judge, expect["fragments"])
    for fragment in fragments:
        assert fragment in text, f"{case} [{judge}]: missing {fragment!r} in:\n{text}"
    if verdict == "fail" and judge in AUTHORED:
        # Every error names its file: "ukdpack: error: <file>: ..."
        errors = [ln for ln in text.splitlines() if ln.startswith("ukdpack: error: ")]
        assert errors, text
        for line in errors:
            assert line.split(": ")[2].strip(), line

