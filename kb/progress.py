"""Progress bars on stderr for long work: reading a large input, a sweep's levels.

Only when stderr is a terminal (a pipe, a file or CI gets nothing), so stdout —
and with it every --json document — is never touched. rich comes with typer."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

BAR_BYTES = 50 * 2**20  # an input smaller than this is read before a bar would matter


def enabled() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _progress(*columns):
    from rich.console import Console
    from rich.progress import Progress

    return Progress(*columns, console=Console(file=sys.stderr), transient=True)


@contextmanager
def file_progress(path: Path) -> Iterator[Callable[[int], None] | None]:
    """A callback taking the bytes just read, drawing bytes read, MB/s and ETA; None
    (nothing drawn) for a file under BAR_BYTES or when stderr is not a terminal."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    if size < BAR_BYTES or not enabled():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with _progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn()) as bar:
        task = bar.add_task(f"reading {Path(path).name}", total=size)
        yield lambda n: bar.advance(task, n)


class LevelBar:
    """One bar per sweep (or doctor) level: requests done of the level's total, failures, time."""

    def __init__(self, enabled_: bool = True):
        self.on = enabled_ and enabled()
        self.bar = None
        self.task = None

    def start(self, label: str, total: int | None) -> None:
        if not self.on:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

        self.end()
        self.bar = _progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[failed]}"), TimeElapsedColumn())
        self.bar.start()
        self.task = self.bar.add_task(label, total=total, failed="")

    def update(self, done: int, failed: int = 0, total: int | None = None) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, failed=f"{failed} failed" if failed else "",
                            **({"total": total} if total is not None else {}))

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
