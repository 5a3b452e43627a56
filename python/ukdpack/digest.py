"""The canonical JSON form and the sha256 digests ukdpack takes over it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: One encoder for every call: ``json.dumps`` with options makes a new one each time,
#: which costs more than encoding a small document (a pack encodes thousands).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON: the form every digest in ukdpack is taken over."""
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
