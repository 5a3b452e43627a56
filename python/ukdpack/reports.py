"""The one shape of every ``--json`` report of ``ukdpack`` (docs/cli.md, "JSON reports").

Each report is a JSON object that starts with ``format_version`` (1), ``ok`` (the
verdict: exit 0) and ``problems`` (objects with ``file``, ``path``, ``code``,
``severity``, ``message``), then the command's own fields.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from ukdpack.errors import Problem, escape_bytes

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


def _text_only(value: Any) -> Any:
    """``value`` with every string (keys too) able to leave as UTF-8: a name that is not
    UTF-8 keeps its stray bytes as ``\\xNN``, so the report stays JSON."""
    if isinstance(value, str):
        return escape_bytes(value)
    if isinstance(value, Mapping):
        return {_text_only(k): _text_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text_only(v) for v in value]
    return value


def print_report(doc: Mapping[str, Any], out: TextIO | None = None) -> None:
    """The report on stdout (or ``out``), indented, as one JSON document."""
    print(json.dumps(_text_only(doc), indent=2, ensure_ascii=False), file=out or sys.stdout)
