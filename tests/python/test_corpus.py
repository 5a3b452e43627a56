"""The conformance corpus (SPEC 15): every case gets its verdict from
``ukdpack validate``, with every message fragment it must print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ukdpack.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expect.json").is_file())


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    verdicts = {json.loads((CORPUS / c / "expect.json").read_text())["verdict"] for c in CASES}
    assert verdicts == {"ok", "fail"}


@pytest.mark.parametrize("case", CASES)
def test_validate_verdict(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    expect = json.loads((CORPUS / case / "expect.json").read_text())
    tree = CORPUS / case / "tree"
    code = main(["validate", str(tree), *expect.get("args", [])])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    assert code == (0 if expect["verdict"] == "ok" else 1), text
    for fragment in expect["fragments"]:
        assert fragment in text, f"{case}: missing {fragment!r} in:\n{text}"
    if expect["verdict"] == "fail":
        # Every error names its file: "ukdpack: error: <file>: ..."
        errors = [line for line in text.splitlines() if line.startswith("ukdpack: error: ")]
        assert errors, text
        for line in errors:
            assert line.split(": ")[2].strip(), line
