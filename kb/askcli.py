"""`kb ask` without the typer command line.

`kb [--kb-dir DIR] ask QUESTION [-n N | --limit N] [--json]` is the command people run
most, and building typer's command line costs more than answering (typer, its
pydantic-based option parsing: ~0.2 s of a ~0.5 s `kb ask`). `python -m kb` and
`kb.cli.main` try this parser first; anything it does not recognise — other options,
`--run`, help, a bad value, shell completion — goes to typer, so usage and errors stay
exactly as typer reports them. `print_answers` is the one place that prints answers,
for both paths.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def loader():
    """ingest.detect.load_findings, imported when a source file has to be parsed: a
    `kb ask` on an unchanged knowledge base never needs the parsers."""

    def load_findings(*args, **kwargs):
        from ingest.detect import load_findings as load

        return load(*args, **kwargs)

    return load_findings


def print_answers(question: str, answers: list, as_json: bool, diag=None, echo=print) -> None:
    from kb import render

    if as_json:
        out = {"question": question}
        if diag:
            out["run"] = {"signals": [s.model_dump(mode="json") for s in diag.signals],
                          "recommendations": [r.model_dump(mode="json") for r in diag.recommendations[:3]]}
        out["answers"] = [{"rank": i, "score": round(a.score, 3), **render.finding_json(a.finding)}
                          for i, a in enumerate(answers, 1)]
        echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    if diag:
        echo("This run")
        for s in diag.signals:
            echo("\n".join(render.signal_lines(s, "  ", evidence=0)))
        for r in diag.recommendations[:3]:
            echo(f"  → {r.title}  [{r.rule}]" + (f"\n    $ {r.commands[0]}" if r.commands else ""))
        echo("\nPast findings")
    if not answers:
        echo("no finding matches that question")
        return
    echo("\n\n".join(render.finding_summary(a.finding, i) for i, a in enumerate(answers, 1)))


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
        from kb.search import ask
        from kb.store import Store

        store = Store(Path(home) if home else None)
        answers = store.read(loader(), lambda d: ask(d, question, limit, None))
        print_answers(question, answers, as_json, echo=_echo)
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
