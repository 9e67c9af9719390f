"""A finding's fix as flag changes for this run's engine version.

Flags come from the inline code of the finding's Fix prose (`--moe-runner-backend
flashinfer_cutlass`, "remove `--enforce-eager`") and from its launch commands,
where only flags the fix names count (a launch command also repeats the model,
port and TP of its own deployment). Each flag is checked against the run's flag
catalog: a renamed flag is translated, a flag this version lacks or a value it
does not accept is dropped, and the note says so.

Environment variables come the same way from the Fix prose only (`VLLM_MXFP4_USE_MARLIN=1`,
"remove `VLLM_ATTENTION_BACKEND=TRITON_MLA`"); one set in a finding's launch command but
not named in its fix is that deployment's own detail. `env_for_version` checks each
against the variables the run's version reads (kb/data/env, scripts/gen_env_list.py).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from kb import vocab
from kb.flags import SETTINGS, Catalog
from kb.match import resolve_flag
from kb.records import Finding
from kb.redact import is_secret_key

INLINE = re.compile(r"`([^`]+)`")
FLAG = re.compile(r"^--[a-z][a-z0-9-]*$")
LAUNCH = re.compile(r"sglang\.launch_server|sglang serve|vllm serve|vllm\.entrypoints|vllm/vllm-openai")
REMOVE_BEFORE = re.compile(r"(?:remove|drop|without|unset|delete|stop (?:using|passing)|no longer "
                           r"pass)\W*(?:the\s+)?(?:flag\s+)?$", re.I)
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


# A variable read by the engine itself, checkable against its list, or by a library it runs on.
ENGINE_PREFIXES = {"vllm": ("VLLM_",), "sglang": ("SGLANG_", "SGL_")}
RUNTIME_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "HF_", "FLASHINFER_", "HIP_", "HSA_", "AITER_", "TRITON_",
                    "NVSHMEM_", "UCX_", "GLOO_", "OMP_", "TOKENIZERS_", "NVIDIA_", "DG_", "TRANSFORMERS_")
ASSIGN = re.compile(r"^([A-Z][A-Z0-9]*_[A-Z0-9_]+)=(\S*)$")
BARE = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]+$")
# a switch that makes a library print what it does (NCCL_DEBUG=INFO): a check, not a fix
DIAGNOSTIC = re.compile(r"_DEBUG(?:_SUBSYS|_FILE)?$|LOG(?:GING)?_LEVEL$")
# "use `X=0` only to bisect a regression": the fix does not recommend it
ONLY_FOR = re.compile(r"^\W{0,2}\s*only (?:to|for)\b", re.I)
# "switch off only the one that regresses (for example `A=0` or `B=0`)": a choice, not a recipe
EXAMPLE_BEFORE = re.compile(r"(?:for example|for instance|e\.g\.|such as)[\s,:]*$|^`\s+or\s+$", re.I)
ENV_DATA = Path(__file__).resolve().parent / "data" / "env"


@lru_cache(maxsize=None)
def env_names(engine: str, version: str) -> frozenset[str] | None:
    """The variables that engine version reads, when kb has its list."""
    path = ENV_DATA / f"{engine}-{version}.json"
    return frozenset(json.loads(path.read_text())["names"]) if path.is_file() else None


def _env_like(name: str) -> bool:
    if is_secret_key(name):
        return False  # never propose a credential
    if name.startswith(RUNTIME_PREFIXES) or any(name.startswith(p) for ps in ENGINE_PREFIXES.values() for p in ps):
        return True
    return any(name in (env_names(e, v) or ()) for e, v in _env_lists())


def _env_lists() -> list[tuple[str, str]]:
    return [tuple(p.stem.split("-", 1)) for p in sorted(ENV_DATA.glob("*.json"))]


def env_of(f: Finding) -> tuple[dict[str, str | None], list[str]]:
    """({NAME: value, or None to unset}, notes) from the inline code of the Fix prose."""
    fix = f.fix or ""
    seen: dict[str, list[str | None]] = {}
    notes: list[str] = []
    example, end = False, None
    for m in INLINE.finditer(fix):
        code = m.group(1).strip()
        remove = bool(REMOVE_BEFORE.search(fix[max(0, m.start() - 40):m.start()]))
        before = fix[end - 1:m.start()] if example and end else fix[max(0, m.start() - 30):m.start()]
        example, end = bool(EXAMPLE_BEFORE.search(before)), m.end()
        words = code.split()
        if remove and len(words) == 1 and BARE.match(code) and _env_like(code):
            seen.setdefault(code, []).append(None)
            continue
        lead = 0
        while lead < len(words) and ASSIGN.match(words[lead]):
            lead += 1
        if not lead or (lead < len(words) and not LAUNCH.search(code)):
            continue  # not an env setting (or one before some other program)
        tail = fix[m.end():]
        caveat = re.split(r"[.;(]", tail, maxsplit=1)[0].strip(" ,") if ONLY_FOR.search(tail[:20]) else None
        for a in map(ASSIGN.match, words[:lead]):
            name, value = a.group(1), a.group(2).strip("'\"")
            if not _env_like(name):
                continue
            if DIAGNOSTIC.search(name):
                notes.append(f"{name}={value} makes the run print what it does (a check, not a fix): "
                             "not added to the command")
            elif example:
                notes.append(f"the fix gives {name}={value} as an example: set it by hand if it applies")
            elif caveat:
                notes.append(f"the fix uses {name}={value} {caveat}: not added to the command")
            else:
                seen.setdefault(name, []).append(None if remove else value)
    env: dict[str, str | None] = {}
    for name, values in seen.items():
        if len(set(values)) > 1:
            shown = " and ".join(sorted(f"{name}={v}" if v is not None else f"unset {name}" for v in set(values)))
            notes.append(f"the fix names {shown}: which one applies depends on the version or workload; "
                         "set it by hand")
        else:
            env[name] = values[0]
    return env, notes


def env_for_version(f: Finding, engine: str, version: str | None) -> tuple[dict[str, str | None], list[str]]:
    """The finding's environment changes this run can use, with notes on the rest: a
    variable of the other engine, or one this engine version does not read (when kb
    has that version's list), is left out and said."""
    env, notes = env_of(f)
    known = env_names(engine, version) if version else None
    out: dict[str, str | None] = {}
    foreign: dict[str, list[str]] = {}
    for name, value in env.items():
        other = next((e for e, ps in ENGINE_PREFIXES.items() if e != engine and name.startswith(ps)), None)
        if other:
            foreign.setdefault(other, []).append(name)
        elif known is not None and name not in known and value is not None and not name.startswith(RUNTIME_PREFIXES):
            notes.append(f"{name} is not read by {engine} {version}: left out of the command")
        else:
            out[name] = value
            if value is None:
                notes.append(f"unset {name} where the server starts (the command below leaves it out)")
    for other, names in foreign.items():
        notes.append(f"{', '.join(names)} {'is a' if len(names) == 1 else 'are'} {other} "
                     f"variable{'s' * (len(names) > 1)}, not read by {engine}: left out of the command")
    return out, notes
