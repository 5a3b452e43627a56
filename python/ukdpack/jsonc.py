"""JSON with ``//`` and ``/* */`` comments, as the runtime's parser accepts it.

Comments are blanked (newlines kept) so the JSON parser's line and column
numbers still point into the file as written. Duplicate keys are refused.
"""

from __future__ import annotations

import json
from typing import Any


class JsoncError(ValueError):
    """Text that is not JSON (with comments): the message says where and why."""


def strip_comments(text: str) -> str:
    """Replace every comment outside a string by spaces, keeping newlines."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                line = text.count("\n", 0, i) + 1
                raise JsoncError(f"unterminated /* comment starting on line {line}")
            out.append("".join(ch if ch == "\n" else " " for ch in text[i : end + 2]))
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


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
