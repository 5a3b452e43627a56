"""Problems found in input, and the exception that carries them.

Every refusal names the file (root-relative), the JSON path of the field, what
was expected and what was found, so a kernel author can act on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]

#: Characters that break a line or drive a terminal: the Unicode controls (Cc: newline,
#: carriage return, escape, ...) and the line and paragraph separators (Zl, Zp).
#: Lone surrogates too: a name that is not UTF-8 reaches Python with each stray byte as a
#: surrogate escape (os.fsdecode), which no UTF-8 output can hold.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_CONTROL_BUT_TAB = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_IN_REPR = re.compile(r"\\udc([89a-f][0-9a-f])")


def _literal(m: re.Match[str]) -> str:
    return _byte(m.group()) or repr(m.group())[1:-1]


def _byte(ch: str) -> str:
    """``\\xNN`` for the surrogate escape of byte NN (as the runtime writes a byte that is
    not UTF-8), else empty."""
    return f"\\x{ord(ch) - 0xDC00:02x}" if "\udc80" <= ch <= "\udcff" else ""


def is_utf8(text: str) -> bool:
    """Whether ``text`` (a name from os.listdir and the like) holds no stray byte: a name
    that does is refused by the walker, unread (NAME_NOT_UTF8), and a command that lists
    files itself refuses it alike, naming it with ``escape_bytes``."""
    return _SURROGATE.search(text) is None


def escape_bytes(text: str) -> str:
    """``text`` with each byte that is not UTF-8 (a surrogate escape) written ``\\xNN``,
    control characters left as they are: a name as JSON, which escapes those itself, can
    hold it. Shared by every command that reports file names it listed itself."""
    if is_utf8(text):
        return text
    return _SURROGATE.sub(lambda m: _byte(m.group()) or repr(m.group())[1:-1], text)


def escape_controls(text: str, *, keep_tabs: bool = False) -> str:
    """``text`` with each control character written as Python writes it in a string
    literal (``\\n``, ``\\x1b``, ``\\u2028``), so it stays on one line and cannot move a
    terminal's cursor; ``keep_tabs`` leaves tabs (a compiler's output aligns with them)."""
    return (_CONTROL_BUT_TAB if keep_tabs else _CONTROL).sub(_literal, text)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character that would break its line or drive a terminal."""
    return _CONTROL.search(text) is not None


def quote_name(name: str) -> str:
    """A file name or JSON path as printed: as it is, or, when it holds a control
    character (a file named with a newline), quoted and escaped as a Python literal, so
    the quotes show where the name begins and ends."""
    return _SURROGATE_IN_REPR.sub(r"\\x\1", repr(name)) if has_controls(name) else name


@dataclass(frozen=True, order=True)
class Problem:
    """One finding: ``<file>: <json path>: <message>``."""

    file: str
    path: str
    message: str
    severity: Severity = "error"
    code: str = ""  # the runtime's code (e.g. DUPLICATE_ID), or the packer's own
    detail: str = ""  # a tool's own output (a compiler's errors), shown below, indented

    def __str__(self) -> str:
        """``<file>: <path>: <message>`` on one line, whatever the names hold: a file or
        path with control characters is quoted, the message's are escaped; then the
        detail's lines, indented (each escaped, tabs kept)."""
        parts = [quote_name(p) for p in (self.file, self.path) if p]
        text = ": ".join([*parts, escape_controls(self.message)])
        lines = self.detail.splitlines()
        return "\n".join([text, *("    " + escape_controls(ln, keep_tabs=True) for ln in lines)])

    def line(self) -> str:
        """The line printed for a person: ``ukdpack: error: <file>: <path>: <message>``."""
        return f"ukdpack: {self.severity}: {self}"

    def as_dict(self) -> dict[str, str]:
        """The problem as JSON takes it (JSON escapes control characters itself); the
        detail follows the message on its own lines."""
        message = self.message + "".join("\n    " + ln for ln in self.detail.splitlines())
        return {"severity": self.severity, "code": self.code, "file": escape_bytes(self.file),
                "path": escape_bytes(self.path), "message": escape_bytes(message)}


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
