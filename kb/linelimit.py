"""The longest line kb keeps: a streamed line is cut here and the rest of it skipped, not held.

Apart from kb.textfile (which uses it) so that the log reader's worker process can know it
without importing pathlib and typing (a smaller process: docs/PERFORMANCE.md, log reading)."""

MAX_LINE_CHARS = 2**20
