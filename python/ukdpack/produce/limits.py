"""The limits a pack's jobs run under, apart from the compiler's module: the command
line shows them in its help without loading what runs the compiles (about 15 ms of
every other command's start)."""

from __future__ import annotations

#: Seconds one compile (or one builder call) may take before its arch fails.
DEFAULT_JOB_TIMEOUT = 1800.0
