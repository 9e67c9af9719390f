"""Reading a user's file as text, with the clear errors every ingest module shares,
and the bounds that keep any input from costing unbounded time or memory."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO, Iterator

from kb.errors import InputError
from kb.linelimit import MAX_LINE_CHARS  # (a streamed line is cut here; kept public here)

SNIFF_BYTES = 8192
MAX_TEXT_BYTES = 16 * 2**20  # a file read whole (config.json, findings): far above any real one
# A findings markdown file (the largest shipped one is 27 KB). Parsing costs ~1 s per MB
# of prose and up to ~20 s per MB of dense tables, so this bounds a file's parse time.
MAX_FINDINGS_BYTES = 2**20


def size_text(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 1024:,.0f} KiB"


def read_bytes(path: str | Path, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The whole file, at most `max_bytes` of it; InputError for a FIFO, device or
    socket (never opened for a blocking read) and for a larger file."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected a file") from None
    except PermissionError:
        raise InputError(p, "cannot be read (permission denied)") from None
    except OSError as e:
        raise InputError(p, f"cannot be read ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(p, "is a directory, expected a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(p, "not a regular file (FIFO, device or socket)")
        if st.st_size > max_bytes:
            raise InputError(p, f"too large ({size_text(st.st_size)}; the limit is {size_text(max_bytes)})")
        try:
            data = fh.read(max_bytes + 1)
        except OSError as e:
            raise InputError(p, f"cannot be read ({e.strerror or e})") from None
    if len(data) > max_bytes:  # it grew while being read
        raise InputError(p, f"too large (more than {size_text(max_bytes)}, the limit)")
    return data


def read_text(path: str | Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The file's text; InputError (naming file and line) for anything that is not
    a readable, non-empty UTF-8 text file of at most `max_bytes`."""
    p = Path(path)
    data = read_bytes(p, max_bytes)
    check_text_bytes(p, data)
    return data.decode("utf-8-sig")


def check_text_bytes(p: str | Path, data: bytes) -> None:
    if b"\x00" in data[:SNIFF_BYTES]:
        raise InputError(p, "binary file (NUL bytes), expected a text file")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(p, f"not UTF-8 text (byte 0x{data[e.start]:02x})", line=line) from None
    if not data.strip():
        raise InputError(p, "empty file")


def lines(fh: IO, limit: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of an open file without their line ends, each cut to `limit`
    characters (or bytes): a file with no newline at all streams in bounded memory."""
    while True:
        line = fh.readline(limit)
        if not line:
            return
        nl = "\n" if isinstance(line, str) else b"\n"
        if not line.endswith(nl) and len(line) >= limit:  # overlong: skip to the next line end
            while True:
                rest = fh.readline(limit)
                if not rest or rest.endswith(nl):
                    break
        yield line.rstrip("\r\n") if isinstance(line, str) else line.rstrip(b"\r\n")
