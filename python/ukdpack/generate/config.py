"""The YAML configuration of ``ukdpack generate``, read and checked.

Every problem is named by the YAML path of the field (``$.variants[2].launches.
consume.role``), in the JSON-path notation the rest of ukdpack uses, and all of
them are reported in one run. The generic sections (``kmd``, ``engine``,
``matchers``, ``dispatches``) are the descriptors' own JSON shapes without ``id``
and ``version``, so they are checked by the descriptors' own schemas and the
runtime's parser; packs and variant sets are checked here. The format is
documented in ``docs/generate.md``.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ukdpack import _runtime, jsonpath, schema
from ukdpack.authored.kinds import AUTHORED, KINDS, PACKED
from ukdpack.errors import Problem, UkdError, from_runtime

#: The format version of the configuration this reader reads.
CONFIG_VERSION = 1
Scalar = str | int | float | bool
_SCALARS = (str, int, float, bool)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Bounds on what a config may expand to, checked before anything is built from it, so a
#: hostile or mistaken config is refused at once instead of exhausting memory or time.
DEFAULT_MAX_KERNELS = 100_000  # kernels of all variant sets together (--max-kernels)
MAX_ALIAS_NODES = 100_000  # nodes YAML aliases may add to the document, expanded
MAX_DEPTH = 64  # nesting of mappings and lists, aliases expanded

#: Source fields each kind takes on a variant set (the kinds table's authored fields).
KIND_FIELDS: dict[str, tuple[str, ...]] = {n: KINDS[n].fields for n in AUTHORED}
#: Fields each kind's source must end up with, on the set or on every launch (the
#: generator writes ``{}`` for a build or a builder's spec left out).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    n: tuple(f.name for f in KINDS[n].field_rows if f.required and f.type not in ("build", "object"))
    for n in AUTHORED}
#: Fields that label a launch without making it another launch (a builder's ``role``).
#: A set or launch of any kind may write one: the runtime, judging what is generated,
#: says which kinds take it.
LABELS = ("role",)
_TOP_KEYS = ("version", "namespace", "kmd", "engine", "matchers", "dispatches", "packs",
             "variants")
_PACK_KEYS = ("name", "dispatch", "matchers", "arch", "slot")
_VARIANT_KEYS = ("pack", "name", "priority", "metadata", "params", "arches", "kind",
                 "launches")


@dataclass(frozen=True)
class Generic:
    """A generic descriptor as written in the config: its JSON body without id/version."""

    name: str
    body: Mapping[str, Any]
    path: str  # YAML path of its section


@dataclass(frozen=True)
class Pack:
    name: str
    dispatch: str | None  # a dispatch's name
    matchers: tuple[str, ...]  # matchers' names
    arch: tuple[str, ...]
    path: str
    slot: str | None = None  # the engine's slot its kernels fill (a slotted engine)


@dataclass(frozen=True)
class VariantSet:
    """One entry of ``variants``: templates expanded once per (parameter row, arch)."""

    path: str
    pack: str
    name: Any  # template of the kernel name
    priority: Any
    metadata: Any
    rows: tuple[Mapping[str, Scalar], ...]  # parameter rows; one empty row when none
    arches: tuple[str, ...] | None  # one kernel per arch, arch narrowed; None: the pack's
    kind: str
    fields: Mapping[str, Any]  # the source fields set on the variant set (templates)
    launches: tuple[tuple[str, Mapping[str, Any]], ...] | None  # name -> override


@dataclass(frozen=True)
class Config:
    file: str  # the config's file name, as generated files name it
    namespace: str
    kmd: Generic
    engine: Generic
    matchers: tuple[Generic, ...]
    dispatches: tuple[Generic, ...]
    packs: tuple[Pack, ...]
    variants: tuple[VariantSet, ...] = field(default=())


class _BadYaml(Exception):
    def __init__(self, mark: Any, message: str) -> None:
        super().__init__(message)
        self.mark = mark


class _Refused(Exception):
    """Problems of a composed YAML document, by YAML path, found before it is built."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(m for _, m in problems))
        self.problems = problems


_TAG = "tag:yaml.org,2002:"
#: What YAML reads a value with no JSON form as, and what to write instead.
_NO_JSON = {
    _TAG + "timestamp": ("a YAML timestamp (a date)", "quote it to keep it text"),
    _TAG + "binary": ("!!binary data", "write a string"),
    _TAG + "set": ("a !!set", "write a list"),
    _TAG + "omap": ("an !!omap", "write a mapping"),
    _TAG + "pairs": ("!!pairs", "write a mapping"),
    _TAG + "value": ("a YAML value key", "quote it to keep it text"),
}


def _no_json(node: yaml.Node) -> str:
    """Why ``node``, whose tag has no JSON form, is refused, and what to write instead."""
    what, fix = _NO_JSON.get(node.tag, (None, "a config holds mappings, lists, strings, "
                                               "numbers, booleans and null"))
    if what is None:
        tag = "!!" + node.tag[len(_TAG):] if node.tag.startswith(_TAG) else node.tag
        what = f"tagged '{tag}'"
    shown = node.value if isinstance(node, yaml.ScalarNode) else None
    subject = (f"'{shown}'" if len(shown) <= 40 else f"'{shown[:37]}...'") \
        if shown is not None else "this"
    return f"{subject} is {what}, which has no JSON form; {fix}"


class _Loader(yaml.SafeLoader):
    """A safe loader that refuses repeated keys (the last would silently win) and keys
    that are not strings (a YAML ``on:`` key is a boolean), and checks the composed
    document before building it: only JSON's kinds of value, finite numbers, bounded
    nesting, and aliases that do not multiply it (a "billion laughs" document)."""

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        found = _check_document(self, node)
        if found:
            raise _Refused(found)
        return self.construct_document(node)


def _check_document(loader: _Loader, root: yaml.Node) -> list[tuple[str, str]]:
    """Problems of the composed document ``root``, by YAML path. It is walked once per
    distinct node, so an alias costs what the node it names cost, not its expansion."""
    problems: list[tuple[str, str]] = []
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
    started: set[int] = set()
    added = 0  # nodes the aliases met so far add to the document
    # (node, YAML path, depth, children: None on the way down, else the ones to sum up)
    stack: list[tuple[yaml.Node, str, int, list[yaml.Node] | None]] = [(root, "$", 1, None)]
    while stack:
        node, path, depth, kids = stack.pop()
        key = id(node)
        if kids is not None:  # on the way up: every child is done
            size = 1 + sum(done[id(k)][0] for k in kids)
            height = 1 + max((done[id(k)][1] for k in kids), default=0)
            done[key] = (size, height)
            started.discard(key)
            continue
        if key in done:  # an alias of a node checked already: count what it adds
            size, height = done[key]
            added += size
            if added > MAX_ALIAS_NODES:
                return [(path, f"YAML aliases here expand the document by more than "
                         f"{MAX_ALIAS_NODES:,} nodes (aliases of aliases multiply); write "
                         "the values out, or alias fewer")]
            if depth - 1 + height > MAX_DEPTH:
                return [(path, f"nested more than {MAX_DEPTH} levels deep (aliases "
                         "expanded); a config needs far fewer")]
            continue
        if key in started:
            return [(path, "this YAML alias names a mapping or list that holds it; a "
                     "recursive structure has no JSON form")]
        if depth > MAX_DEPTH:
            return [(path, f"nested more than {MAX_DEPTH} levels deep; a config needs far "
                     "fewer")]
        started.add(key)
        children = _children(node, path)
        if isinstance(node, yaml.ScalarNode):
            message = _scalar_problem(loader, node)
            if message is not None:
                problems.append((path, f"{message} (line {node.start_mark.line + 1})"))
        elif node.tag not in (_TAG + "map", _TAG + "seq"):
            problems.append((path, f"{_no_json(node)} (line {node.start_mark.line + 1})"))
        stack.append((node, path, depth, [k for k, _ in children]))
        stack += [(k, p, depth + 1, None) for k, p in reversed(children)]
    return problems


def _children(node: yaml.Node, path: str) -> list[tuple[yaml.Node, str]]:
    """A node's children with their YAML paths; a merge key's (``<<: *base``) lie at the
    mapping's own path, where they are merged."""
    if isinstance(node, yaml.SequenceNode):
        return [(v, jsonpath.index(path, i)) for i, v in enumerate(node.value)]
    if not isinstance(node, yaml.MappingNode):
        return []
    out: list[tuple[yaml.Node, str]] = []
    for k, v in node.value:
        out.append((k, path))
        if k.tag == _TAG + "merge":
            out.append((v, path))
        else:
            name = k.value if isinstance(k, yaml.ScalarNode) else "?"
            out.append((v, jsonpath.key(path, str(name))))
    return out


def _scalar_problem(loader: _Loader, node: yaml.ScalarNode) -> str | None:
    """Why a scalar has no JSON value, or None."""
    tag = node.tag
    if tag in (_TAG + "str", _TAG + "null", _TAG + "merge"):
        return None
    build = {_TAG + "int": loader.construct_yaml_int, _TAG + "float":
             loader.construct_yaml_float, _TAG + "bool": loader.construct_yaml_bool}.get(tag)
    if build is None:
        return _no_json(node)
    try:
        value = build(node)
    except (ValueError, KeyError):  # an explicit tag on text that is no such value
        return f"'{node.value}' is not a YAML {tag[len(_TAG):]}"
    if isinstance(value, float) and not math.isfinite(value):
        return (f"'{node.value}' is not a finite number, and JSON has no infinity or NaN; "
                "write a number")
    return None


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise _BadYaml(key_node.start_mark, f"expected a string key, found "
                           f"{_found(key)}; quote it")
        if key in out:
            raise _BadYaml(key_node.start_mark, f"key '{key}' appears twice in one mapping "
                           f"(first on line {lines[key]}); the last would silently win")
        lines[key] = key_node.start_mark.line + 1
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _found(value: Any) -> str:
    """How a found value reads in messages: as in the descriptor rules, with YAML's
    names for containers."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None or isinstance(value, (str, bool, int, float)):
        return schema.describe(value)
    return type(value).__name__


def load_yaml(path: Path) -> Any:
    """The YAML document at ``path``; UkdError naming the line of a syntax problem, or
    the YAML path of a value with no JSON form."""
    name = path.name
    try:
        # Not a FIFO or device: reading one could wait, or read, forever.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UkdError(Problem(str(path), "", "cannot read the config: not a regular "
                                   "file"))
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UkdError(Problem(str(path), "", f"cannot read the config: {e.strerror}")) from None
    except UnicodeDecodeError as e:
        raise UkdError(Problem(name, "", f"not UTF-8 text: {e.reason} at byte {e.start}")
                       ) from None
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: builds no objects
    except _Refused as e:
        raise UkdError([Problem(name, p, m) for p, m in e.problems]) from None
    except _BadYaml as e:
        raise UkdError(Problem(name, "", f"line {e.mark.line + 1}, column "
                               f"{e.mark.column + 1}: {e}")) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise UkdError(Problem(name, "", f"{where}not valid YAML: {e.problem}")) from None
    except yaml.YAMLError as e:
        raise UkdError(Problem(name, "", f"not valid YAML: {e}")) from None
    except RecursionError:  # the composer recurses once per level, before our depth check
        raise UkdError(Problem(name, "", f"nested more than {MAX_DEPTH} levels deep; a "
                               "config needs far fewer")) from None


class _Reader:
    """Reads sections of the config, collecting every problem."""

    def __init__(self, file: str, max_kernels: int = DEFAULT_MAX_KERNELS) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self.max_kernels = max_kernels
        self.kernels = 0  # kernels the variant sets read so far make

    def file_name(self, name: str, path: str) -> None:
        """A descriptor's name becomes its file name at the top of the out folder: no
        folders, and no dot files (validate and pack skip those)."""
        if "/" in name or "\\" in name:
            self.fail(path, f"'{name}' holds a path separator, but it names a file at the top "
                      "of the out folder; use letters, digits, '_', '.' and '-'")
        elif name.startswith("."):
            self.fail(path, f"'{name}' starts with '.', so its file would be hidden (validate "
                      "and pack skip dot files); start it with a letter or digit")

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file, path, message))

    def mapping(self, value: Any, path: str, what: str, allowed: Sequence[str],
                required: Sequence[str] = ()) -> Mapping[str, Any] | None:
        if not isinstance(value, Mapping):
            self.fail(path, f"expected {what} (a mapping), found {_found(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.fail(jsonpath.key(path, key), f"unknown key '{key}' in {what}; expected "
                          f"one of {', '.join(allowed)}")
        for key in required:
            if key not in value:
                self.fail(path, f"{what} misses required key '{key}'")
        return value

    def string(self, value: Any, path: str, pattern: re.Pattern[str] | None = None,
               expect: str = "a non-empty string") -> str | None:
        if not isinstance(value, str) or not value or (pattern and not pattern.match(value)):
            self.fail(path, f"expected {expect}, found {_found(value)}")
            return None
        return value

    def names(self, value: Any, path: str, what: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list of {what}, found {_found(value)}")
            return ()
        out = []
        for i, item in enumerate(value):
            s = self.string(item, jsonpath.index(path, i), expect=f"the name of {what[:-1]}")
            if s is not None:
                out.append(s)
        return tuple(out)

    def arches(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list of arch ids, found {_found(value)}")
            return ()
        out: list[str] = []
        seen: set[str] = set()  # a set: a long list must not cost its square
        for i, a in enumerate(value):
            where = jsonpath.index(path, i)
            if not isinstance(a, str) or not _runtime.is_arch_name(a) or _runtime.bare_arch(a) != a:
                self.fail(where, f"expected a bare arch id such as gfx90a or sm_90, found "
                          f"{_found(a)}")
            elif a in seen:
                self.fail(where, f"arch '{a}' is listed twice")
            else:
                out.append(a)
                seen.add(a)
        return tuple(out)

    # -- generic descriptors -----------------------------------------------------

    def generic(self, value: Any, path: str, dtype: str, what: str,
                forbidden: Sequence[str] = ()) -> Generic | None:
        """A generic section: its descriptor's body, checked by that descriptor's schema
        (with a placeholder id and version, which generate writes)."""
        if not isinstance(value, Mapping):
            self.fail(path, f"expected {what} (a mapping), found {_found(value)}")
            return None
        for key in ("id", "version", *forbidden):
            if key in value:
                self.fail(jsonpath.key(path, key), f"'{key}' is written by generate; leave it "
                          "out of the config")
        body = {k: v for k, v in value.items() if k not in ("id", "version", *forbidden)}
        doc: dict[str, Any] = {"id": "generated", "version": version_of(dtype, body), **body}
        if dtype == "ued":
            doc["metadata"] = "generated"
        # The runtime's parser is the one judge of shape.
        found = [(d.path, d.message) for d in (
            from_runtime(x) for x in _runtime.check_descriptor(dtype, doc, self.file))
            if d.severity == "error"]
        for p, m in found:
            self.fail(path + p[1:] if p.startswith("$") else path, m)
        name = body.get("name")
        if found or not isinstance(name, str):
            return None
        # The UED's file is named by the local part of its name (after the last ':').
        self.file_name(name.rpartition(":")[2] if dtype == "ued" else name,
                       jsonpath.key(path, "name"))
        return Generic(name, body, path)

    # -- packs -------------------------------------------------------------------

    def pack(self, value: Any, path: str) -> Pack | None:
        obj = self.mapping(value, path, "a pack", _PACK_KEYS, ("name", "dispatch"))
        if obj is None:
            return None
        name = self.string(obj.get("name"), jsonpath.key(path, "name"))
        if name is not None:  # a bad file name refuses the config, but the pack resolves
            self.file_name(name, jsonpath.key(path, "name"))
        dispatch = obj.get("dispatch")
        if dispatch is not None:
            dispatch = self.string(dispatch, jsonpath.key(path, "dispatch"),
                                   expect="the name of a dispatch, or null")
        matchers = self.names(obj.get("matchers", []), jsonpath.key(path, "matchers"),
                              "matchers")
        arch = self.arches(obj.get("arch", []), jsonpath.key(path, "arch"))
        slot = None
        if "slot" in obj:
            slot = self.string(obj["slot"], jsonpath.key(path, "slot"),
                               expect="the name of a slot of the engine")
        if name is None or ("dispatch" in obj and obj["dispatch"] is not None
                            and dispatch is None) or ("slot" in obj and slot is None):
            return None
        return Pack(name, dispatch, matchers, arch, path, slot)

    # -- variant sets ------------------------------------------------------------

    def rows(self, value: Any, path: str, reserved: Sequence[str], per_row: int
             ) -> tuple[dict[str, Scalar], ...]:
        """``params``: a mapping of value lists (their product, in key order, the last key
        varying fastest) or a list of rows; each row makes ``per_row`` kernels. A grid
        over the kernel limit is refused before it is made."""
        def names_ok(row: Mapping[str, Any], where: str) -> bool:
            ok = True
            for k, v in row.items():
                if not _NAME.match(k):
                    self.fail(jsonpath.key(where, k), f"expected a parameter name matching "
                              f"[A-Za-z_][A-Za-z0-9_]*, found '{k}'")
                    ok = False
                elif k in reserved:
                    self.fail(jsonpath.key(where, k), f"parameter '{k}' is reserved: "
                              "'{arch}' is the arch of each kernel of 'arches'")
                    ok = False
                elif not isinstance(v, list) and not isinstance(v, _SCALARS):
                    self.fail(jsonpath.key(where, k), f"expected a scalar parameter value, "
                              f"found {_found(v)}")
                    ok = False
            return ok

        if value is None:
            return ({},) if self.within_limit(per_row, path, f"{per_row} arches"
                                              if per_row > 1 else "") else ()
        if isinstance(value, Mapping):
            if not value:
                self.fail(path, "expected at least one parameter, found an empty mapping")
                return ()
            if not names_ok({k: v if isinstance(v, list) else [] for k, v in value.items()},
                            path):
                return ()
            lists: list[list[Scalar]] = []
            ok = True
            for k, v in value.items():
                where = jsonpath.key(path, k)
                if not isinstance(v, list) or not v:
                    self.fail(where, f"expected a non-empty list of values, found {_found(v)}")
                    ok = False
                    continue
                for i, item in enumerate(v):
                    if not isinstance(item, _SCALARS):
                        self.fail(jsonpath.index(where, i), f"expected a scalar parameter "
                                  f"value, found {_found(item)}")
                        ok = False
                lists.append(list(v))
            if not ok:
                return ()
            count = math.prod(len(v) for v in lists)
            if not self.within_limit(count * per_row, path, " x ".join(
                    str(len(v)) for v in lists) + (f" x {per_row} arches" if per_row > 1
                                                   else "")):
                return ()
            keys = list(value)
            return tuple(dict(zip(keys, combo, strict=True))
                         for combo in itertools.product(*lists))
        if isinstance(value, list):
            if not value:
                self.fail(path, "expected at least one row of parameters, found an empty list")
                return ()
            if not self.within_limit(len(value) * per_row, path, f"{len(value)} rows"
                                     + (f" x {per_row} arches" if per_row > 1 else "")):
                return ()
            out = []
            for i, row in enumerate(value):
                where = jsonpath.index(path, i)
                if not isinstance(row, Mapping):
                    self.fail(where, f"expected a row of parameters (a mapping), found "
                              f"{_found(row)}")
                elif names_ok(row, where) and not any(isinstance(v, list)
                                                      for v in row.values()):
                    out.append(dict(row))
                else:
                    for k, v in row.items():
                        if isinstance(v, list):
                            self.fail(jsonpath.key(where, k), "expected a scalar parameter "
                                      "value, found a list")
            return tuple(out) if len(out) == len(value) else ()
        self.fail(path, f"expected parameters: a mapping of value lists (their product) or a "
                  f"list of rows, found {_found(value)}")
        return ()

    def within_limit(self, count: int, path: str, how: str) -> bool:
        """Counts ``count`` more kernels; False (and a problem at ``path``) past the limit."""
        before = self.kernels
        if before + count <= self.max_kernels:
            self.kernels += count
            return True
        self.fail(path, f"makes {count:,} kernel{'s' if count != 1 else ''}"
                  + (f" ({how})" if how else "")
                  + (f", {before + count:,} with the variant sets before it" if before else "")
                  + f", over the limit of {self.max_kernels:,}; split the grid, or raise "
                  "--max-kernels if you mean it")
        return False

    def variant(self, value: Any, path: str) -> VariantSet | None:
        kind = value.get("kind") if isinstance(value, Mapping) else None
        source_keys = _source_keys(kind)
        allowed = (*_VARIANT_KEYS, *source_keys)
        before = len(self.problems)
        obj = self.mapping(value, path, "a variant set" + (f" of kind {kind}" if source_keys
                                                           else ""),
                           allowed, ("pack", "name", "kind"))
        if obj is None:
            return None
        kind_path = jsonpath.key(path, "kind")
        if "kind" in obj and kind not in KIND_FIELDS:
            if kind == PACKED:
                self.fail(kind_path, f"kind '{kind}' is the packed form written by the packer; "
                          f"a config names what to build ({_runtime.listed_kinds(True)})")
            else:
                self.fail(kind_path, f"expected one of {', '.join(KIND_FIELDS)}, found "
                          f"{_found(kind)}")
        pack = self.string(obj.get("pack"), jsonpath.key(path, "pack"),
                           expect="the name of a pack")
        arches = (self.arches(obj["arches"], jsonpath.key(path, "arches"))
                  if "arches" in obj else None)
        if arches is not None and not arches and "arches" in obj:
            self.fail(jsonpath.key(path, "arches"), "expected at least one arch (leave "
                      "'arches' out for kernels that run on every arch of their pack)")
        rows = self.rows(obj.get("params"), jsonpath.key(path, "params"), ("arch",),
                         len(arches) if arches else 1)
        fields = {k: v for k, v in obj.items() if k in source_keys}
        launches = None
        if "launches" in obj:
            launches = self.launches(obj["launches"], jsonpath.key(path, "launches"),
                                     str(kind))
        elif isinstance(kind, str) and kind in REQUIRED_FIELDS:
            for key in REQUIRED_FIELDS[kind]:
                if key not in fields:
                    self.fail(path, f"a {kind} variant set misses '{key}'")
        if "metadata" in obj and not isinstance(obj["metadata"], Mapping):
            self.fail(jsonpath.key(path, "metadata"), f"expected a mapping of metadata values, "
                      f"found {_found(obj['metadata'])}")
        if len(self.problems) != before or pack is None or not isinstance(kind, str):
            return None
        return VariantSet(path, pack, obj["name"], obj.get("priority", 0),
                          obj.get("metadata", {}), rows, arches, kind, fields, launches)

    def launches(self, value: Any, path: str, kind: str
                 ) -> tuple[tuple[str, Mapping[str, Any]], ...] | None:
        if kind not in KIND_FIELDS:
            return None  # the kind is reported
        if not isinstance(value, Mapping):
            self.fail(path, f"expected a mapping of launch name to override, found "
                      f"{_found(value)}")
            return None
        if len(value) < 2:
            self.fail(path, f"expected at least two launches (a multi-launch kernel), found "
                      f"{len(value)}; a single-launch kernel names its source on the variant "
                      "set")
        allowed = KIND_FIELDS[kind]
        out = []
        for name, override in value.items():
            where = jsonpath.key(path, name)
            if not _runtime.is_launch_name(name):
                self.fail(where, f"expected a launch name matching [A-Za-z][A-Za-z0-9_]*, "
                          f"found '{name}'")
                continue
            if not override:  # {} or null: the launch would be its kernel source unchanged
                self.fail(where, f"launch '{name}' overrides nothing; each launch sets what "
                          f"differs from its kernel source ({', '.join(allowed)})")
                continue
            if not isinstance(override, Mapping):
                self.fail(where, f"expected the fields launch '{name}' overrides (a mapping), "
                          f"found {_found(override)}")
                continue
            for key in override:
                if key not in allowed and key not in LABELS:
                    self.fail(jsonpath.key(where, key), f"a launch inherits its kernel "
                              f"source's kind ('{kind}') and may override only "
                              f"{', '.join(allowed)}; found '{key}'")
            out.append((name, override))
        return tuple(out)


def _source_keys(kind: Any) -> tuple[str, ...]:
    """The source fields a variant set of ``kind`` may write: its kind's, and the labels."""
    fields = KIND_FIELDS.get(kind, ()) if isinstance(kind, str) else ()
    return (*fields, *(f for f in LABELS if f not in fields)) if fields else ()


def version_of(dtype: str, body: Mapping[str, Any]) -> str:
    """The ``version`` generate writes for a generic descriptor of ``dtype`` with ``body``:
    the lowest that holds its fields (a UDD with ``launches``, a UED with ``slots`` is
    1.1)."""
    newer = {"udd": "launches", "ued": "slots"}.get(dtype)
    return "1.1" if newer is not None and newer in body else "1.0"


def _unique(reader: _Reader, items: Sequence[Generic | Pack], what: str) -> None:
    seen: dict[str, str] = {}
    for item in items:
        first = seen.setdefault(item.name, item.path)
        if first != item.path:
            reader.fail(jsonpath.key(item.path, "name"), f"{what} '{item.name}' is also the name "
                        f"of {first}; names are unique per type (ids are made from them)")


def read_config(path: Path, max_kernels: int = DEFAULT_MAX_KERNELS) -> Config:
    """The checked config at ``path``; UkdError with every problem found. Variant sets
    that would make more than ``max_kernels`` kernels in all are refused unexpanded."""
    doc = load_yaml(path)
    r = _Reader(path.name, max_kernels)
    top = r.mapping(doc, "$", "a generate config", _TOP_KEYS,
                    ("version", "namespace", "kmd", "engine", "packs", "variants"))
    if top is None:
        raise UkdError(r.problems)
    if "version" in top and top["version"] != CONFIG_VERSION:
        r.fail("$.version", f"expected config version {CONFIG_VERSION}, found "
               f"{_found(top['version'])}")
    namespace = r.string(top.get("namespace"), "$.namespace",
                         expect="a namespace (a non-empty string that seeds every id)")
    kmd = r.generic(top.get("kmd"), "$.kmd", "kmd", "the metadata schema (KMD)")
    engine = r.generic(top.get("engine"), "$.engine", "ued", "the engine (UED)",
                       forbidden=("metadata",))

    def listed(key: str, what: str) -> list[Any]:
        value = top.get(key, [])
        if not isinstance(value, list):
            r.fail(f"$.{key}", f"expected a list of {what}, found {_found(value)}")
            return []
        return value

    matchers = [m for i, v in enumerate(listed("matchers", "matchers (UMD)"))
                if (m := r.generic(v, f"$.matchers[{i}]", "umd", "a matcher (UMD)"))]
    dispatches = [d for i, v in enumerate(listed("dispatches", "dispatches (UDD)"))
                  if (d := r.generic(v, f"$.dispatches[{i}]", "udd", "a dispatch (UDD)"))]
    packs = [p for i, v in enumerate(listed("packs", "packs (KDP)"))
             if (p := r.pack(v, f"$.packs[{i}]"))]
    variants = [s for i, v in enumerate(listed("variants", "variant sets"))
                if (s := r.variant(v, f"$.variants[{i}]"))]
    if "packs" in top and not top["packs"]:
        r.fail("$.packs", "expected at least one pack")
    if "variants" in top and not top["variants"]:
        r.fail("$.variants", "expected at least one variant set")
    _unique(r, matchers, "matcher")
    _unique(r, dispatches, "dispatch")
    _unique(r, packs, "pack")
    # A pack named only by variant sets that failed their own checks is not also empty.
    named = {v.get("pack") for v in top.get("variants", []) if isinstance(v, Mapping)} \
        if isinstance(top.get("variants"), list) else set()
    _references(r, kmd, engine, matchers, dispatches, packs, variants, named)
    if r.problems:
        raise UkdError(r.problems)
    assert namespace is not None and kmd is not None and engine is not None
    return Config(path.name, namespace, kmd, engine, tuple(matchers), tuple(dispatches),
                  tuple(packs), tuple(variants))


def _references(r: _Reader, kmd: Generic | None, engine: Generic | None,
                matchers: Sequence[Generic], dispatches: Sequence[Generic],
                packs: Sequence[Pack], variants: Sequence[VariantSet], named: set[Any]) -> None:
    """Names that refer to other sections resolve; arches fit their pack's."""
    # The runtime's parser checked the engine's shape: slots is a list of slots with names.
    slots = [sl.get("name") for sl in engine.body.get("slots", [])] if engine else []
    if kmd is not None and engine is not None:
        fields = [f.get("name") for f in kmd.body.get("fields", [])]
        knobs = [(f"$.engine.knobs[{i}]", k) for i, k in enumerate(engine.body.get("knobs", []))]
        knobs += [(f"$.engine.slots[{i}].knobs[{j}]", k)
                  for i, sl in enumerate(engine.body.get("slots", []))
                  for j, k in enumerate(sl.get("knobs", []))]
        for where, knob in knobs:
            if knob not in fields:
                r.fail(where, f"knob '{knob}' is no field of the KMD; "
                       f"expected one of {', '.join(map(str, fields)) or '(none)'}")
    matcher_names = {m.name for m in matchers}
    dispatch_names = {d.name for d in dispatches}
    by_name = {p.name: p for p in packs}
    used: set[str] = set()
    for p in packs:
        if engine is not None and p.slot is not None and p.slot not in slots:
            r.fail(jsonpath.key(p.path, "slot"), f"'{p.slot}' names no slot of $.engine.slots; "
                   f"expected one of {', '.join(map(str, slots)) or '(none: the engine has no slots; leave slot out)'}")
        elif engine is not None and p.slot is None and slots:
            r.fail(p.path, f"pack '{p.name}' names no slot, but the engine has slots; add "
                   f"'slot: <one of {', '.join(map(str, slots))}>'")
        if p.dispatch is not None and p.dispatch not in dispatch_names:
            r.fail(jsonpath.key(p.path, "dispatch"), f"'{p.dispatch}' names no dispatch of "
                   f"$.dispatches; expected one of {', '.join(sorted(dispatch_names)) or '(none)'}"
                   ", or null")
        for i, m in enumerate(p.matchers):
            if m not in matcher_names:
                r.fail(jsonpath.index(jsonpath.key(p.path, "matchers"), i), f"'{m}' names no "
                       f"matcher of $.matchers; expected one of "
                       f"{', '.join(sorted(matcher_names)) or '(none)'}")
    for s in variants:
        pack = by_name.get(s.pack)
        if pack is None:
            r.fail(jsonpath.key(s.path, "pack"), f"'{s.pack}' names no pack of $.packs; "
                   f"expected one of {', '.join(sorted(by_name)) or '(none)'}")
            continue
        used.add(pack.name)
        pack_arch = set(pack.arch)
        for i, a in enumerate(s.arches or ()):
            if pack_arch and a not in pack_arch:
                r.fail(jsonpath.index(jsonpath.key(s.path, "arches"), i), f"arch '{a}' is not "
                       f"an arch of pack '{pack.name}' [{', '.join(pack.arch)}]; a kernel's "
                       "arch is a subset of its pack's")
    for p in packs:
        if p.name not in used and p.name not in named:
            r.fail(p.path, f"pack '{p.name}' has no kernels: no variant set names it")
