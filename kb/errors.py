"""kb's exception tree. Lower-level errors (Whoosh, pydantic, JSON, httpx, OS) are
mapped to these where they enter, so the CLI can print one clear line.

    KbError                      anything kb reports to the user (exit 1)
    ├── InputError               a bad input file: names the file and, where known, the line
    ├── NotFoundError            an id, path or model that does not exist
    ├── IndexError_              the index could not be read or written
    ├── ServerError              a live server could not be reached or answered badly
    └── UsageError               options that cannot work together or a value kb cannot read (exit 2)
"""

from __future__ import annotations


class KbError(Exception):
    """Base class: a problem kb explains to the user and exits 1 for."""


class InputError(KbError):
    def __init__(self, path: str, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class NotFoundError(KbError):
    pass


class IndexError_(KbError):
    pass


class ServerError(KbError):
    pass


class UsageError(KbError):
    """A usage mistake the option parser could not catch (exit 2, like typer's own)."""


# What a rule, signal or condition may raise on a server argument of an unexpected value:
# a list or a dict where one number was meant (TypeError), text where a number was
# (ValueError), a number too large to convert (OverflowError). That check is skipped with a
# warning. Anything else (KeyError, AttributeError, ZeroDivisionError, ...) is a bug in
# kb's own code and is not dressed up as "an unexpected server argument".
ODD_VALUE = (TypeError, ValueError, OverflowError)
