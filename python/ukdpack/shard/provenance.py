"""Provenance sidecars: no shipped UKD carries provenance; the packer
moves it, with what it knows of each kernel's origin, to
``{stem}.provenance.json.gz`` beside the KDP (or standalone UKD) file.

The sidecar is gzip without timestamp or file name around compact, key-sorted
JSON ``{"version": "1.0", "kdp_id", "entries": {<ukd id>: {"sha256", "provenance"}}}``,
where ``sha256`` is the digest of the packed UKD's canonical JSON: a reader
re-attaches an entry only to the exact UKD it was written for. The packer writes
sidecars; ``ukdpack verify`` reads them and checks that binding.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping
from typing import Any

from ukdpack.digest import canonical_json, sha256_hex

SIDECAR_VERSION = "1.0"
SUFFIX = ".provenance.json.gz"


def sidecar_name(descriptor_file: str) -> str:
    """``a/foo.kdp.json`` -> ``a/foo.kdp.provenance.json.gz``."""
    base = descriptor_file[: -len(".json")] if descriptor_file.endswith(".json") else descriptor_file
    return base + SUFFIX


def binding(packed_ukd: Mapping[str, Any]) -> str:
    """The digest that binds a sidecar entry to one packed UKD."""
    return sha256_hex(canonical_json(packed_ukd))


def sidecar_bytes(kdp_id: str, entries: Mapping[str, Mapping[str, Any]]) -> bytes:
    """Deterministic gzip of the sidecar document."""
    doc = {"version": SIDECAR_VERSION, "kdp_id": kdp_id, "entries": dict(entries)}
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(canonical_json(doc))
    return buf.getvalue()
