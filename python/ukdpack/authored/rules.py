"""The rules only the packer can judge, over a tree the runtime has read.

Every rule the runtime applies (ids, references, arch subsets, paths, launch
sets, metadata, packed toc keys, reachability) is the runtime's and arrives in
``Tree.problems``; this module adds what needs the packer's own knowledge:

* two launches built from different inputs must not get one toc key (a
  collision of the 48-bit digest: toc-key identity comes from build inputs,
  which only the packer plans);
* a prebuilt object the runtime found missing is named as the DVC output it is,
  with the command that fetches it (DVC is the packer's business).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Literal

from ukdpack import _runtime
from ukdpack.authored.kinds import COMPILED
from ukdpack.authored.load import Tree
from ukdpack.authored.tockey import identity_inputs, keyed_view, launch_stem, view_inputs
from ukdpack.errors import Problem

if TYPE_CHECKING:
    from ukdpack.authored import dvc

MissingPrebuilt = Literal["error", "warning", "skip"]

#: The runtime's code for a prebuilt object a source names that is not there.
PREBUILT_MISSING = _runtime.Code.PREBUILT_MISSING


def check(tree: Tree, missing_prebuilt: MissingPrebuilt = "error") -> list[Problem]:
    """Every problem of ``tree``: the runtime's, with missing prebuilt objects that are
    DVC outputs not pulled yet reported at ``missing_prebuilt`` severity (``skip``:
    not at all, for the packer, which fails only the arches needing them), plus the
    packer's toc-key rule."""
    # The toc-key rule first: the runtime's whole-set rules run beside it, and
    # ``tree.problems`` waits for them.
    toc_keys = _toc_keys(tree) if tree.authored else []
    return _with_dvc_hints(tree, missing_prebuilt) + toc_keys


def _toc_keys(tree: Tree) -> list[Problem]:
    # The launches come from the runtime's set, not the models: validate builds none
    # (a tree of 100,000 kernels spends a second on them). In the models' order: packs
    # by file, each pack's kernels in order, each kernel's launches by name.
    rows = sorted(tree.dset.code_launches(COMPILED), key=lambda row: row[0])
    # One key is one stem: a launch whose stem no other launch has collides with none,
    # and its digest is left to the plans that need it (a tree of prebuilt objects with
    # files named apart digests none here, nor joins their paths).
    stems = [launch_stem(row[1], row[6], row[7], row[8]) for row in rows]
    shared = {stem for stem, n in Counter(stems).items() if n > 1}
    seen: dict[str, tuple[Any, str, str, str, str]] = {}
    # Each distinct identity is keyed once (a unit's kernels share one object: 1,200
    # launches of the bench's hip tree make 41 keys); its launches take that key.
    made: dict[Hashable, tuple[str, dict[str, Any]]] = {}
    problems = []
    for row, stem in zip(rows, stems, strict=True):
        if stem not in shared:
            continue
        rel, fields = view_inputs(row[1], row[6], row[7], row[8])
        _, file, kernel_path, kernel_id, name, source_path, kind_name, _, _ = row
        inputs = identity_inputs(kind_name, fields, rel)
        found = made.get(inputs)
        if found is None:
            key, ident = made[inputs] = keyed_view(tree, file, source_path, kind_name, rel,
                                                   fields)
        else:
            key, ident = found
            tree.toc_keys[(file, source_path)] = key
        first = seen.setdefault(key, (ident, name, kernel_id, file, kernel_path))
        if first[0] != ident:
            _, first_name, first_id, first_file, first_path = first
            where = first_file if first_path == "$" else f"{first_file}: {first_path}"
            problems.append(Problem(
                file, source_path,
                f"toc key '{key}' is also the toc key of "
                f"{_runtime.kernel_label(first_name, first_id)} "
                f"({where}), built from other inputs (a collision of the "
                "48-bit digest); change either kernel's build inputs", code=_runtime.Code.TOC_KEY_COLLISION))
    return problems


def _with_dvc_hints(tree: Tree, missing_prebuilt: MissingPrebuilt) -> list[Problem]:
    if not any(p.code == PREBUILT_MISSING for p in tree.problems):
        return list(tree.problems)  # the common case: no launch need be looked up
    sources = {(m.ukd.file, src.json_path): (m.ukd, src)
               for m in tree.members for _, src in m.ukd.launches}
    from ukdpack.authored import dvc  # here: only a tree missing a prebuilt file needs it

    outputs: list[dvc.Output] | None = None
    out: list[Problem] = []
    for p in tree.problems:
        found = sources.get((p.file, p.path.removesuffix(".file")))
        if p.code != PREBUILT_MISSING or found is None:
            out.append(p)
            continue
        ukd, src = found
        rel = ukd.file_of(src)
        assert rel is not None
        outputs = dvc.tracked_outputs(tree.root) if outputs is None else outputs
        hint = dvc.missing_hint(tree.root, tree.root / rel, outputs)
        if hint is None:
            out.append(p)
        elif missing_prebuilt != "skip":
            out.append(Problem(p.file, p.path, f"prebuilt object '{src.fields['file']}' is not "
                               f"there: {hint}", missing_prebuilt, p.code))
    return out

