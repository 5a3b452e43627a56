"""Toc keys: ``<stem>_<first 12 hex of sha256 of the canonical JSON of what
determines the code object>``, stable across machines and checkouts. What
determines the object is each kind's identity in the kinds table. A tree keeps each
launch's key once computed (``launch_toc_key``): the packer's toc-key rule and every
arch's plan ask for it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ukdpack.authored.kinds import kind, normalized_build
from ukdpack.authored.load import Tree
from ukdpack.authored.model import Source, Ukd
from ukdpack.digest import canonical_json, sha256_hex

__all__ = ["identity", "key_of", "keyed", "launch_toc_key", "normalized_build", "stem_of", "toc_key"]

_NOT_STEM = re.compile(r"[^A-Za-z0-9_.-]")


def identity(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    """What determines a source's code object; ``rel`` is its root-relative file."""
    k = kind(kind_name)
    if k.identity is None:
        raise ValueError(f"a {kind_name} source has no code object")
    return k.identity(kind_name, fields, rel)


def stem_of(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> str:
    k = kind(kind_name)
    base = (posixpath.splitext(posixpath.basename(rel or ""))[0] if k.stem_field == k.file_field
            else str(fields[k.stem_field]))
    return _NOT_STEM.sub("_", base) or "object"


def toc_key(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> str:
    """The toc key of a source whose file (if any) is ``rel`` under the root."""
    return key_of(kind_name, fields, rel, identity(kind_name, fields, rel))


def key_of(kind_name: str, fields: Mapping[str, Any], rel: str | None,
           ident: Mapping[str, Any]) -> str:
    """The toc key of a source whose identity is already known."""
    digest = sha256_hex(canonical_json(ident))
    return f"{stem_of(kind_name, fields, rel)}_{digest[:12]}"


def launch_toc_key(tree: Tree, ukd: Ukd, src: Source) -> str:
    """The toc key of one launch, computed once per tree (the rules and every arch's plan
    ask for it; it costs a canonical JSON and a digest)."""
    found = tree.toc_keys.get((ukd.file, src.json_path))
    return found if found is not None else keyed(tree, ukd, src)[0]


def keyed(tree: Tree, ukd: Ukd, src: Source) -> tuple[str, dict[str, Any]]:
    """(toc key, identity) of one launch; the key is kept in ``tree.toc_keys``, the
    identity is not (only the rules' collision check reads it: kept, 10,000 kernels'
    identities held 5 MiB for the rest of a pack)."""
    rel = ukd.file_of(src)
    ident = identity(src.kind, src.fields, rel)
    key = tree.toc_keys[(ukd.file, src.json_path)] = key_of(src.kind, src.fields, rel, ident)
    return key, ident
