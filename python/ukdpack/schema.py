"""The JSON Schemas (Draft 2020-12) of every descriptor type, and their verdicts
worded for people.

The schemas under ``ukdpack/schemas`` state the shapes for editors; each file is
self-contained (bundled from the sources in ``schemas/`` by ``ukdpack.schema_bundle``),
so neither an editor nor this module fetches or reads anything else. ``x-expect``,
``x-message`` and ``x-messages`` annotations in them give the wording of each refusal.

Two validators read them: jsonschema-rs gives the verdict (a thousand times faster,
which matters for trees of thousands of kernels), and for a document it refuses,
jsonschema finds every error with the structure the wording needs. A test holds
the two to the same verdict on every document of the conformance corpus.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import jsonschema_rs

if TYPE_CHECKING:
    # Imported where used: jsonschema only words errors, and its import costs more
    # than validating a whole tree with jsonschema-rs (a warm pack never needs it).
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

from ukdpack import jsonpath

SCHEMA_BASE = "https://ukdpack.dev/schemas/"

#: Versions of each descriptor type this ukdpack reads.
READ_VERSIONS: dict[str, tuple[str, ...]] = {
    "kdp": ("1.0",), "ukd": ("1.0", "1.1"), "udd": ("1.0", "1.1"),
    "ued": ("1.0",), "kmd": ("1.0",), "umd": ("1.0",), "uhd": ("1.0",),
}


def schema_names() -> list[str]:
    """File names of every shipped schema."""
    folder = resources.files("ukdpack").joinpath("schemas")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".schema.json"))


def load_schema(name: str) -> dict[str, Any]:
    """One shipped schema by file name, e.g. ``kdp.schema.json``."""
    text = resources.files("ukdpack").joinpath("schemas", name).read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@functools.cache
def _validator(dtype: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from referencing import Registry

    # A registry that cannot retrieve: a shipped schema refers only to itself.
    return Draft202012Validator(load_schema(f"{dtype}.schema.json"), registry=Registry())


@functools.cache
def _fast_validator(dtype: str) -> Any:
    return jsonschema_rs.validator_for(load_schema(f"{dtype}.schema.json"))


def is_valid(doc: Any, dtype: str) -> bool:
    """The verdict alone, from the fast validator."""
    return bool(_fast_validator(dtype).is_valid(doc))


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


def _parent(doc: Any, parts: Sequence[str | int]) -> Any:
    node = doc
    for part in parts[:-1]:
        node = node[part]
    return node


def _fill(template: str, err: ValidationError, doc: Any) -> str:
    out = template.replace("{found}", describe(err.instance))
    if "{n}" in out and isinstance(err.instance, (Mapping, list, str)):
        out = out.replace("{n}", str(len(err.instance)))
    if "{kind}" in out:
        parent = _parent(doc, list(err.absolute_path))
        out = out.replace("{kind}", str(parent.get("kind", "")) if isinstance(parent, Mapping) else "")
    return out


def _format(err: ValidationError, doc: Any) -> list[tuple[str, str]]:
    schema = err.schema if isinstance(err.schema, Mapping) else {}
    kw = str(err.validator)
    parts: list[str | int] = list(err.absolute_path)
    schema_path = list(err.schema_path)
    if len(schema_path) >= 2 and schema_path[-2] == "propertyNames":
        parts.append(str(err.instance))
    path = jsonpath.join(parts)
    override = schema.get("x-messages", {}).get(kw) or schema.get("x-message")
    if override:
        return [(path, _fill(override, err, doc))]
    expect = schema.get("x-expect")
    value: Any = err.validator_value
    if kw == "required":
        m = re.match(r"^'(.*)' is a required property$", err.message)
        name = m.group(1) if m else str(value)
        return [(path, f"missing required field '{name}'")]
    if kw == "additionalProperties" and isinstance(err.instance, Mapping):
        known = set(schema.get("properties", {}))
        patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
        extras = [k for k in err.instance
                  if k not in known and not any(p.search(k) for p in patterns)]
        return [(jsonpath.key(path, k),
                 f"unknown key '{k}'; extension keys start with 'x-' or '_'") for k in extras]
    if kw in ("anyOf", "oneOf") and err.context:
        from jsonschema.exceptions import best_match

        best = best_match(err.context)
        return _format(best, doc) if best is not None else [(path, err.message)]
    if expect and kw in ("pattern", "type", "enum", "const", "not", "anyOf", "minLength"):
        return [(path, f"expected {expect}, found {describe(err.instance)}")]
    if kw == "type":
        types = value if isinstance(value, list) else [value]
        return [(path, f"expected {' or '.join(types)}, found {describe(err.instance)}")]
    if kw == "enum":
        options = ", ".join(f"'{v}'" if isinstance(v, str) else json.dumps(v) for v in value)
        return [(path, f"expected one of {options}, found {describe(err.instance)}")]
    if kw == "const":
        return [(path, f"expected {json.dumps(value)}, found {describe(err.instance)}")]
    if kw == "pattern":
        return [(path, f"expected a string matching {value}, found {describe(err.instance)}")]
    if kw == "minLength":
        return [(path, "expected a non-empty string, found ''")]
    if kw in ("minItems", "minProperties") and isinstance(err.instance, (list, Mapping)):
        noun = "items" if kw == "minItems" else "entries"
        return [(path, f"expected at least {value} {noun}, found {len(err.instance)}")]
    if kw == "uniqueItems":
        return [(path, "expected unique items, found a repeated item")]
    if kw == "minimum":
        return [(path, f"expected a value >= {value}, found {describe(err.instance)}")]
    if kw == "not":
        return [(path, f"{describe(err.instance)} is not allowed here")]
    return [(path, err.message)]


def check(doc: Any, dtype: str) -> list[tuple[str, str]]:
    """Every shape problem of ``doc`` as a descriptor of type ``dtype``: (JSON path, message)."""
    return [] if is_valid(doc, dtype) else explain(doc, dtype)


def explain(doc: Any, dtype: str) -> list[tuple[str, str]]:
    """Every shape problem found by jsonschema, worded (the slow path of ``check``)."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for err in _validator(dtype).iter_errors(doc):
        for item in _format(err, doc):
            if item not in seen:
                seen.add(item)
                out.append(item)
    out.sort()
    return out
