"""Writing the starter tree of ``ukdpack init`` (see ``ukdpack.init``).

Template files are copied with ``string.Template`` placeholders filled in: the engine
name, its local part, a C symbol prefix made from it, and one fresh UUID per
descriptor (ids must be unique among every tree a library loads, so two trees made
by ``init`` never share one). The tree is written into a hidden folder beside ``DIR``
and renamed into place (into an existing empty ``DIR``, entry by entry), so a failure
or an interrupt leaves no half-written ``DIR``.

``--slots`` fills the same templates as a slotted engine (UED and KDP 1.1): slots
``prep`` (scale), ``reduce`` (the two-launch twostage) and ``finish`` (two candidates,
knob ``finish.block``), in that run order; ``finish.kdp.json`` is written only then.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import string
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ukdpack.errors import UkdError, UsageError
from ukdpack.files import found_at
from ukdpack.init import DEFAULT_NAME
from ukdpack.schema import load_schema

#: Descriptors given an id each; the template names them ``${id_<key>}``.
ID_KEYS = ("ued", "kmd", "umd", "scale_udd", "twostage_udd", "scale_kdp", "twostage_kdp",
           "scale_ukd", "twostage_ukd")
#: The ids only ``--slots`` writes (``finish.kdp.json``).
SLOT_ID_KEYS = ("finish_kdp", "finish_wide_ukd", "finish_narrow_ukd")
#: The slots ``--slots`` writes, in run order: (name, knobs, the template pack filling it).
SLOTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("prep", (), "scale"), ("reduce", (), "twostage"), ("finish", ("block",), "finish"))
#: Template files written only with ``--slots``.
SLOT_ONLY = frozenset({"finish.kdp.json"})


@dataclass(frozen=True)
class Scaffold:
    """What ``write`` made: the folder, the engine name and the files, relative."""

    root: Path
    engine_name: str
    files: tuple[str, ...]
    handlers: Path


def engine_name_pattern() -> str:
    """The UED ``name`` pattern, read from the shipped schema (the one statement of it)."""
    pattern: str = load_schema("ued-1.0.schema.json")["properties"]["name"]["pattern"]
    return pattern


def check_name(name: str) -> None:
    """UsageError unless ``name`` is a valid engine name ``namespace:local``."""
    if re.fullmatch(engine_name_pattern(), name) is None:
        raise UsageError(f"--name {name!r}: expected a scoped engine name 'namespace:local' "
                         "of letters, digits, '_', '.' and '-' (e.g. mylib:kernels)")


def symbol_prefix(name: str) -> str:
    """A C identifier made from the engine name: ``my-lib:kernels`` -> ``my_lib_kernels``."""
    prefix = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return prefix if not prefix[0].isdigit() else f"k{prefix}"


def check_dir(folder: Path) -> None:
    """UsageError unless ``folder`` is absent or an empty folder (nothing is written)."""
    if not os.path.lexists(folder):
        # The nearest existing ancestor must be a folder to create DIR in: a file on the
        # way would otherwise surface as "File exists" from mkdir.
        for above in Path(os.path.abspath(folder)).parents:
            if os.path.lexists(above):
                if not above.is_dir():
                    raise UsageError(f"{folder}: cannot create it: {above} is "
                                     f"{found_at(above)}, not a folder; nothing was written")
                break
        return
    if folder.is_symlink() or not folder.is_dir():
        # A link is refused whatever it points to: the tree would land elsewhere.
        found = (f"a symbolic link (-> {os.readlink(folder)})" if folder.is_symlink()
                 else found_at(folder))
        raise UsageError(f"{folder}: expected a new or empty folder, found {found}; "
                         "nothing was written")
    entries = sorted(os.listdir(folder))
    if entries:
        raise UsageError(f"{folder}: expected a new or empty folder; it holds {len(entries)} "
                         f"entr{'y' if len(entries) == 1 else 'ies'} (first: {entries[0]!r}); "
                         "nothing was written")


def _template() -> Traversable:
    return resources.files("ukdpack.init").joinpath("template")


def _walk(node: Traversable, rel: str = "") -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name == "__pycache__":
            continue
        path = f"{rel}{child.name}"
        if child.is_dir():
            yield from _walk(child, path + "/")
        else:
            yield path, child


def _slots_member(slots: bool) -> str:
    """The UED's ``slots`` member as the template writes it (after ``sdk_version``)."""
    if not slots:
        return ""
    docs = [{"name": n, **({"knobs": list(k)} if k else {})} for n, k, _ in SLOTS]
    text = json.dumps(docs, indent=2).replace("\n", "\n  ")
    return f',\n  "slots": {text}'


def values(name: str, slots: bool = False) -> dict[str, str]:
    """The placeholder values for engine ``name``, with fresh ids; a slotted engine's
    with ``slots``."""
    local = name.split(":", 1)[1]
    out = {"engine_name": name, "local": local, "prefix": symbol_prefix(name),
           "ued_version": "1.1" if slots else "1.0", "kdp_version": "1.1" if slots else "1.0",
           "slots": _slots_member(slots)}
    out.update({f"slot_{pack}": f'  "slot": "{n}",\n' if slots else "" for n, _, pack in SLOTS})
    out.update({f"id_{k}": str(uuid.uuid4()) for k in (*ID_KEYS, *SLOT_ID_KEYS)})
    return out


def render(name: str, slots: bool = False) -> dict[str, str]:
    """Every file of the starter tree by relative path, placeholders filled in."""
    filled = values(name, slots)
    return {rel: string.Template(f.read_text(encoding="utf-8")).substitute(filled)
            for rel, f in _walk(_template()) if slots or rel not in SLOT_ONLY}


def write(folder: Path, name: str = DEFAULT_NAME, slots: bool = False) -> Scaffold:
    """Write the starter tree to ``folder`` (absent or empty); UsageError, with nothing
    written, for a bad name or a folder that holds something; UkdError when writing fails
    (then too nothing is left: the staging folder, what was moved and the parents made are
    removed). ``slots``: a slotted engine (three slots)."""
    check_name(name)
    check_dir(folder)
    files = render(name, slots)
    target = Path(os.path.abspath(folder))  # "." and ".." resolved, links kept
    parent = target.parent
    made = [p for p in (parent, *parent.parents) if not p.exists()]
    staging: Path | None = None
    moved: list[Path] = []
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.init-", dir=parent))
        for rel, text in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if target.is_dir():
            # An empty folder stays (it may be a shell's working folder, or carry an owner
            # and mode of its own): the tree's top-level entries move into it.
            check_dir(folder)
            for entry in sorted(staging.iterdir()):
                os.rename(entry, target / entry.name)
                moved.append(target / entry.name)
            staging.rmdir()
        else:
            staging.chmod(0o777 & ~_umask())
            os.rename(staging, target)
    except BaseException as e:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for m in moved:
            if m.is_dir():
                shutil.rmtree(m, ignore_errors=True)
            else:
                m.unlink(missing_ok=True)
        for p in made:  # the parents this call made, innermost first
            with contextlib.suppress(OSError):
                p.rmdir()
        if isinstance(e, OSError):
            raise UkdError(f"{folder}: cannot write the tree: {e.strerror or e}; nothing "
                           "was written") from None
        raise
    return Scaffold(folder, name, tuple(sorted(files)), folder / "handlers.json")


def _umask() -> int:
    """The process's umask (mkdtemp makes a private folder; DIR gets the usual mode)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask

