"""KB116 version-regression

What it flags: the run's own words state that an engine upgrade made things worse:
a version that worked ("worked on 0.10.2", "0.10.2 was fine", "with 0.10.2 we got
40 tok/s", "rolling back to 0.10.2 fixes it", "it works with the pinned vllm 0.24.0", also
after the error lines, once a regression is stated), a move to a newer one ("after upgrading
to 0.11.0", "since 0.11.0", "0.10.2 -> 0.11.0", "moving from 0.10.2 to 0.11.0", "between
0.10.2 and 0.11.0") and a regression word near it (slower, regression, drop, crash,
broke, fails, garbage, OOM, hangs…). Only versions of the engine the run is about count
(a line naming only the other engine is skipped; a version after torch or CUDA is theirs).

Why it matters: a regression between two releases is the engine's bug, not a setting
to tune: no flag of the new version brings back what the old one did, and the fix is
to run the version that worked until a release after the bad one fixes it. With only
the bad version stated ("since 0.11 it is slower"), the version to pin is the newest
release below it that kb's flag catalogs know, the nearest known release.

Evidence: prose and log lines (pasted issue text, notes), the engine and the version
the run shows (kb.engineversion), the launch command (a docker image).

Fix: pin the version that worked, with the exact command for how the server runs:
`pip install "vllm==A"` / `pip install "sglang[all]==A"`, or the launch command with
its image rewritten to `vllm/vllm-openai:vA` / `lmsysorg/sglang:vA…`; then read the
release notes after the bad version for the fix and upgrade when it ships. Quiet when
the text says a newer version fixed it, when no regression word is near the versions,
or when the run already shows the version that worked.
"""

from __future__ import annotations

import re

from kb import flagdata, launchcmd
from kb.argv import docker_image_at
from kb.engineversion import ENGINE_WORD, VERSION, release, version_in
from kb.evidence import TextLine
from kb.records import Evidence
from kb.rules.base import Proposal, Rule, RuleContext

# a version written in prose: `0.11.0`, `v0.11`, `0.5.4.post1` (kb.engineversion's grammar)
_V = rf"v?({VERSION})(?![\w.]*\d)"
_NAME = r"(?:(?:vllm|sglang|sg-lang)(?:\s+version)?\s+)?"
_AT = rf"(?<![\w.]){_NAME}{_V}"
# words that make a nearby version another package's (`torch 2.8.0`, `CUDA 12.8`, `sglang 0.5.4`
# on a vLLM run); checked on the words just before the version
_OTHER = re.compile(r"\b(?:torch|pytorch|cuda|cu|python|transformers|driver|nccl|triton|flashinfer|xformers|"
                    r"flash[-_ ]?attn|nvidia|ubuntu|numpy|ray|{other})[\s=:v-]*$", re.I)
# a count of GPUs or memory is not a version: "works with 2.5 GB", "fine on 8x H100"
_NOT_HW = r"(?!\s*(?:x\b|gpus?\b|cards?\b|nodes?\b|gb\b|gib\b|tb\b|%))"
_GOOD = [re.compile(p, re.I) for p in (
    rf"\b(?:work(?:ed|s|ing)?|ran|runs|fine|ok|okay|was\s+(?:fine|ok|okay|good|fast(?:er)?|stable|normal))\s+(?:fine\s+|well\s+|ok\s+)?"
    rf"(?:on|with|in|under)\s+(?:the\s+|our\s+)?(?:(?:pinned|old(?:er)?|previous|earlier|last)\s+)?{_AT}{_NOT_HW}",
    # "vllm 0.24.0 works", "0.10.2 still works" (`works only with`/`works but` are not a good version)
    rf"{_AT},?\s+(?:still\s+)?(?:works|worked)\b(?!\s+(?:only|partially|but|worse|slower))",
    rf"{_AT},?\s+(?:it\s+|everything\s+|things\s+|all\s+)?(?:was|is|works?|worked|ran|runs|used\s+to\s+(?:be|work))\s+(?:fine|ok|okay|good|great|fast(?:er)?|"
    rf"normal|stable|correct|well)\b",
    rf"\bwith\s+{_AT},?\s+(?:we|i|it)\s+(?:got|get|saw|had|see|reach(?:ed)?)\b",  # marked (see _ON)
    rf"\b(?:downgrad\w*|roll(?:ed|ing)?\s+back|revert(?:ed|ing)?|go(?:ing)?\s+back|went\s+back|pinn?(?:ed|ing)?)"
    rf"\s+(?:\w+\s+){{0,2}}to\s+{_AT}",
    rf"\b(?:the\s+|our\s+)pinned\s+{_AT}{_NOT_HW}",  # "the pinned vllm 0.24.0" (checked by _pinned_ok)
)]
_PINNED = _GOOD[-1]
_MOVE = [re.compile(p, re.I) for p in (
    rf"\b(?:upgrad\w*|updat\w*|mov\w*|switch\w*|bump\w*|migrat\w*|go(?:ing)?|went)\s+(?:\w+\s+){{0,2}}?"
    rf"(?:from\s+{_AT}\s+)?to\s+{_AT}",
    rf"\bfrom\s+{_AT}\s+to\s+{_AT}",
    rf"{_AT}\s*(?:->|→|=>|-->)\s*{_AT}",
    rf"\bbetween\s+{_AT}\s+and\s+{_AT}",  # "a regression between vllm 0.19.1 and 0.21.0"
)]
_SINCE = [re.compile(p, re.I) for p in (
    rf"\b(?:since|after|starting\s+(?:with|from|in)|as\s+of)\s+{_AT}",
    rf"\bregress\w*\s+(?:in|on|with|since|from)\s+{_AT}",
)]
# "on X" / "with X" near a regression word: X is a version only when written as one (an engine
# name or `v` before it, or three numbers), not `with 0.9 it OOMs` (a memory fraction)
_ON = re.compile(rf"\b(?:on|in|with)\s+{_AT}{_NOT_HW}", re.I)
_REGRESSION = re.compile(
    r"\bslow\w*|\bregress\w*|\bdrop\w*|\bcrash\w*|\bbr(?:oke|eaks?|oken)\b|\bfail\w*|\bgarbage\b|\bgibberish\b|"
    r"\bOOM\b|out of memory|\bhang\w*|\bstuck\b|\bdegrad\w*|\bworse\b|\bsegfault|\bhalf\s+as\s+fast|\bhalved\b|"
    r"\bno\s+longer\b|\bdoes(?:n't| not)\s+(?:work|start)|\bnot\s+working\b|\blower\s+throughput|\bdecreas\w*|"
    r"\bdies\b|\bdied\b|\berrors?\b", re.I)
# a newer version said to fix it: then the advice is that version, not a pin
_FIXED = [re.compile(p, re.I) for p in (
    rf"\b(?:fixed|resolved|solved|addressed)\s+(?:\w+\s+){{0,2}}(?:in|by|with|since|on)\s+{_AT}",
    rf"\b(?:upgrad\w*|updat\w*|mov\w*|switch\w*|bump\w*)\s+(?:\w+\s+){{0,2}}?to\s+{_AT}\s*"
    rf"(?:[^.;]{{0,40}})\b(?:fix\w*|resolv\w*|solv\w*|works?\b|worked)",
)]


def _key(v: str) -> tuple:
    return flagdata.version_key(v)


def _mine(text: str, start: int, other: re.Pattern) -> bool:
    """The version at `start` is not another package's or the other engine's."""
    return not other.search(text[max(0, start - 24):start].rstrip("vV"))


def _marked(text: str, start: int, v: str) -> bool:
    """Written as a version: `v0.11`, `vllm 0.11`, or three numbers or more."""
    return v.count(".") >= 2 or bool(re.search(r"(?:\bv|(?:vllm|sglang|sg-lang)(?:\s+version)?\s+)$",
                                                 text[max(0, start - 16):start], re.I))


def _versions(m: re.Match, text: str, other: re.Pattern, marked: bool = False) -> list[tuple[int, str]]:
    """(group, version) of each version a phrase matched, in order, less those another
    package's name precedes (and, with `marked`, those not written as a version)."""
    return [(i, release(m.group(i))) for i in range(1, (m.lastindex or 0) + 1)
            if m.group(i) and _mine(text, m.start(i), other)
            and (not marked or _marked(text, m.start(i), m.group(i)))]


def _pinned_ok(text: str, m: re.Match) -> bool:
    """`the pinned X` is the version that worked unless its own clause says it fails
    ("the pinned 0.25.1 crashes")."""
    clause = re.split(r"[.;,]\s|\bbut\b", text[m.end():], maxsplit=1)[0]
    return not _REGRESSION.search(clause)


def _near(lines: list[TextLine], i: int) -> bool:
    """A regression word on this line or the ones beside it."""
    return any(_REGRESSION.search(t.text) for t in lines[max(0, i - 1):i + 2])


def statement(lines: list[TextLine], engine: str) -> dict | None:
    """The regression the lines state, {good, bad, fixed, where}, or None. On a line that does
    not name the engine, a number counts as a version only when written as one (`v0.9`, three
    numbers) or after `since` / `upgraded to`: `with 0.9 it OOMs` is a memory fraction."""
    other_engine = "sglang|sg-lang" if engine == "vllm" else "vllm"
    other = re.compile(_OTHER.pattern.format(other=other_engine), re.I)
    good: list[str] = []
    bad: list[str] = []
    fixed: list[str] = []
    where: list[int] = []
    far_good: list[tuple[int, list[str]]] = []  # a version that worked, said away from any regression word
    for i, t in enumerate(lines):
        text = t.text
        named = bool(ENGINE_WORD[engine].search(text))
        if not named and ENGINE_WORD["sglang" if engine == "vllm" else "vllm"].search(text):
            continue  # a line about the other engine only
        fixed += [v for rx in _FIXED for m in rx.finditer(text) for _, v in _versions(m, text, other)]
        said = False
        near = _near(lines, i)
        for rx in _GOOD:
            for m in rx.finditer(text):
                if rx is _PINNED and not _pinned_ok(text, m):
                    continue
                vs = _versions(m, text, other, marked=not named)
                if near:
                    good += [v for _, v in vs]
                    said = said or bool(vs)
                elif vs:  # "It works with the pinned vllm 0.24.0." lines after the error it avoids
                    far_good.append((i, [v for _, v in vs]))
        if not near:
            continue
        for rx in _MOVE:
            for m in rx.finditer(text):
                upgrade = rx is _MOVE[0] and re.match(r"(?:upgrad|updat|bump)", m.group(0), re.I)
                vs = dict(_versions(m, text, other, marked=not (named or upgrade)))
                to = m.lastindex or 0
                if to in vs:  # the version moved to is the bad one; the one moved from, when given, worked
                    bad.append(vs.pop(to))
                    good += list(vs.values())
                    said = True
        for rx in _SINCE + [_ON]:
            for m in rx.finditer(text):
                vs = [v for _, v in _versions(m, text, other, marked=rx is _ON and not named)]
                if vs and vs[0] not in good:
                    bad += vs
                    said = True
        if said:
            where.append(i)
    if bad:  # a worked version away from the regression words counts once a regression is stated
        for i, vs in far_good:
            good += vs
            where.append(i)
    bad = [b for b in bad if b not in good]
    if not where or not (good or bad):
        return None
    return {"good": good, "bad": bad, "fixed": fixed, "where": where}


def _running(ctx: RuleContext, said: list[TextLine]) -> str | None:
    """The version the run shows: a server log's or benchmark's first; a version read from
    text counts only when it is not read from the very lines that state the regression."""
    v = next((t.engine_version for t in ctx.ev.traces if t.engine_version), None) or next(
        (r.engine_version for r in ctx.ev.bench if r.engine_version), None)
    if v:
        return release(v)
    v = ctx.ev.engine_version
    if not v:
        return None
    from_statement = version_in("\n".join(t.text for t in said), ctx.engine)
    return None if from_statement and from_statement[1] == release(v) else release(v)


def _pin(ctx: RuleContext, version: str) -> str:
    """The command that runs `version` the way this server runs: its docker command with the
    image rewritten, else pip."""
    argv = list(ctx.ev.launch_argv)
    at = docker_image_at(argv) if argv else None
    if at is not None:
        repo, _, tag = argv[at].partition(":")
        # keep the user's tag suffix (sglang's `-cu129`): the CUDA build they run
        suffix = re.sub(rf"^v?{VERSION}", "", tag) if re.match(rf"^v?{VERSION}", tag) else ""
        name = repo if ctx.engine in repo.lower() or "sgl" in repo.lower() else (
            "vllm/vllm-openai" if ctx.engine == "vllm" else "lmsysorg/sglang")
        argv[at] = f"{name}:v{version}{suffix}"
        return launchcmd.render(argv, ctx.ev.launch_env or None)
    # sglang's GPU install is its `all` extra (Provides-Extra: all in its 0.4-0.5 wheels)
    return f'pip install "sglang[all]=={version}"' if ctx.engine == "sglang" else f'pip install "vllm=={version}"'


def check(ctx: RuleContext) -> Proposal | None:
    lines = [t for t in ctx.ev.text if t.text]
    st = statement(lines, ctx.engine)
    if not st:
        return None
    said = [lines[i] for i in st["where"]]
    running = _running(ctx, said)
    bad = max(st["bad"], key=_key) if st["bad"] else None
    if bad is None and running and st["good"] and _key(running) > _key(max(st["good"], key=_key)):
        bad = running
    if bad is None:
        return None  # nothing says which newer version regressed
    goods = [g for g in st["good"] if _key(g) < _key(bad)]
    good, nearest = (max(goods, key=_key), False) if goods else (None, True)
    if nearest:
        below = [v for v in flagdata.versions(ctx.engine) if _key(v) < _key(bad)]
        if not below:
            return None
        good = below[-1]
    if any(_key(f) > _key(good) and _key(f) >= _key(bad) for f in st["fixed"]):
        return None  # a newer version fixed it: the advice is that version, not a pin
    if running and _key(running) == _key(good):
        return None  # already on the version that worked
    cmd = _pin(ctx, good)
    notes = [f"check the release notes after {bad} for the fix and upgrade when it ships"]
    if cmd.startswith("pip "):  # the launch shows no docker run: the image too, for those who run one
        # sglang tags a release as vX (all GPUs, since 0.5.3: sgl-project/sglang PR #10671) and
        # vX-cuNNN per CUDA build; keep the suffix of the image in use
        notes.append(f"in docker: {'vllm/vllm-openai' if ctx.engine == 'vllm' else 'lmsysorg/sglang'}:v{good}"
                     + (" (or with your image's CUDA suffix, e.g. -cu129)" if ctx.engine == "sglang" else ""))
    if nearest:
        notes.insert(0, f"{good} is the nearest release below {bad} that kb's flag catalogs know; the text names "
                        "no version that worked: an earlier one may be needed")
    stated = f"{bad} regressed" if nearest else f"{good} worked and {bad} regressed"
    return Proposal(
        title=f"Pin {ctx.engine} {good} (regression in {bad})",
        severity="moderate",
        rationale=f"the run's text states a {ctx.engine} version regression: {stated}; no setting of the newer "
                  "version brings back what the old one did, so run the version that worked until a fixed release",
        commands=[cmd], notes=notes, supporting=["version-regression"],
        evidence=[Evidence(text=t.text.strip()[:200], where=t.where) for t in said[:3]])


RULE = Rule(id="KB116", name="version-regression", title="An engine upgrade regressed: pin the version that worked",
            fix_class="engine-version", signals=(), needs=(), severity="moderate",
            reads="prose and log lines stating a version that worked and a newer one that regressed; the engine "
                  "version the run shows; a docker image in the launch command",
            example=('"worked on vLLM 0.10.2, since 0.11.0 decode is half as fast" → pip install "vllm==0.10.2" '
                     "(tests/rules/KB116/fires)"),
            check=check, doc=__doc__, gain_from_class=False)
