"""Builders that misbehave: each must fail its arch, never end or hang the pack."""

from __future__ import annotations

import sys
import time
from typing import Any


def exits(spec: dict[str, Any], *, arch: str) -> bytes:
    sys.exit(0)


def interrupts(spec: dict[str, Any], *, arch: str) -> bytes:
    raise KeyboardInterrupt


class _Odd(BaseException):
    pass


def base_exception(spec: dict[str, Any], *, arch: str) -> bytes:
    raise _Odd("not an Exception")


def hangs(spec: dict[str, Any], *, arch: str) -> bytes:
    time.sleep(3600)
    return b""
