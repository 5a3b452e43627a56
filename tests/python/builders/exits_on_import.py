"""A builder module that ends the interpreter when imported."""

import sys

sys.exit(3)


def build(spec: dict[str, object], *, arch: str) -> bytes:
    return b""
