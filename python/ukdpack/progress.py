"""Output for people: a live bar on a terminal, plain lines otherwise (CMake, CI).

Problems and notes always go out as lines (``ukdpack: error: <file>: <path>: ...``),
whatever the mode, so logs read the same everywhere.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, TextIO

from ukdpack.authored.load import Skipped
from ukdpack.errors import Problem

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class Reporter:
    """Where a pack tells what it does."""

    def __init__(self, label: str | None = None, stream: TextIO | None = None,
                 live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.prefix = f"ukdpack[{label}]" if label else "ukdpack"
        self.live = self.stream.isatty() if live is None else live
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._done = 0
        self._total = 0

    def _emit(self, text: str) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.console.print(text, markup=False, highlight=False)
            else:
                print(text, file=self.stream, flush=True)

    def info(self, text: str) -> None:
        self._emit(f"{self.prefix}: {text}")

    def problem(self, p: Problem) -> None:
        self._emit(f"{self.prefix}: {p.severity}: {p}")

    def skipped(self, s: Skipped) -> None:
        self._emit(s.line())

    # ------------------------------------------------------------ compile batch
    def batch_started(self, total: int, what: str) -> None:
        self._done, self._total = 0, total
        if total == 0:
            return
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
            from rich.table import Column

            # One line whatever the terminal's width: the label, bar and count keep
            # their width and the job's name gets what is left, cut with an ellipsis
            # (rich would otherwise squeeze the count to "2…").
            fixed = Column(no_wrap=True)
            progress = Progress(
                # markup=False: "[label]" and "[gfx90a]" are text, not rich markup tags.
                TextColumn(f"{self.prefix}: {what}", markup=False, table_column=fixed),
                BarColumn(bar_width=12), MofNCompleteColumn(table_column=Column(no_wrap=True)),
                TextColumn("{task.description}", markup=False, table_column=Column(
                    no_wrap=True, overflow="ellipsis", ratio=1, min_width=1)),
                console=Console(file=self.stream), transient=True, expand=True)
            progress.start()
            self._task = progress.add_task("", total=total)
            self._progress = progress
        else:
            self.info(f"{what}: {total} code object{'s' if total != 1 else ''}")

    def names(self, outcome: str) -> bool:
        """Whether ``job_done`` shows the job's name for ``outcome``: a live bar names
        every job, plain lines only those that ran a compiler or failed (a pack of
        thousands of prebuilt objects need not name each)."""
        return self.live or outcome != "reused"

    def job_done(self, what: str, seconds: float, outcome: str) -> None:
        """One job ended: ``compiled``, ``reused`` (cache, prebuilt, builder) or
        ``failed``. Plain lines name the jobs that ran a compiler or failed; a failed job
        says so, so the counts read as what was made."""
        with self._lock:
            self._done += 1
            done = self._done
            progress = self._progress
        if progress is not None and self._task is not None:
            progress.update(self._task, advance=1,
                            description=f"{what} failed" if outcome == "failed" else what)
        elif outcome == "failed":
            self.info(f"[{done}/{self._total}] {what}: failed ({seconds:.1f} s)")
        elif outcome == "compiled":
            self.info(f"[{done}/{self._total}] {what} ({seconds:.1f} s)")

    def batch_finished(self, summary: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._total:
            self.info(summary)
