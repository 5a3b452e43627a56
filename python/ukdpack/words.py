"""Counts in messages: "1 kernel", "2 kernels", "1 entry", "3 arches"."""

from __future__ import annotations

#: Plurals that are not the noun plus "s".
_IRREGULAR = {"arch": "arches", "entry": "entries", "match": "matches", "kernel's": "kernels'"}


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly one: ``count(1, "launch")`` is "1 launch"."""
    return f"{n:,} {noun if n == 1 else plural or plural_of(noun)}"


def plural_of(noun: str) -> str:
    """The plural of one of ukdpack's nouns (the last word is the one that changes)."""
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR:
        word = _IRREGULAR[last]
    elif last.endswith(("s", "sh", "ch", "x")):
        word = last + "es"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word
