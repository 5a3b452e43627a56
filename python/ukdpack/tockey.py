"""Toc keys (SPEC 8): ``<stem>_<first 12 hex of sha256 of the canonical JSON of
what determines the code object>``, stable across machines and checkouts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from ukdpack.digest import canonical_json, sha256_hex


def normalized_build(build: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{}`` and ``{"defines": {}, "flags": []}`` are the same compile."""
    build = build or {}
    return {"defines": dict(sorted((build.get("defines") or {}).items())),
            "flags": list(build.get("flags") or [])}


def identity(kind: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    """What determines a source's code object; ``rel`` is its root-relative file."""
    if kind in ("hip", "cuda"):
        return {"kind": kind, "source": rel, "build": normalized_build(fields.get("build"))}
    if kind == "hsaco":
        return {"kind": kind, "file": rel}
    if kind == "builder":
        return {"kind": kind, "module": fields["module"], "function": fields["function"],
                "spec": fields["spec"]}
    raise ValueError(f"a {kind} source has no code object")


def stem_of(kind: str, fields: Mapping[str, Any], rel: str | None) -> str:
    base = str(fields["function"]) if kind == "builder" else PurePosixPath(rel or "").stem
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "object"


def toc_key(kind: str, fields: Mapping[str, Any], rel: str | None) -> str:
    """The toc key of a source whose file (if any) is ``rel`` under the root."""
    digest = sha256_hex(canonical_json(identity(kind, fields, rel)))
    return f"{stem_of(kind, fields, rel)}_{digest[:12]}"
