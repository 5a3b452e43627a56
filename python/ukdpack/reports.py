"""The one shape of every ``--json`` report of ``ukdpack`` (docs/cli.md, "JSON reports").

Each report is a JSON object that starts with ``format_version`` (1), ``ok`` (the
verdict: exit 0) and ``problems`` (objects with ``file``, ``path``, ``code``,
``severity``, ``message``), then the command's own fields.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from ukdpack.errors import Problem, escape_bytes
from ukdpack.redact import redactor

#: Bumped when a field changes meaning or goes away; new fields do not bump it.
FORMAT_VERSION = 1


def problem_doc(p: Problem) -> dict[str, Any]:
    """One problem as every report lists it: ``path`` is null when the problem concerns a
    whole file (or no file), ``code`` names the kind of finding (``ERROR`` when the
    finder gave none)."""
    d = p.as_dict()
    return {"file": d["file"], "path": d["path"] or None,
            "code": d["code"] or p.severity.upper(), "severity": d["severity"],
            "message": d["message"]}


def report(ok: bool, problems: Iterable[Problem], fields: Mapping[str, Any] | None = None
           ) -> dict[str, Any]:
    """A report: the shared fields first, then the command's own ``fields``."""
    return {"format_version": FORMAT_VERSION, "ok": ok,
            "problems": [problem_doc(p) for p in problems], **(fields or {})}


def print_report(doc: Mapping[str, Any], out: TextIO | None = None) -> None:
    """The report on stdout (or ``out``), indented, as one JSON document: no credential
    in it (redact.py), every string able to leave as UTF-8 (a name that is not UTF-8
    keeps its stray bytes as ``\\xNN``), and a number that is not finite (which JSON
    cannot hold: Python would print ``Infinity``) as null."""
    print(json.dumps(_clean(doc, redactor()), indent=2, ensure_ascii=False, allow_nan=False),
          file=out or sys.stdout)


def _clean(doc: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(doc, str):
        return redact(escape_bytes(doc))
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, Mapping):
        return {_clean(k, redact): _clean(v, redact) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_clean(v, redact) for v in doc]
    return doc
