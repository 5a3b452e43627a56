"""The JSON Schemas' verdicts on descriptor documents, worded for people: a test oracle.

The package ships the schemas for editors (``ukdpack.schema``) and judges descriptors
with the C++ runtime alone; these verdicts serve only the tests, which hold the
shipped schemas to the runtime's and to the documentation's examples. ``x-expect``,
``x-message`` and ``x-messages`` annotations in the schemas give the wording of each
refusal.

Two validators read them: jsonschema-rs gives the verdict, and for a document it
refuses, jsonschema finds every error with the structure the wording needs. A test
holds the two to the same verdict on every document of the conformance corpus.
Both are test dependencies (pyproject.toml's ``test`` extra), never the packer's.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry

from ukdpack import _runtime, jsonpath
from ukdpack.schema import describe, load_schema


def read_versions(dtype: str) -> list[str]:
    """The versions of a descriptor type this build reads, from the runtime (its limits)."""
    return _runtime.read_versions(dtype)


@functools.cache
def _validator(dtype: str) -> Draft202012Validator:
    # A registry that cannot retrieve: a shipped schema refers only to itself.
    return Draft202012Validator(load_schema(f"{dtype}.schema.json"), registry=Registry())


@functools.cache
def _fast_validator(dtype: str) -> Any:
    return jsonschema_rs.validator_for(load_schema(f"{dtype}.schema.json"))


def is_valid(doc: Any, dtype: str) -> bool:
    """The verdict alone, from the fast validator."""
    return bool(_fast_validator(dtype).is_valid(doc))


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
