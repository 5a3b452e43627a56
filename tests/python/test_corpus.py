"""The conformance corpus: every case is run through every judge that applies to
it, and every judge must give the case's one verdict (a case declares, with its
reason, the only ways judges may differ), exit 0 or 1, name a file of the case
when it refuses, print the pinned message fragments, and never show a traceback
or an internal error.

Judges (see tests/corpus/README.md): ``validate``, ``pack``, ``ukdpack-validate``
and the loader on an authored ``tree/``; ``ukdpack-validate``, the loader,
``inspect``, ``verify`` and ``desk-check`` on a packed ``shard/``.
"""

from __future__ import annotations

import itertools
import json
import shutil
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
#: Every judge of each shape of case: all of them run on every case of that shape.
TREE_JUDGES = ("validate", "pack", "ukdpack-validate", "loader")
SHARD_JUDGES = ("ukdpack-validate", "loader", "inspect", "verify", "desk-check")
JUDGES = tuple(dict.fromkeys(TREE_JUDGES + SHARD_JUDGES))
#: Judges that read an authored tree by the runtime's rules, compiling nothing.
RULE_JUDGES = ("validate", "ukdpack-validate", "loader")
DEFAULT_ARCH = "gfx90a"


def _expect(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CORPUS / case / "expect.json").read_text())
    return doc


def _shape(case: str) -> str:
    return "tree" if (CORPUS / case / "tree").is_dir() else "shard"


def _judges(case: str) -> tuple[str, ...]:
    """Every judge that applies to the case: all of its shape's (verify needs the root the
    shard was packed from)."""
    if _shape(case) == "tree":
        return TREE_JUDGES
    if _expect(case).get("source") is None:
        return tuple(j for j in SHARD_JUDGES if j != "verify")
    return SHARD_JUDGES


def _verdict(expect: dict[str, Any], judge: str) -> str:
    """One verdict for every judge, except where the case says why judges must differ: a
    producer failure only pack sees (it alone compiles), or a rule only the packer can
    judge (toc-key identity from build inputs)."""
    verdict: str = expect["verdict"]
    if "fails_only_in_pack" in expect:
        return "fail" if judge == "pack" else "ok"
    if "packer_rule" in expect:
        return "fail" if judge in ("validate", "pack") else "ok"
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
        # A failing arch leaves neither its shard nor its staging folder.
        assert arch not in left and f".{arch}.staging" not in left, (case, left)
    else:
        assert (out_root / arch).is_dir() and f".{arch}.staging" not in left, (case, left)
    return got


def _judge_cpp_validator(case: str, expect: dict[str, Any], _tmp: Path,
                         _capsys: pytest.CaptureFixture[str], _cache: Path) -> Verdict:
    exe = Path(sys.executable).parent / "ukdpack-validate"
    if _shape(case) == "tree":
        argv = [str(exe), "--authored", str(CORPUS / case / "tree"), *expect.get("args", [])]
    else:
        argv = [str(exe), str(CORPUS / case / "shard")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return Verdict(done.returncode, done.stdout + done.stderr)


def _diagnostic_lines(diags: list[dict[str, str]]) -> list[str]:
    return [": ".join(filter(None, (d["severity"], d.get("file"), d.get("path"),
                                    d.get("message")))) for d in diags]


def _judge_loader(case: str, expect: dict[str, Any], _tmp: Path,
                  _capsys: pytest.CaptureFixture[str], _cache: Path) -> Verdict:
    """The loader as a program would use it. An authored tree: the load and the whole-set
    rules; any error is a fail. A shard: then a state manager and every launch's integrity
    checks; any error diagnostic, failing drop or refusal is a fail, and so is a shard that
    yields no launch at all."""
    arch = expect.get("arch", DEFAULT_ARCH)
    if _shape(case) == "tree":
        excluded = [a for flag, a in itertools.pairwise(expect.get("args", []))
                    if flag == "--exclude-folder"]
        dset = _runtime.load_shard(str(CORPUS / case / "tree"), authored=True,
                                   exclude_folders=excluded)
        diags = dset.diagnostics + _runtime.check_set_rules(dset)
        failed = any(d["severity"] == "error" for d in diags)
        # A tree read as a runtime load reads it as a shard: both paths agree there too.
        _both_paths_agree(CORPUS / case / "tree", _tmp / "indexed", arch)
        return Verdict(1 if failed else 0, "\n".join(_diagnostic_lines(diags)))
    shard = CORPUS / case / "shard"
    failed, lines = _judge_shard_set(_runtime.load_shard(str(shard), use_index=False), arch)
    _both_paths_agree(shard, _tmp / "indexed", arch)
    return Verdict(1 if failed else 0, "\n".join(lines))


def _both_paths_agree(shard: Path, copy: Path, arch: str) -> None:
    """The loader's other path: where the shard's load says nothing (the packer then
    writes an index), a copy gets the index written from its JSON, and the load through
    it must give what the JSON load gives: diagnostics, the set's rules, the kernels kept
    and dropped, every launch's code and the whole model."""
    shutil.copytree(shard, copy, symlinks=True)
    data, why = _runtime.shard_index(str(copy))
    json_set = _runtime.load_shard(str(copy), use_index=False)
    if data is None:
        assert why and json_set.diagnostics, why  # only a load that says something gets none
        return
    (copy / _runtime.SHARD_INDEX_FILE).write_bytes(data)
    indexed = _runtime.load_shard(str(copy))
    assert indexed.from_index, indexed.index_reason
    assert indexed.diagnostics == json_set.diagnostics
    assert _runtime.check_set_rules(indexed) == _runtime.check_set_rules(json_set)
    assert _without_views(indexed.packs) == _without_views(json_set.packs)
    assert _judge_shard_set(indexed, arch) == _judge_shard_set(json_set, arch)
    assert _kept(indexed, arch) == _kept(json_set, arch)
    assert _runtime.check_shard_index(str(copy)) == {"present": True, "binds": True, "why": "",
                                                     "difference": ""}


def _without_views(packs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The packs' dicts less each kernel's view (equal only to a view of the same set)."""
    return [{**p, "kernels": [{k: v for k, v in kd.items() if k != "view"} for kd in p["kernels"]]}
            for p in packs]


def _kept(dset: _runtime.DescriptorSet, arch: str) -> list[tuple[str, Any]]:
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=arch)
    return [(k["kernel_id"], k["launches"]) for k in sm.kept()]


def _judge_shard_set(dset: _runtime.DescriptorSet, arch: str) -> tuple[bool, list[str]]:
    """The loader judge's verdict on a loaded shard, and the lines it prints."""
    lines = _diagnostic_lines(dset.diagnostics)
    failed = any(d["severity"] == "error" for d in dset.diagnostics)
    sm = _runtime.StateManager(dset, handlers=_runtime.stub_handlers(dset), arch=arch)
    for d in sm.dropped():
        failed = failed or d["code"] != "NO_DISPATCH"
        lines.append(f"{d['file']}: {d['path']}: dropped {d['name']}: {d['reason']}")
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
    return failed, lines


def _shard_tool(tool: str) -> Any:
    def run(case: str, expect: dict[str, Any], _tmp: Path, capsys: pytest.CaptureFixture[str],
            _cache: Path) -> Verdict:
        argv = [tool, str(CORPUS / case / "shard"), "--arch", expect.get("arch", DEFAULT_ARCH)]
        if tool == "verify":
            argv += ["--source-root", str(CORPUS / expect["source"] / "tree")]
        return _run_cli(argv, capsys)
    return run


RUNNERS = {"validate": _judge_validate, "pack": _judge_pack,
           "ukdpack-validate": _judge_cpp_validator, "loader": _judge_loader,
           "inspect": _shard_tool("inspect"), "verify": _shard_tool("verify"),
           "desk-check": _shard_tool("desk-check")}
PAIRS = [(c, j) for c in CASES for j in _judges(c)]


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
    known = {"about", "verdict", "fragments_for", "fragments", "fragments_by_judge", "args",
             "arch", "source", "why_no_source", "fails_only_in_pack", "packer_rule"}
    for case in CASES:
        expect = _expect(case)
        assert set(expect) <= known, (case, set(expect) - known)
        assert expect["about"] and expect["verdict"] in ("ok", "fail"), case
        judges = _judges(case)
        assert set(expect["fragments_for"]) <= set(judges), case
        assert set(expect.get("fragments_by_judge", {})) <= set(judges), case
        if _shape(case) == "shard":
            # verify compares with the root the shard was packed from; a case without one
            # says why.
            assert expect.get("source") or expect.get("why_no_source"), case
            assert "fails_only_in_pack" not in expect and "packer_rule" not in expect, case
        for judge in judges:
            verdict = _verdict(expect, judge)
            # A refusal must say why: every judge whose wording is pinned has a fragment.
            if verdict == "fail" and judge in expect["fragments_for"]:
                assert expect.get("fragments_by_judge", {}).get(judge, expect["fragments"]), (
                    case, judge)
            by_judge[judge].add(verdict)
    assert all(v == {"ok", "fail"} for v in by_judge.values()), by_judge


def test_judges_differ_only_where_a_case_says_why() -> None:
    """One judge: on every case every judge gives one verdict. The only exceptions are
    declared per case with their reason: a producer failure that only pack can see, and
    the packer's own toc-key rule."""
    for case in CASES:
        expect = _expect(case)
        verdicts = {j: _verdict(expect, j) for j in _judges(case)}
        if "fails_only_in_pack" in expect:
            assert expect["fails_only_in_pack"] and case.startswith(("prod_", "ok_")), case
            assert {verdicts[j] for j in RULE_JUDGES} == {"ok"}, case
        elif "packer_rule" in expect:
            assert expect["packer_rule"], case
        else:
            assert len(set(verdicts.values())) == 1, (case, verdicts)


def _case_files(case: str) -> set[str]:
    folder = CORPUS / case / _shape(case)
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.parametrize(("case", "judge"), PAIRS, ids=[f"{c}-{j}" for c, j in PAIRS])
def test_judge_verdict(case: str, judge: str, tmp_path: Path, pack_cache: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    expect = _expect(case)
    got = RUNNERS[judge](case, expect, tmp_path, capsys, pack_cache)
    text = got.text
    assert "Traceback" not in text and "internal error" not in text, text
    verdict = _verdict(expect, judge)
    assert got.code == (0 if verdict == "ok" else 1), f"{case} [{judge}]:\n{text}"
    if judge in expect["fragments_for"]:
        fragments = expect.get("fragments_by_judge", {}).get(judge, expect["fragments"])
        for fragment in fragments:
            assert fragment in text, f"{case} [{judge}]: missing {fragment!r} in:\n{text}"
    if verdict == "fail":
        # Every refusal names a file of the case.
        assert any(f in text for f in _case_files(case)), f"{case} [{judge}]:\n{text}"
    if verdict == "fail" and judge in ("validate", "pack"):
        # Every error names its file: "ukdpack: error: <file>: ..."
        errors = [ln for ln in text.splitlines() if ln.startswith("ukdpack: error: ")]
        assert errors, text
        for line in errors:
            assert line.split(": ")[2].strip(), line
