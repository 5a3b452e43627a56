"""The canonical JSON form and the sha256 digests ukdpack takes over it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def mapping_as_dict(value: Any) -> Any:
    """An encoder's ``default``: a mapping that is no ``dict`` (a kernel's document read
    when first asked, ``model.LazyDocument``) as the ``dict`` of its items, which encodes
    to the same text; any other value is refused as ``json`` refuses it."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: One encoder for every call: ``json.dumps`` with options makes a new one each time,
#: which costs more than encoding a small document (a pack encodes thousands).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=mapping_as_dict)


def canonical_json(value: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON: the form every digest in ukdpack is taken over."""
    return _CANONICAL.encode(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
