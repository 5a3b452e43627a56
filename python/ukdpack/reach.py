"""Reachability (SPEC 2.4): a generic descriptor ships in a shard only when a KDP
that survives for that arch reaches it (KDP -> matchers, engine, dispatch;
UED -> KMD and UHDs)."""

from __future__ import annotations

from collections.abc import Iterable

from ukdpack.model import Descriptor, Kdp, Kmd, Udd, Ued, Uhd, Umd
from ukdpack.tree import Tree

GENERIC_TYPES = (Udd, Ued, Kmd, Umd, Uhd)


def reached_from(tree: Tree, kdps: Iterable[Kdp]) -> list[Descriptor]:
    """The generic descriptors the given KDPs reach, in file order, each once."""
    keys: set[str] = set()
    for kdp in kdps:
        refs: list[tuple[str | None, type[Descriptor]]] = [(m, Umd) for m in kdp.matchers]
        refs += [(kdp.engine, Ued), (kdp.dispatch, Udd)]
        ued = tree.ued_of(kdp)
        if ued is not None:
            refs.append((ued.metadata, Kmd))
            refs += [(uhd, Uhd) for table in ued.heuristics.values()
                     for ids in table.values() for uhd in ids]
        for ref, cls in refs:
            found = tree.lookup(ref, cls)
            if found is not None:
                keys.add(found.key)
    return [d for d in tree.descriptors if isinstance(d, GENERIC_TYPES) and d.key in keys]


def surviving_kdps(tree: Tree, arch: str | None) -> list[Kdp]:
    """KDPs with at least one kernel in the shard of ``arch`` (None: in any shard)."""
    members = tree.members if arch is None else tree.members_on(arch)
    seen: dict[str, Kdp] = {}
    for m in members:
        seen.setdefault(m.kdp.key, m.kdp)
    return list(seen.values())


def unreachable(tree: Tree, arch: str | None = None) -> list[Descriptor]:
    """Generic descriptors no surviving KDP reaches (for ``arch``, or for any arch)."""
    reached = {d.key for d in reached_from(tree, surviving_kdps(tree, arch))}
    return [d for d in tree.descriptors if isinstance(d, GENERIC_TYPES) and d.key not in reached]
