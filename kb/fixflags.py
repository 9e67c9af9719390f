"""A finding's fix as flag changes for this run's engine version.

Flags come from the inline code of the finding's Fix prose (`--moe-runner-backend
flashinfer_cutlass`, "remove `--enforce-eager`") and from its launch commands,
where only flags the fix names count (a launch command also repeats the model,
port and TP of its own deployment). Each flag is checked against the run's flag
catalog: a renamed flag is translated, a flag this version lacks or a value it
does not accept is dropped, and the note says so.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable

from kb import vocab
from kb.flags import Catalog
from kb.records import Finding

INLINE = re.compile(r"`([^`]+)`")
FLAG = re.compile(r"^--[a-z][a-z0-9-]*$")
LAUNCH = re.compile(r"sglang\.launch_server|sglang serve|vllm serve|vllm\.entrypoints|vllm/vllm-openai")
REMOVE_BEFORE = re.compile(r"(?:remove|drop|without|unset|delete|stop (?:using|passing)|no longer pass)\W*(?:the\s+)?(?:flag\s+)?$", re.I)
# a deployment's own identity, not a tuning: never proposed from a finding's command
IDENTITY = {"--model", "--model-path", "--served-model-name", "--host", "--port", "--trust-remote-code",
            "--tokenizer", "--api-key", "--download-dir", "--revision", "--dist-init-addr", "--nnodes",
            "--node-rank", "--log-level", "--seed", "--random-seed", "--chat-template"}


@dataclass
class FixFlag:
    flag: str  # as the finding spells it
    value: object  # True for a switch, None to remove
    from_prose: bool
    value_from_command: bool = False  # the value is the finding's own deployment's, not stated in its fix


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text.replace("\\\n", " "), comments=False)
    except ValueError:
        return text.split()


def _pairs(words: list[str]) -> list[tuple[str, object]]:
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            f, v = w.split("=", 1)
            if FLAG.match(f):
                out.append((f, v))
            i += 1
            continue
        if FLAG.match(w):
            nxt = words[i + 1] if i + 1 < len(words) else None
            if nxt is not None and not nxt.startswith("-") and not re.match(r"^[&|;\\]", nxt):
                out.append((w, nxt))
                i += 2
                continue
            out.append((w, True))
        i += 1
    return out


def flags_of(f: Finding) -> list[FixFlag]:
    """The flag changes a finding's fix proposes, in the finding's own spelling."""
    out: dict[str, FixFlag] = {}
    fix = f.fix or ""
    for m in INLINE.finditer(fix):
        code = m.group(1).strip()
        if not (code.startswith("--") or LAUNCH.search(code)):
            continue  # a script or another program's options, not the server's
        remove = bool(REMOVE_BEFORE.search(fix[max(0, m.start() - 40):m.start()]))
        for flag, value in _pairs(_words(code)):
            if flag not in IDENTITY:
                out.setdefault(flag, FixFlag(flag, None if remove else value, True))
    named = " ".join([f.title, fix, f.root_cause or ""]).lower()
    class_words = [w for fc in f.fix_classes for w in vocab.FIX_CLASS_WORDS.get(fc, [])]
    for cmd in f.commands:
        if not LAUNCH.search(cmd):
            continue
        for flag, value in _pairs(_words(cmd)):
            bare = flag[2:]
            if flag in IDENTITY or flag in out:
                continue
            if bare in named or bare.replace("-", " ") in named or any(bare == w or flag == w for w in class_words):
                out[flag] = FixFlag(flag, value, False, value_from_command=value is not True)
    for cmd in f.commands:  # a value the prose left out, from the finding's own launch command
        if LAUNCH.search(cmd):
            for flag, value in _pairs(_words(cmd)):
                if flag in out and out[flag].value is True and value is not True:
                    out[flag].value, out[flag].value_from_command = value, True
    return list(out.values())


def extra_commands(f: Finding) -> list[str]:
    """The finding's commands that are not a server launch (tuning scripts, env, checks)."""
    return [c for c in f.commands if not LAUNCH.search(c)]


def _graph_above_cap(flag: str, value, engine: str, catalog: Catalog, current) -> bool:
    """A CUDA-graph ceiling above the running cap the user set: batches never get that big."""
    from kb.flags import SETTINGS

    if flag not in SETTINGS.get(engine, {}).get("cuda_graph_max_bs", []) or current is None:
        return False
    cap_flag = catalog.flag_for("max_running_requests")
    cap, have = (current(cap_flag) if cap_flag else None), current(flag)
    try:
        return cap is not None and int(str(have)) >= int(str(cap)) and int(str(value)) > int(str(cap))
    except ValueError:
        return False


def _without_contradictions(ffs: list[FixFlag], catalog: Catalog, notes: list[str]) -> list[FixFlag]:
    """A fix that names a switch and its negation (`--async-scheduling` and
    `--no-async-scheduling`, often "use X, or Y on old releases") does not say which one
    this run needs: both are left out, so kb never writes a command that sets one
    setting both ways."""
    def dest(ff: FixFlag):
        return (catalog.flags.get(ff.flag) or {}).get("dest")

    by_dest: dict[str, list[FixFlag]] = {}
    for ff in ffs:
        if dest(ff) and ff.value is True:
            by_dest.setdefault(dest(ff), []).append(ff)
    torn = {d for d, group in by_dest.items()
            if any((catalog.flags.get(x.flag) or {}).get("negation_of") for x in group)
            and any(not (catalog.flags.get(x.flag) or {}).get("negation_of") for x in group)}
    for d in sorted(torn):
        names = " and ".join(sorted(x.flag for x in by_dest[d]))
        notes.append(f"the fix names both {names}: which one applies depends on the version or workload; "
                     "set it by hand")
    return [ff for ff in ffs if not (ff.value is True and dest(ff) in torn)]


def for_version(f: Finding, engine: str, catalog: Catalog,
                current: Callable[[str], object] | None = None) -> tuple[list[tuple[str, object, str]], list[str]]:
    """([(flag for this version, value, the finding's spelling)], notes) — each flag
    resolved through the catalog; what cannot be applied is left out and said. A value
    that only the finding's own launch command gives (sized for its deployment) never
    replaces one the user set (`current(flag)`): the note says what the finding used."""
    from kb.match import resolve_flag

    changes, notes = [], []
    for ff in _without_contradictions(flags_of(f), catalog, notes):
        flag, why = resolve_flag(ff.flag, engine, catalog)
        if flag is None:
            notes.append(f"{why}: left out of the command")
            continue
        mine = current(flag) if current else None
        if mine is not None and _graph_above_cap(flag, ff.value, engine, catalog, current):
            notes.append(f"{f.id} captured CUDA graphs up to {ff.value}; yours ({mine}) already covers your running "
                         "cap, and graphs above it are never used")
            continue
        if ff.value_from_command and mine is not None:
            notes.append(f"{f.id} ran {flag} {ff.value} for its own deployment; yours is {mine}: size it for this one")
            continue
        if why:
            notes.append(why)
        info = catalog.flags.get(flag) or {}
        value = ff.value
        if value is True and info.get("takes_value"):
            notes.append(f"{flag} needs a value the finding does not give: set it by hand")
            continue
        if value is not None and value is not True and not info.get("takes_value", True):
            value = True  # a switch written with a value (`--flag true`)
        bad = catalog.check(flag, value)
        if bad:
            notes.append(f"{bad}: left out of the command")
            continue
        changes.append((flag, value, ff.flag))
    return changes, notes
