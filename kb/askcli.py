"""`kb ask` without the typer command line.

`kb [--kb-dir DIR] ask QUESTION [-n N | --limit N] [--json]` is the command people run
most, and building typer's command line costs more than answering (typer, its
pydantic-based option parsing: ~0.2 s of a ~0.5 s `kb ask`). `python -m kb` and
`kb.cli.main` try this parser first; anything it does not recognise — other options,
`--run`, help, a bad value, shell completion — goes to typer, so usage and errors stay
exactly as typer reports them. Both paths make the same call (kb.app.KnowledgeBase.ask)
and print the same result.
"""

from __future__ import annotations

import os
import sys


def parse(args: list[str]) -> tuple[str | None, str, int, bool] | None:
    """(kb dir, question, limit, json) when `args` are a plain `kb ask`, else None."""
    if any(k.startswith("_KB_COMPLETE") for k in os.environ):
        return None
    home, i = os.environ.get("KB_HOME") or None, 0  # typer ignores an empty KB_HOME too
    if args[:1] == ["--kb-dir"] and len(args) > 1 and args[1] and not args[1].startswith("-"):
        home, i = args[1], 2
    elif args[:1] and args[0].startswith("--kb-dir=") and len(args[0]) > len("--kb-dir="):
        home, i = args[0][len("--kb-dir="):], 1
    if args[i:i + 1] != ["ask"]:
        return None
    question, limit, as_json, rest = None, 5, False, args[i + 1:]
    j = 0
    while j < len(rest):
        a = rest[j]
        if a == "--json":
            as_json = True
        elif a in ("-n", "--limit") and j + 1 < len(rest) and rest[j + 1].isascii() and rest[j + 1].isdigit():
            limit = int(rest[j + 1])
            j += 1
        elif question is None and not a.startswith("-"):
            question = a
        else:
            return None
        j += 1
    if question is None or not 1 <= limit <= 50:
        return None
    return home, question, limit, as_json


def main(args: list[str]) -> bool:
    """Run a plain `kb ask`; False (having done nothing) for anything else. Errors and
    exit codes are those of kb.cli.main: kb's errors one line on stderr and exit 1,
    Ctrl-C exit 130, a closed stdout exit 1."""
    parsed = parse(args)
    if parsed is None:
        return False
    home, question, limit, as_json = parsed
    from kb.errors import KbError

    try:
        from kb.app import KnowledgeBase

        res = KnowledgeBase(home).ask(question, limit=limit)
        _echo(res.json_text() if as_json else res.text())
    except KbError as e:
        from kb.redact import redact_text

        print(f"kb: error: {redact_text(str(e))}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stdout = None  # nothing more can be written
        sys.exit(1)
    return True


def _echo(text: str) -> None:
    """As typer.echo (click.echo) writes a line to stdout: the text, a newline, a flush."""
    sys.stdout.write(f"{text}\n")
    sys.stdout.flush()
