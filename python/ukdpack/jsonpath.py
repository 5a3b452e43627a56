"""JSON paths in messages: ``$``, ``.key`` (or ``["odd key"]``) and ``[index]``.

The C++ runtime writes the same shape, so messages from both read alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key(base: str, name: str) -> str:
    """``base`` followed by the member ``name``."""
    # As the runtime writes it (jsonPathKey): a whole-name match (``$`` would let a
    # trailing newline by), and UTF-8 kept, not escaped.
    if _PLAIN.fullmatch(name):
        return f"{base}.{name}"
    return f"{base}[{json.dumps(name, ensure_ascii=False)}]"


def index(base: str, i: int) -> str:
    """``base`` followed by the array index ``i``."""
    return f"{base}[{i}]"


def join(parts: Iterable[str | int], base: str = "$") -> str:
    """A path from a sequence of member names and indexes."""
    path = base
    for part in parts:
        path = index(path, part) if isinstance(part, int) else key(path, part)
    return path
