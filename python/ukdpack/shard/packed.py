"""The packed form of a shard's descriptors.

* every compiled source becomes exactly ``{"kind": "kpack", "library", "toc_key",
  "symbol", "sha256", "signature"}``; ``sources`` entries are written in launch-name
  order, since key order carries no meaning;
* ``library`` goes from the descriptor's folder to ``kpack/<archive>`` (inline UKDs
  count from their KDP's folder);
* ``arch`` is narrowed to the shard; UKD ``provenance`` moves to the sidecar;
* compact JSON, comments gone, ``kernelDescriptors`` last;
* a top-level ``$schema`` (which points an editor at a schema, relative to the
  authored file) is left out of every packed descriptor.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from ukdpack.authored.kinds import PACKED
from ukdpack.authored.load import ARCHIVE_FOLDER
from ukdpack.digest import mapping_as_dict

#: Authored-only keys no packed descriptor carries: a ``$schema`` path is relative to
#: the authored file and means nothing in a shard.
AUTHORING_KEYS = frozenset({"$schema"})


@dataclass(frozen=True)
class PackedLaunch:
    """What the shard records of one launch's code object."""

    toc_key: str
    symbol: str
    sha256: str
    signature: Sequence[Mapping[str, Any]]  # in shard form (signature_doc)
    #: feature variants: target ID -> sha256 of the object filed under it (empty: one object)
    targets: Mapping[str, str] = field(default_factory=dict)

    def entry(self, library: str) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": PACKED, "library": library, "toc_key": self.toc_key,
                               "symbol": self.symbol, "sha256": self.sha256,
                               "signature": list(self.signature)}
        if self.targets:
            out["targets"] = dict(self.targets)
        return out


def signature_doc(args: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A kernel's signature as shards record it: each argument's keys in one order."""
    return [signature_arg(a) for a in args]


def signature_arg(arg: Mapping[str, Any]) -> dict[str, Any]:
    """One argument with its keys in the one order shards use: kind, size, offset, name."""
    out = {"kind": arg["kind"], "size": arg["size"], "offset": arg["offset"]}
    if "name" in arg:
        out["name"] = arg["name"]
    return out


@functools.lru_cache(maxsize=4096)
def library_path(descriptor_rel: str, archive_name: str) -> str:
    """``../`` once per folder level below the shard root, then ``kpack/<archive>``.
    Every kernel of a file asks the same: each file's is worked out once."""
    depth = len(PurePosixPath(descriptor_rel).parent.parts)
    return "../" * depth + f"{ARCHIVE_FOLDER}/{archive_name}"


#: One encoder for every descriptor (``json.dumps`` with options makes one per call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=mapping_as_dict)


def compact(doc: Any) -> bytes:
    """The packed JSON text of a descriptor."""
    return _COMPACT.encode(doc).encode("utf-8") + b"\n"


def packed_ukd(doc: Mapping[str, Any], arch: str,
               launches: Mapping[str | None, PackedLaunch], library: str,
               launches_key: str, names: Sequence[str]) -> dict[str, Any]:
    """A UKD object in packed form for the shard of ``arch``. Its launches sit under
    ``launches_key`` (the runtime's ``Kernel.launches_key``), named ``names`` (empty for
    a single launch); ``launches`` maps each launch name (None for a single launch) with
    a code object to what was packed; a source without one (embedded_source) is kept as
    authored."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "provenance" or key in AUTHORING_KEYS:
            continue
        if key == "arch":
            out[key] = [arch]
        elif key == launches_key and not names:
            packed = launches.get(None)
            out[key] = packed.entry(library) if packed else value
        elif key == launches_key:
            out[key] = {name: launches[name].entry(library) for name in sorted(names)}
        else:
            out[key] = value
    return out


def packed_kdp(doc: Mapping[str, Any], arch: str, kernels: Sequence[Any]) -> dict[str, Any]:
    """A KDP in packed form: arch narrowed, the shard's kernels, kernelDescriptors last."""
    out = {k: v for k, v in doc.items() if k != "kernelDescriptors" and k not in AUTHORING_KEYS}
    out["arch"] = [arch]
    out["kernelDescriptors"] = list(kernels)
    return out


def packed_generic(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A UDD, UED, KMD, UMD or UHD in packed form: as authored, less authoring keys."""
    return {k: v for k, v in doc.items() if k not in AUTHORING_KEYS}
