"""The JSON Schemas (Draft 2020-12) of every descriptor type, shipped for editors.

The schemas under ``ukdpack/schemas`` state the shapes for editors (a descriptor's
``$schema``); each file is self-contained (bundled from the sources in ``schemas/`` by
``ukdpack.schema_bundle``), so an editor fetches nothing else. The packer never
validates with them: the C++ runtime is the one judge of a descriptor. The tests hold
the schemas to the runtime (tests/python/schema_oracle.py words their verdicts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

SCHEMA_BASE = "https://ukdpack.dev/schemas/"

def schema_names() -> list[str]:
    """File names of every shipped schema."""
    folder = resources.files("ukdpack").joinpath("schemas")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".schema.json"))


def load_schema(name: str) -> dict[str, Any]:
    """One shipped schema by file name, e.g. ``kdp.schema.json``."""
    text = resources.files("ukdpack").joinpath("schemas", name).read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def describe(value: Any) -> str:
    """How a found value reads in a message: ``'text'``, ``integer 5``, ``object``."""
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"'{shown}'"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {json.dumps(value)}"
    if value is None:
        return "null"
    return "object" if isinstance(value, Mapping) else "array"
