"""Toc keys: ``<stem>_<first 12 hex of sha256 of the canonical JSON of what
determines the code object>``, stable across machines and checkouts. What
determines the object is each kind's identity in the kinds table. A tree keeps each
launch's key once computed (``launch_toc_key``): the packer's toc-key rule and every
arch's plan ask for it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Hashable, Mapping
from json.encoder import encode_basestring as _json_string
from typing import Any

from ukdpack import _runtime
from ukdpack.authored.kinds import kind, normalized_build
from ukdpack.authored.load import Tree
from ukdpack.authored.model import ReadOnce, Source, Ukd, joined
from ukdpack.digest import canonical_json, sha256_hex

__all__ = ["identity", "identity_inputs", "key_of", "keyed", "keyed_view", "launch_stem",
           "launch_toc_key", "normalized_build", "stem_of", "toc_key", "view_inputs"]

_NOT_STEM = re.compile(r"[^A-Za-z0-9_.-]")


def identity(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> dict[str, Any]:
    """What determines a source's code object; ``rel`` is its root-relative file."""
    k = kind(kind_name)
    if k.identity is None:
        raise ValueError(f"a {kind_name} source has no code object")
    return k.identity(kind_name, fields, rel)


def stem_of(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> str:
    k = kind(kind_name)
    # The file's name less its extension (rpartition: posixpath.basename, spelled cheaper).
    base = (posixpath.splitext((rel or "").rpartition("/")[2])[0] if k.stem_field == k.file_field
            else str(fields[k.stem_field]))
    return _NOT_STEM.sub("_", base) or "object"


def launch_stem(file: str, kind_name: str, named: str | None, src: _runtime.Source) -> str:
    """``stem_of`` a launch read from the runtime's set (``view_inputs``' arguments). Where
    the stem is the named file's own name, it is read off the name as written: its last
    component is the joined path's unless it is empty, '.' or '..' (those are joined)."""
    k = kind(kind_name)
    if named is not None and k.stem_field == k.file_field:
        last = named.rpartition("/")[2]
        if last not in ("", ".", ".."):
            return _NOT_STEM.sub("_", posixpath.splitext(last)[0]) or "object"
    rel, fields = view_inputs(file, kind_name, named, src)
    return stem_of(kind_name, fields, rel)


def toc_key(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> str:
    """The toc key of a source whose file (if any) is ``rel`` under the root."""
    return key_of(kind_name, fields, rel, identity(kind_name, fields, rel))


def key_of(kind_name: str, fields: Mapping[str, Any], rel: str | None,
           ident: Mapping[str, Any]) -> str:
    """The toc key of a source whose identity is already known."""
    digest = sha256_hex(_identity_json(ident))
    return f"{stem_of(kind_name, fields, rel)}_{digest[:12]}"


def _identity_json(ident: Mapping[str, Any]) -> bytes:
    """``canonical_json(ident)``, spelled directly for a prebuilt object's identity (its
    kind and file, two strings): a tree of 100,000 prebuilt kernels encodes 50,000."""
    if len(ident) == 2:
        kind_name, file = ident.get("kind"), ident.get("file")
        if type(kind_name) is str and type(file) is str:
            return f'{{"file":{_json_string(file)},"kind":{_json_string(kind_name)}}}'.encode()
    return canonical_json(ident)


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


def view_inputs(file: str, kind_name: str, named: str | None,
                src: _runtime.Source) -> tuple[str | None, Mapping[str, Any]]:
    """(root-relative file or None, fields) of a launch read from the runtime's set
    (``DescriptorSet.code_launches``) rather than a model: its kernel's ``file``, the file
    its file field names (``named``; None when it names none) and its ``Source`` view,
    whose fields are read only if the kind's identity or stem asks for them."""
    fields = _ViewFields(src)
    field_name = kind(kind_name).file_field
    if field_name is None:
        return None, fields
    return joined(file, named if named is not None else str(fields[field_name])), fields


def identity_inputs(kind_name: str, fields: Mapping[str, Any], rel: str | None) -> Hashable:
    """What a launch's toc key and identity are made of, as one hashable value: launches
    with equal inputs have one key (each kernel of a unit names its own symbol, and the
    symbol names a kernel within the object, never the object: it is left out). The
    fields' ``repr``: equal texts are equal JSON values of equal types and key order."""
    k = kind(kind_name)
    # Kept where it stems the key (no kind does so today).
    symbol = k.symbol_field if k.symbol_field != k.stem_field else None
    held = fields.plain() if isinstance(fields, _ViewFields) else fields
    return (kind_name, rel, repr([item for item in held.items() if item[0] != symbol]))


def keyed_view(tree: Tree, file: str, json_path: str, kind_name: str, rel: str | None,
               fields: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``keyed`` of the launch at (``file``, ``json_path``) from its ``view_inputs``;
    the key kept in ``tree.toc_keys`` alike."""
    ident = identity(kind_name, fields, rel)
    key = tree.toc_keys[(file, json_path)] = key_of(kind_name, fields, rel, ident)
    return key, ident


class _ViewFields(ReadOnce):
    """A Source view's fields, read from the runtime when first asked (most kinds' toc
    keys need only the file: a tree of many prebuilt objects reads none)."""

    __slots__ = ("_src",)

    def __init__(self, src: _runtime.Source) -> None:
        super().__init__()
        self._src = src

    def _load(self) -> dict[str, Any]:
        return self._src.fields
