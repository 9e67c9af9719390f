"""Checking the server launch commands written in findings against the flag catalogs.

A finding's command is historical: it was right for the version the finding names. So it
is checked against that version's catalog (or the nearest catalogued ones on either side).
A flag that version does not know is still accepted when some catalog knows it as a
rename: a deprecated flag or an alias of another flag (e.g. sglang `--cuda-graph-max-bs`,
a deprecated alias in 0.5.15-0.5.19, gone in 0.5.20). Anything else is reported.
"""

from __future__ import annotations

import re
import shlex

from kb.flagdata import load, short_options, version_key, versions
from kb.flags import as_parsed
from kb.launchcmd import split_args

# the words that start a server launch, per engine
_LAUNCH = {
    "vllm": re.compile(r"(?:^|\s)vllm\s+serve(?=\s|$)"),
    "sglang": re.compile(r"(?:^|\s)python3?\s+-m\s+sglang\.launch_server(?=\s|$)"),
}


# a comment line in a command block naming the release it was written for: "# sglang 0.5.15"
_BLOCK_VERSION = re.compile(r"^\s*#\s*(sglang|vllm)\s+v?(\d+\.\d+(?:\.\d+)*(?:\.?post\d+)?)\b", re.M | re.I)


def block_version(block: str, engine: str) -> str | None:
    """The version a command block says it was written for (overrides the finding's)."""
    for m in _BLOCK_VERSION.finditer(block):
        if m.group(1).lower() == engine:
            return m.group(2)
    return None


def launch_commands(block: str) -> list[tuple[str, list[str]]]:
    """(engine, server argv after the launcher) for each launch in a command block.
    Backslash continuations are joined; shell comments and env prefixes are skipped."""
    text = re.sub(r"\\\n", " ", block)
    out = []
    for line in text.splitlines():
        for engine, pat in _LAUNCH.items():
            m = pat.search(line)
            if not m:
                continue
            rest = line[m.end():]
            rest = re.split(r"\s(?:&&|\|\||;|\||>|2>)\s", rest)[0]  # the launch ends at a shell operator
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:
                words = rest.split()
            out.append((engine, words))
    return out


def _known_rename(engine: str, flag: str) -> str | None:
    """The catalog versions where `flag` is deprecated or an alias of another flag."""
    for v in versions(engine):
        info = load(engine, v).get(flag)
        if info and (info.get("deprecated") or info.get("canonical") != flag or info.get("negation_of")):
            return v
    return None


def _resolve(engine: str, flags: dict, flag: str) -> str | None:
    """The catalog key this spelling means, or None. Both engines' parsers accept a unique
    prefix of a long option (argparse allow_abbrev, see kb/data/flags/README.md), and vLLM
    also rewrites _ to - and accepts dotted keys into JSON flags."""
    cands = [flag]
    if engine == "vllm":
        dashed = as_parsed(engine, flag)
        cands += [dashed, dashed.split(".", 1)[0]]
    for c in cands:
        if c in flags:
            return c
    for c in cands:
        prefixed = {flags[k].get("canonical") or k for k in flags if k.startswith(c)}
        if len(prefixed) == 1:
            return next(k for k in flags if k.startswith(c))
    return None


def catalogs_for(engine: str, version: str | None) -> list[str]:
    """The catalog versions a command of `version` is checked against: that version when
    there is a catalog for it, else the nearest older and nearest newer ones (a flag added
    or removed between two catalogs is in one of them), else the newest."""
    known = versions(engine)
    if not version:
        return [known[-1]]
    if version in known:
        return [version]
    want = version_key(version)
    older = [v for v in known if version_key(v) <= want]
    newer = [v for v in known if version_key(v) > want]
    return older[-1:] + newer[:1]


def _check_in(engine: str, cat_version: str, flag: str, values: list[str]) -> str | None:
    flags = load(engine, cat_version)
    key = _resolve(engine, flags, flag)
    if key is None:
        return f"{flag} is unknown to {engine} {cat_version}"
    info = flags[key]
    if info.get("takes_value") and not values and info.get("nargs") not in ("?", "*"):
        return f"{flag} needs a value"
    if not info.get("takes_value") and values:
        return f"{flag} takes no value but got {' '.join(values)}"
    choices = info.get("choices")
    if choices and values and info.get("nargs") is None and values[0] not in map(str, choices):
        return f"{flag} {values[0]} is not one of {', '.join(map(str, choices))} in {engine} {cat_version}"
    return None


def check_launch(engine: str, version: str | None, argv: list[str]) -> list[str]:
    """Problems with one launch's server arguments ([] = it parses under the catalog(s) of
    its version, or uses a flag some catalog knows as a rename)."""
    cats = catalogs_for(engine, version)
    shorts = set().union(*(short_options(engine, v) for v in cats))
    _, pairs = split_args(argv, shorts)
    problems = []
    for flag, values in pairs:
        if flag in shorts:
            continue
        if not flag.startswith("--"):
            problems.append(f"{flag}: not a flag")
            continue
        why = [_check_in(engine, v, flag, values) for v in cats]
        if not all(why):
            continue  # one bracketing catalog accepts it
        renamed = all("is unknown to" in w for w in why) and _known_rename(engine, flag)
        if not renamed:
            problems.append("; ".join(why))
    return problems
