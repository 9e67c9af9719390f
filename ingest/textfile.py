"""Reading a user's file as text, with the clear errors every ingest module shares."""

from __future__ import annotations

from pathlib import Path

from kb.errors import InputError

SNIFF_BYTES = 8192


def read_text(path: str | Path) -> str:
    """The file's text; InputError (naming file and line) for anything that is not
    a readable, non-empty UTF-8 text file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected a file") from None
    except PermissionError:
        raise InputError(p, "cannot be read (permission denied)") from None
    except OSError as e:
        raise InputError(p, f"cannot be read ({e.strerror or e})") from None
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
