"""Building exact launch commands: the current one with changes applied, safely quoted."""

from __future__ import annotations

import re
import shlex

from kb.flags import Catalog

LAUNCHERS = {"sglang": ["python", "-m", "sglang.launch_server"], "vllm": ["vllm", "serve"]}


def value_str(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return str(v)


def split_args(argv: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """A launch argv → (launcher words, [(flag, values)]) keeping order; a bare word
    after `vllm serve` is the positional model."""
    head: list[str] = []
    pairs: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
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
        while i < len(argv) and not (argv[i].startswith("--") or (argv[i].startswith("-") and len(argv[i]) == 2)):
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


def apply(argv: list[str], changes: list[tuple[str, object, list[str]]]) -> list[str]:
    """Set (flag, value) in argv, replacing any alias of it; value None removes it,
    True makes it a switch."""
    head, pairs = split_args(argv)
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


def render(argv: list[str], env: dict[str, str] | None = None) -> str:
    """One shell line; every word quoted so paths with spaces, quotes, `;` or `$( )` stay literal."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (prefix + " " if prefix else "") + shlex.join(argv)
