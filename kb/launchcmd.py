"""Building exact launch commands: the current one with changes applied, safely quoted."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from kb.argv import docker_image_at
from kb.flagdata import newest_flags
from kb.flags import Catalog, as_parsed

LAUNCHERS = {"sglang": ["python", "-m", "sglang.launch_server"], "vllm": ["vllm", "serve"]}


def value_str(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return str(v)


def split_args(argv: list[str], short: frozenset[str] | set[str] = frozenset()
               ) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """A launch argv → (launcher words, [(flag, values)]) keeping order; a bare word
    after `vllm serve` is the positional model. A `docker run ... IMAGE` prefix is kept
    whole among the launcher words (its options are docker's, not the server's).
    `short` names single-dash spellings that are flags here (vLLM's `-tp`), not values."""
    head: list[str] = []
    pairs: list[tuple[str, list[str]]] = []
    i = 0
    image = docker_image_at(argv)
    if image is not None:
        head, i = list(argv[:image + 1]), image + 1
    while i < len(argv) and not (argv[i].startswith("--") or argv[i] in short):
        head.append(argv[i])
        i += 1
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--") and "=" in tok:
            f, v = tok.split("=", 1)
            pairs.append((f, [v]))
            i += 1
            continue
        vals = []
        i += 1
        while i < len(argv) and not (argv[i].startswith("--") or argv[i] in short
                                     or (len(argv[i]) == 2 and argv[i][0] == "-" and not argv[i][1].isdigit())):
            vals.append(argv[i])
            i += 1
        pairs.append((tok, vals))
    return head, pairs


def base_argv(engine: str, catalog: Catalog, server_args: dict, model: str | None) -> list[str]:
    """A launch command from known server arguments: the model and every argument that
    differs from the version's default (a full server_info dump has hundreds)."""
    argv = list(LAUNCHERS[engine])
    if engine == "vllm" and model:
        argv.append(model)
    by_name = {}  # server_info / ServerArgs field names match a flag spelling or its dest
    for flag, info in catalog.flags.items():
        if flag.startswith("--"):
            by_name[flag[2:].replace("-", "_")] = (flag, info)
    for flag, info in catalog.flags.items():
        if flag.startswith("--") and info.get("dest"):
            by_name.setdefault(info["dest"], (info.get("canonical") or flag, info))
    for key, value in server_args.items():
        if key in ("model", "model_path") or value is None:
            continue
        hit = by_name.get(key)
        if not hit:
            continue
        flag, info = hit
        if value == info.get("default") or (isinstance(value, bool) and not value):
            continue
        if isinstance(value, (dict, list)) and not value:
            continue
        argv += [flag] if value is True else [flag, value_str(value)]
    if engine == "sglang" and model:
        argv[3:3] = ["--model-path", model]
    return argv


MODEL = "MODEL"  # stands in the command for a model kb does not know
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class Current:
    """The launch command the changes apply to. `missing` says what the reader adds when
    it is not the user's whole command (no launch command and no dump of the server's
    arguments was given): without it the printed command would start a different server,
    or none (`python -m sglang.launch_server --tp-size 4` loads no model)."""

    argv: list[str]
    missing: str | None = None
    notes: tuple[str, ...] = ()  # what was repaired in the user's command, to be said

    def command(self, argv: list[str], env: dict[str, str] | None = None, tail: str = "") -> str:
        """`argv` (this one with changes applied) as a shell line, marked when incomplete."""
        return render(argv, env) + tail + (f"  # {self.missing}" if self.missing else "")


def current(ev, engine: str, catalog: Catalog) -> Current:
    """The running server's launch command: the one given, else one rebuilt from the
    server's arguments when a dump holds them all (sglang's server_info, a server log),
    else kb's changes on what is known (MODEL when the model is not), marked as needing
    the rest of the user's command."""
    if ev.launch_argv:
        argv, notes = repair_dashes(list(ev.launch_argv), catalog)
        argv, fitted = fit_version(argv, catalog)
        return Current(argv, notes=tuple(notes + fitted))
    model = known_model(ev)
    argv = base_argv(engine, catalog, ev.server_args, model or MODEL)
    if model and ev.server_args_complete:
        return Current(argv)
    rest = "add the rest of your launch command"
    return Current(argv, rest if model else f"{MODEL}: your model; {rest}")


def repair_dashes(argv: list[str], catalog: Catalog) -> tuple[list[str], list[str]]:
    """A long flag typed with one dash (`-no-async-scheduling`) is not that flag: argparse
    reads it as a short option with an attached value (`-n o-async-scheduling`, i.e.
    --nnodes) and the server refuses to start. Where the word with a second dash is a flag
    of this version and the word itself is no spelling of any, write it with two dashes
    and say so, so no command kb prints carries the typo on."""
    spellings = set(catalog.flags)
    for info in catalog.flags.values():
        spellings.update((info or {}).get("aliases") or [])
    out, notes = [], []
    for w in argv:
        flag = w.split("=", 1)[0]
        if (flag.startswith("-") and not flag.startswith("--") and len(flag) > 2
                and flag not in spellings and "-" + flag in catalog.flags):
            notes.append(f"{flag} in your command is not a {catalog.engine} flag ({catalog.engine} would read it as "
                         f"{flag[:2]} {flag[2:]}): written as -{flag}")
            w = "-" + w
        out.append(w)
    return out, notes


def fit_version(argv: list[str], catalog: Catalog) -> tuple[list[str], list[str]]:
    """The user's command for the version the run states: a flag that version lacks is
    written in its spelling when the catalog knows the setting under another name, else
    left out with its values (the server would refuse to start: `unrecognized arguments`),
    each said in a note. Only with the version known: on the newest catalog by default, a
    flag it lacks may be a newer one kb has no catalog for. A unique prefix of a flag
    stays (argparse takes abbreviations)."""
    if not catalog.requested:
        return argv, []
    names = set(catalog.flags)
    for info in catalog.flags.values():
        names.update((info or {}).get("aliases") or [])
    image = docker_image_at(argv)
    out, notes = list(argv[:image + 1]) if image is not None else [], []
    i = len(out)
    while i < len(argv):
        word = argv[i]
        j = i + 1
        if not word.startswith("--"):
            out.append(word)
            i = j
            continue
        flag, eq, value = word.partition("=")
        if not eq and newest_flags(catalog.engine).get(flag, {}).get("takes_value") is not False:
            while j < len(argv) and not argv[j].startswith("-"):
                j += 1  # its values
        parsed = as_parsed(catalog.engine, flag)
        if parsed in names or sum(n.startswith(parsed) for n in names if n.startswith("--")) == 1:
            out += argv[i:j]
        else:
            new, why = catalog.resolve(parsed)
            nearest = catalog.requested != catalog.version
            where = f" (the nearest catalogued version to {catalog.requested})" if nearest else ""
            if new:
                out += [new + eq + value, *argv[i + 1:j]]
                notes.append(f"{flag} in your command: {why}{where}: written as {new}")
            else:
                notes.append(f"{flag} in your command is not a {catalog.engine} {catalog.version} flag{where}: "
                             "left out of the printed command")
        i = j
    return out, notes


def known_model(ev) -> str | None:
    """What the server loads, when the evidence says: the launch command's or server's
    model path, else a --config given as a Hugging Face repo id. A name taken from a local
    directory (`/models/GLM-5/config.json` → GLM-5) is a label, not a path to load."""
    name = getattr(ev.model, "name", None) or ""
    return ev.model_path or (name if _REPO_ID.match(name) else None)


def apply(argv: list[str], changes: list[tuple[str, object, list[str]]]) -> list[str]:
    """Set (flag, value) in argv, replacing any alias of it; value None removes it,
    True makes it a switch."""
    short = {a for _, _, names in changes for a in names if a.startswith("-") and not a.startswith("--")}
    head, pairs = split_args(argv, short)
    for flag, value, aliases in changes:
        names = {flag, *aliases}
        pos = next((i for i, (f, _) in enumerate(pairs) if f in names), None)
        pairs = [(f, v) for f, v in pairs if f not in names]
        if value is None:
            continue
        entry = (flag, [] if value is True else [value_str(value)])
        if pos is None:
            pairs.append(entry)
        else:
            pairs.insert(min(pos, len(pairs)), entry)
    out = list(head)
    for f, vals in pairs:
        out.append(f)
        out.extend(vals)
    return out


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """Text for a `# ...` comment beside a command: control characters escaped, so a
    newline in a model name cannot end the comment and start a command line (nor an
    escape sequence reach the terminal)."""
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], str(text))


# one variable reference: `$PORT`, `${PORT}`, or with a default / error modifier whose word is
# plain (`${ENGINE_TP:?}`, `${PORT:-8000}`): nothing in it can run inside double quotes
SHELL_VARIABLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*(?::?[-=?+][\w./:@%+,-]*)?\})")


def _word(w: str) -> str:
    """A word of the user's command that is one shell variable (`${SERVER_PORT}`) stays one the
    shell expands, in double quotes (nothing else in it can run); every other word is quoted."""
    return f'"{w}"' if SHELL_VARIABLE.fullmatch(w) else shlex.quote(w)


def render(argv: list[str], env: dict[str, str | None] | None = None) -> str:
    """One shell line; every word quoted so paths with spaces, quotes, `;` or `$( )` stay literal
    (a word that is exactly one variable reference is expanded, as the user wrote it).
    A variable whose value is None is one a change unsets: it is left out."""
    prefix = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items() if v is not None)
    return (prefix + " " if prefix else "") + " ".join(_word(w) for w in argv)
