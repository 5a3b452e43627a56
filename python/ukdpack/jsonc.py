"""JSON with ``//`` and ``/* */`` comments, as the runtime's parser accepts it.

Comments are blanked (newlines kept) so the JSON parser's line and column
numbers still point into the file as written. Duplicate keys are refused.
"""

from __future__ import annotations

import json
import re
from typing import Any


class JsoncError(ValueError):
    """Text that is not JSON (with comments): the message says where and why."""


# One token at a time: a string (running to the end when unterminated), a line comment,
# a block comment, or the opening of one that never closes. Text between tokens is kept.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|//[^\n]*|/\*.*?\*/|/\*', re.S)
_NOT_NEWLINE = re.compile(r"[^\n]")


def strip_comments(text: str) -> str:
    """Replace every comment outside a string by spaces, keeping newlines."""
    if "/" not in text:  # no comment can start: the common case of packed files
        return text

    def blank(m: re.Match[str]) -> str:
        token = m.group()
        if token.startswith('"'):
            return token
        if token == "/*":
            line = text.count("\n", 0, m.start()) + 1
            raise JsoncError(f"unterminated /* comment starting on line {line}")
        return _NOT_NEWLINE.sub(" ", token)

    return _TOKENS.sub(blank, text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsoncError(f"duplicate key '{key}' in one object")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise JsoncError(f"not valid JSON: '{name}' is not a JSON value")


def loads(text: str) -> Any:
    """Parse JSON text that may hold comments; raise JsoncError saying where it fails."""
    try:
        return json.loads(strip_comments(text), object_pairs_hook=_no_duplicates,
                          parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        # Some of json's messages end in " at" already ("Unterminated string starting at").
        msg = e.msg.removesuffix(" at")
        raise JsoncError(f"not valid JSON: {msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise JsoncError("not valid JSON: nested too deeply") from None


def load_file(data: bytes) -> Any:
    """Decode UTF-8 (a BOM is allowed) and parse; raise JsoncError on either failure."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise JsoncError(f"not UTF-8 text: byte {e.start} cannot be decoded") from None
    return loads(text)
