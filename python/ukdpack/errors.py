"""Problems found in input, and the exception that carries them.

Every refusal names the file (root-relative), the JSON path of the field, what
was expected and what was found, so a kernel author can act on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True, order=True)
class Problem:
    """One finding: ``<file>: <json path>: <message>``."""

    file: str
    path: str
    message: str
    severity: Severity = "error"
    code: str = ""  # the runtime's code (e.g. DUPLICATE_ID), or the packer's own

    def __str__(self) -> str:
        parts = [p for p in (self.file, self.path) if p]
        return ": ".join([*parts, self.message])

    def line(self) -> str:
        """The line printed for a person: ``ukdpack: error: <file>: <path>: <message>``."""
        return f"ukdpack: {self.severity}: {self}"

    def as_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "code": self.code, "file": self.file,
                "path": self.path, "message": self.message}


class UkdError(Exception):
    """Bad input: one or more problems, each already worded for a person and carrying a
    code. The one base class of the package's errors: every refusal is one of these."""

    #: The code a problem made from a bare message carries.
    code = "ERROR"

    def __init__(self, problems: Iterable[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            problems = Problem("", "", problems, code=self.code)
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(UkdError):
    """A command line that cannot be acted on (a missing folder, a bad flag value): the
    command exits 2 before it touches anything."""

    code = "USAGE"


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    """The problems of severity ``error``."""
    return [p for p in problems if p.severity == "error"]


def from_runtime(diag: dict[str, str]) -> Problem:
    """A Problem from a diagnostic of the C++ runtime (severity, file, path, message)."""
    severity: Severity = "error"
    if diag.get("severity") in ("warning", "note"):
        severity = "warning" if diag["severity"] == "warning" else "note"
    return Problem(diag.get("file", ""), diag.get("path", ""), diag.get("message", ""), severity,
                   diag.get("code", ""))
