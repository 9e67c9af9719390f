"""`kb attach`: what a run taught us, written back as a finding the next query finds.

Gains are computed from the benchmark files, never typed: both sides are read with
ingest.run.read_run and compared level by level (same concurrency or request rate,
same input/output lengths when known). Context comes from the runs (engine, server
arguments, config.json, nvidia-smi) and from options, never from guesses. The
finding is redacted, rendered in the canonical format, appended to a findings file
under a lock with an atomic write, and indexed at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Callable

from ingest.markdown import _slug, finding_spans, parse_findings, render
from kb import units, vocab
from kb.compare import Level, Pair, levels, match_levels
from kb.errors import InputError, KbError, NotFoundError
from kb.evidence import RunEvidence
from kb.hardware import lookup_gpu
from kb.records import BenchRun, Context, Finding, Gain, Source
from kb.redact import redact, redact_data, redact_text
from kb.store import Store, atomic_write, file_lock, shipped_findings_dir

HEADER = "# Attached findings\n\nFindings recorded with `kb attach` (format: findings/FORMAT.md).\n"
# Server arguments that differ between runs without being a setting anyone tuned.
NOT_SETTINGS = {"bench", "random_seed", "port", "host", "nccl_port", "dist_init_addr", "status",
                "max_total_num_tokens", "version"}
# (metric as FORMAT.md names it, unit, value of one run); latencies are per-request medians.
METRICS: list[tuple[str, str, Callable[[BenchRun], float | None]]] = [
    ("total throughput", "tok/s", lambda r: r.throughput()),
    ("output throughput", "tok/s", lambda r: r.output_throughput),
    ("TTFT", "ms", lambda r: r.ttft_ms.get("median")),
    ("TPOT", "ms", lambda r: r.tpot_ms.get("median")),
    ("ITL", "ms", lambda r: r.itl_ms.get("median")),
]
CONFIDENCE_ORDER = {"low": 0, "medium": 1, "high": 2}


@dataclass
class AttachResult:
    action: str  # written | updated | duplicate
    id: str
    path: str | None  # the findings file written, or the one holding the duplicate
    finding: Finding  # as written (merged, for an update); for a duplicate, the existing finding
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        from kb.render import finding_json

        return {"id": self.id, "path": self.path, "action": self.action,
                "finding": finding_json(self.finding), "warnings": self.warnings}


# ------------------------------------------------------------------ gains and confidence


def _metric_name(metric: str, lv: Level) -> str:
    kind, value = lv.key
    return f"{metric} ({value:g} req/s)" if kind == "rate" else metric


def _mid(values: list[float]) -> float:
    return round(median(values), 2)


def gains(pairs: list[Pair]) -> list[Gain]:
    rows = []
    for b, a in pairs:
        conc = int(b.key[1]) if b.key[0] == "concurrency" else None
        for metric, unit, get in METRICS:
            bv, av = b.values(get), a.values(get)
            if bv and av:
                rows.append(Gain(metric=_metric_name(metric, b), before=_mid(bv), after=_mid(av), unit=unit,
                                 concurrency=conc, runs=min(len(bv), len(av))))
    return rows


def observed(after: list[Level]) -> list[Gain]:
    """An observation without a comparison: the after values alone."""
    return [Gain(metric=_metric_name(metric, lv), after=_mid(v), unit=unit, runs=len(v),
                 concurrency=int(lv.key[1]) if lv.key[0] == "concurrency" else None)
            for lv in after for metric, unit, get in METRICS if (v := lv.values(get))]


def _throughputs(lv: Level) -> list[float]:
    return lv.values(METRICS[0][2]) or lv.values(METRICS[1][2])


def confidence(pairs: list[Pair]) -> tuple[str, str]:
    """(low|medium|high, why): repeated runs whose ranges do not overlap earn trust."""
    single = [b.label() for b, a in pairs if min(len(_throughputs(b)), len(_throughputs(a))) < 2]
    if single:
        return "low", (f"a single run on a side at {', '.join(single)}: cold-start effects (JIT compilation, "
                       "autotuning, cache warm-up) and run-to-run noise are not ruled out; repeat each side 2-3 times")
    overlap = [b.label() for b, a in pairs
               if not (min(_throughputs(a)) > max(_throughputs(b)) or max(_throughputs(a)) < min(_throughputs(b)))]
    if overlap:
        return "low", (f"the before and after runs overlap at {', '.join(overlap)}: the change is within "
                       "run-to-run noise")
    n = min(min(len(_throughputs(b)), len(_throughputs(a))) for b, a in pairs)
    return ("high" if n >= 3 else "medium"), (f"{n} or more runs per side at every level, and every after run "
                                              "differs from every before run in the same direction")


def _spread(values: list[float]) -> str:
    mid = median(values)
    return f"median {mid:,.1f} tok/s, spread {(max(values) - min(values)) / mid:.1%}" if mid else "no throughput"


def spread_notes(pairs: list[Pair]) -> list[str]:
    notes = []
    for b, a in pairs:
        tb, ta = _throughputs(b), _throughputs(a)
        if len(tb) > 1 or len(ta) > 1:
            notes.append(f"At {b.label()}: {len(tb)} runs before ({_spread(tb)}), {len(ta)} after ({_spread(ta)}); "
                         "each cell of the table is the median of the runs.")
    return notes


# ------------------------------------------------------------------ context


def _first(evs: list[RunEvidence], get: Callable[[RunEvidence], object]):
    return next((v for ev in evs if (v := get(ev)) is not None), None)


def context(evs: list[RunEvidence]) -> tuple[Context, list[str]]:
    """The finding's context from the runs (after side first) and what is missing."""
    model, hw = _first(evs, lambda e: e.model), _first(evs, lambda e: e.hardware)
    name = (model.name if model else None) or _first(evs, lambda e: e.model_path)
    ctx = Context(engine=_first(evs, lambda e: e.engine), engine_version=_first(evs, lambda e: e.engine_version),
                  model=str(name).rstrip("/").rsplit("/", 1)[-1] if name else None)
    if hw:
        spec = lookup_gpu(hw.gpu)  # "NVIDIA H100 NVL" as nvidia-smi says it → "H100 NVL" as findings name it
        ctx = ctx.model_copy(update={"gpu": spec.name if spec else hw.gpu, "gpu_arch": hw.arch, "gpu_count": hw.count,
                                     "interconnect": hw.interconnect})
    if model:
        ctx = ctx.model_copy(update={"model_family": model.family, "experts": model.experts,
                                     "experts_per_token": model.experts_per_token,
                                     "expert_intermediate_size": model.expert_intermediate_size,
                                     "quantization": model.quantization,
                                     "params_b": round(model.params_b, 2) if model.params_b else None})
    missing = []
    if not ctx.engine:
        missing.append("engine unknown: give --engine")
    if not hw:
        missing.append("GPU unknown: give --gpu (or put nvidia-smi output in the run directory)")
    if not model:
        missing.append("model config unknown (family, experts, quantization): give --config")
    return ctx, missing


def _flag_value(v) -> str:
    if v is None:
        return "(unset)"
    if isinstance(v, bool):
        return "on" if v else "off"
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def changed_args(before: RunEvidence, after: RunEvidence) -> list[str]:
    """`--flag old → new` for every server argument that differs (credentials hidden)."""
    if not before.server_args or not after.server_args:
        return []
    out = []
    for key in sorted((set(before.server_args) | set(after.server_args)) - NOT_SETTINGS):
        old, new = (redact(key, ev.server_args.get(key)) for ev in (before, after))
        if old != new:
            out.append(f"`--{key.replace('_', '-')} {_flag_value(old)} → {_flag_value(new)}`")
    if before.engine_version and after.engine_version and before.engine_version != after.engine_version:
        out.append(f"{after.engine or 'engine'} {before.engine_version} → {after.engine_version}")
    return out


# ------------------------------------------------------------------ sources


def sources(evs: list[RunEvidence], used: list[BenchRun]) -> list[Source]:
    """The runs compared, with their line ranges, then the other files that gave context."""
    lines: dict[str, list[int]] = {}
    for r in used:
        if r.source:
            lines.setdefault(str(Path(r.source.path).resolve()), []).extend([r.source.line] if r.source.line else [])
    out = []
    for path, nums in lines.items():
        ranges = [Source(path=path, line_start=s, line_end=e) for s, e in _ranges(sorted(set(nums)))]
        out += ranges or [Source(path=path)]
    for ev in evs:
        for f in ev.files:
            p = str(Path(f["path"]).resolve())
            if "kind" in f and p not in lines and Source(path=p) not in out:
                out.append(Source(path=p))
    return out


def _ranges(nums: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(s, e) for s, e in out]


# ------------------------------------------------------------------ building the finding


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


UNCLASSIFIED = "unclassified"


def _fix_classes(given: list[str], flags: list[str], text: str) -> tuple[list[str], str | None]:
    """--fix-class as given; else what the changed flags name (exact), else what the text
    names; else `unclassified`: a finding is never turned away for want of a class (it is
    still searched by `kb ask`). Returns the classes and a warning when they were not given."""
    wanted = [c.strip() for g in given for c in g.split(",") if c.strip()]
    bad = [c for c in wanted if c not in vocab.FIX_CLASSES]
    if bad:
        raise KbError(f"unknown fix class {', '.join(bad)}: expected one of {', '.join(vocab.FIX_CLASSES)}")
    if wanted:
        return wanted, None
    found = vocab.fix_classes_in(" ".join(flags))[:3] or vocab.fix_classes_in(text)[:2]
    if found:
        return found, f"fix classes inferred: {', '.join(found)} (set them with --fix-class)"
    return [UNCLASSIFIED], ("no fix class could be inferred from --fix, --command or the changed server arguments: "
                            f"stored as {UNCLASSIFIED} (classify it by editing its 'Fix classes' line)")


def _headline(rows: list[Gain]) -> Gain | None:
    """The gain a title quotes: the best throughput row, else the best row."""
    tput = [g for g in rows if g.metric.startswith("total throughput") and g.ratio()]
    return max(tput, key=lambda g: g.ratio()) if tput else max((g for g in rows if g.ratio()),
                                                                key=lambda g: g.ratio(), default=None)


def _title(given: str | None, fix: str, ctx: Context, head: Gain | None) -> str:
    if given:
        return _one_line(given).rstrip("#").strip()
    what = fix if len(fix) <= 80 else fix[:79].rsplit(" ", 1)[0] + "…"
    where = ", ".join(x for x in (ctx.model, f"{ctx.gpu_count}x {ctx.gpu}" if ctx.gpu else None) if x)
    return what + (f" on {where}" if where else "") + (f" — {head.describe()}" if head else "")


@dataclass
class Request:
    """What the user asked to attach (the CLI's options)."""

    before: list[Path] = field(default_factory=list)
    after: list[Path] = field(default_factory=list)
    fix: str | None = None
    commands: list[str] = field(default_factory=list)
    title: str | None = None
    tags: list[str] = field(default_factory=list)
    fix_classes: list[str] = field(default_factory=list)
    symptoms: list[str] = field(default_factory=list)
    cause: str | None = None
    note: str | None = None
    to: Path | None = None
    update: str | None = None
    force_new: bool = False
    engine: str | None = None
    gpu: str | None = None
    config: str | None = None


def _read(paths: list[Path], req: Request) -> RunEvidence:
    from ingest.run import read_run

    ev = read_run(list(paths), config=req.config, gpu=req.gpu, engine=req.engine)
    if not ev.bench:
        raise InputError(", ".join(map(str, paths)), "no benchmark results found (sglang/vLLM bench_serving, "
                                                       "GuideLLM, GenAI-Perf or AIPerf output)")
    return ev


@dataclass
class Measurement:
    """What the benchmark files say: the gains table and how far to trust it."""

    evs: list[RunEvidence] = field(default_factory=list)  # after side first
    gains: list[Gain] = field(default_factory=list)
    used: list[BenchRun] = field(default_factory=list)  # the runs the table is built from
    confidence: str = "low"
    changes: list[str] = field(default_factory=list)  # `--flag old → new`
    body: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _compare(req: Request) -> Measurement:
    b_ev, a_ev = _read(req.before, req), _read(req.after, req)
    names = (", ".join(map(str, req.before)), ", ".join(map(str, req.after)))
    pairs, warnings = match_levels(levels(b_ev.bench), levels(a_ev.bench), names)
    conf, why = confidence(pairs)
    body = [f"Measured by kb attach: before {names[0]}, after {names[1]}.", *spread_notes(pairs),
            "Latency rows (TTFT, TPOT, ITL) are per-request medians.", f"Confidence {conf}: {why}.",
            *(f"Caveat: {w}" for w in warnings)]
    return Measurement(evs=[a_ev, b_ev], gains=gains(pairs), used=[r for b, a in pairs for r in b.runs + a.runs],
                       confidence=conf, changes=changed_args(b_ev, a_ev), body=body, warnings=warnings)


def _observe(req: Request) -> Measurement:
    ev = _read(req.after, req)
    return Measurement(evs=[ev], gains=observed(levels(ev.bench)), used=ev.bench,
                       body=[f"Observed by kb attach in {', '.join(map(str, req.after))} (no before run to compare "
                             "with, so confidence is low)."])


def measure(req: Request) -> Measurement:
    if req.before:
        return _compare(req)
    if req.after:
        return _observe(req)
    return Measurement(body=["Recorded by kb attach without benchmark files."])


def _symptom(head: Gain, ctx: Context) -> str:
    at = f" at {head.concurrency} concurrency" if head.concurrency else ""
    on = f" on {ctx.model}" + (f" ({ctx.gpu_count}x {ctx.gpu})" if ctx.gpu else "") if ctx.model else ""
    return f"{head.metric} {units.quantity(head.before, head.unit)}{at}{on} before the change"


def build(req: Request) -> tuple[Finding, list[str]]:
    """The finding (id still 'pending') and the warnings, before anything is written."""
    if not (req.fix or req.title):
        raise KbError("say what changed with --fix (or give a --title)")
    if req.before and not req.after:
        raise KbError("--before needs --after: the run after the change")
    m = measure(req)
    ctx, missing = context(m.evs)
    warnings = [w for ev in m.evs for w in ev.warnings] + m.warnings + (missing if m.evs else [])
    if len({ev.hardware.gpu for ev in m.evs if ev.hardware}) > 1:
        warnings.append("the before and after runs name different GPUs: the gain may not be the change alone")
    head = _headline(m.gains)
    symptoms = [_one_line(s).replace(";", ",") for s in req.symptoms if s.strip()]
    if not symptoms and head and head.before is not None:
        symptoms = [_symptom(head, ctx)]
    fix = _one_line(req.fix or req.title) + (f" (changed: {', '.join(m.changes)})" if m.changes else "")
    commands = [c.strip() for c in req.commands if c.strip()]
    if not commands and m.evs and m.evs[0].launch_argv:
        from kb.launchcmd import render as render_command

        commands = [render_command(m.evs[0].launch_argv, m.evs[0].launch_env)]
    classes, why = _fix_classes(req.fix_classes, [c.split()[0] for c in m.changes if c.startswith("`--")],
                                " ".join([fix, req.title or "", *commands]))
    warnings += [why] if why else []
    body = m.body + ([f"Note: {_one_line(req.note)}"] if req.note else [])
    finding = Finding(
        id="pending", title=_title(req.title, _one_line(req.fix or req.title), ctx, head),
        symptoms=symptoms, context=ctx, root_cause=_one_line(req.cause) or None, fix=fix,
        fix_classes=classes, commands=commands, gains=m.gains, sources=sources(m.evs, m.used),
        confidence=m.confidence, tags=[t.strip() for g in req.tags for t in g.split(",") if t.strip()],
        body="\n".join(body))
    # credentials never reach the file, the index or the output
    clean = Finding.model_validate(redact_data(finding.model_dump()))
    return clean, [redact_text(w) for w in warnings]


# ------------------------------------------------------------------ writing


def _same_context_key(f: Finding) -> tuple:
    c = f.context
    low = lambda v: str(v).lower() if v is not None else None  # noqa: E731
    return frozenset(f.fix_classes), low(c.engine), low(c.arch()), low(c.model_family), low(c.quantization)


def near_duplicate(f: Finding, existing: list[Finding]) -> Finding | None:
    """A finding of the same fix classes measured in the same engine, GPU architecture,
    model family and quantization. Unclassified findings share no class, only a label:
    two of them in one context are not duplicates."""
    if UNCLASSIFIED in f.fix_classes:
        return None
    key = _same_context_key(f)
    return next((e for e in existing if e.kind == "finding" and _same_context_key(e) == key), None)


def _id_base(title: str, limit: int = 48) -> str:
    """The title's slug, cut at a word boundary."""
    slug = _slug(title, 200)
    return slug if len(slug) <= limit else slug[:limit + 1].rsplit("-", 1)[0]


def _unique_id(base: str, taken: set[str]) -> str:
    fid, n = base, 2
    while fid in taken:
        fid, n = f"{base}-{n}", n + 1
    return fid


def _file_of(store: Store, fid: str) -> Path | None:
    for key, entry in store.manifest()["sources"].items():
        if fid in entry.get("ids", []):
            return Path(key)
    return None


def _read_file(path: Path) -> tuple[str, list[Finding]]:
    if not path.exists():
        return "", []
    text = path.read_text(encoding="utf-8")
    return text, parse_findings(text, str(path))


def _checked_write(path: Path, text: str, f: Finding) -> None:
    """Write only text that reads back to exactly this finding."""
    back = {x.id: x for x in parse_findings(text, str(path))}.get(f.id)
    if back != f:
        raise KbError(f"{path}: the finding would not read back as written; nothing was written")
    atomic_write(path, text)


def _append(path: Path, f: Finding, taken: set[str]) -> Finding:
    text, records = _read_file(path)
    f = f.model_copy(update={"id": _unique_id(_id_base(f.title), taken | {r.id for r in records})})
    _checked_write(path, (text.rstrip("\n") + "\n\n" if text.strip() else HEADER + "\n") + render(f), f)
    return f


def merge(old: Finding, new: Finding) -> Finding:
    """`old` with the new measurement: its gains, sources and commands added, context gaps filled."""
    ctx = old.context.model_copy(update={k: v for k, v in new.context.model_dump().items()
                                         if getattr(old.context, k) is None and v is not None})
    body = [old.body] if old.body else []
    body.append(f"Update by kb attach: {new.fix}")
    body += [p for p in new.body.split("\n") if p]
    return old.model_copy(update={
        "context": ctx,
        "gains": old.gains + [g for g in new.gains if g not in old.gains],
        "sources": old.sources + [s for s in new.sources if s not in old.sources],
        "commands": old.commands + [c for c in new.commands if c not in old.commands],
        "confidence": max(old.confidence, new.confidence, key=CONFIDENCE_ORDER.get),
        "body": "\n".join(body),
    })


def _update(path: Path, fid: str, new: Finding) -> Finding:
    text, records = _read_file(path)
    old = next((r for r in records if r.id == fid), None)
    if old is None:
        raise NotFoundError(f"no finding with id {fid!r} in {path}")
    span = finding_spans(text).get(fid)
    if span is None:
        raise KbError(f"{path}: {fid} is not written in the canonical format (findings/FORMAT.md), "
                      "so it cannot be updated in place")
    merged = merge(old, new)
    start, end = span
    lines = text.splitlines(keepends=True)
    _checked_write(path, "".join(lines[:start - 1]) + render(merged) + "".join(lines[end:]), merged)
    return merged


def _is_shipped(path: Path) -> bool:
    shipped = shipped_findings_dir()
    return bool(shipped) and path.resolve().is_relative_to(shipped.resolve())


def _locate(store: Store, fid: str, target: Path, load) -> Path:
    """The findings file that holds `fid`: the target, else wherever the index found it."""
    if any(r.id == fid for r in _read_file(target)[1]):
        return target
    found = _file_of(store, fid)
    if found is None:
        with file_lock(target):
            store.sync(load)
        found = _file_of(store, fid)
    if found is None:
        raise NotFoundError(f"no finding with id {fid!r} to update (try `kb ask` or `kb show`)")
    if _is_shipped(found):
        raise KbError(f"{fid} is shipped with kb ({found}) and is not edited: attach with --force-new instead")
    return found


def attach(req: Request, store: Store | None = None) -> AttachResult:
    """Build the finding from the runs and options, then write it (or report a near-duplicate)."""
    from ingest.detect import load_findings

    store = store or Store()
    finding, warnings = build(req)
    target = Path(req.to).expanduser() if req.to else store.user_findings_dir / "attached.md"
    if req.update:
        target = _locate(store, req.update, target, load_findings)
    target = target.resolve()
    try:
        # One lock across read, check, write and re-index: concurrent attaches queue, none is lost.
        with file_lock(target):
            return _write(store, target, req, finding, warnings, load_findings)
    except OSError as e:
        raise KbError(f"{target}: cannot write ({e.strerror or e})") from e


def _write(store: Store, target: Path, req: Request, finding: Finding, warnings: list[str], load) -> AttachResult:
    from kb import index as kbindex

    store.sync(load)
    indexed = kbindex.all_records(store.index_dir)
    if req.update:
        written, action = _update(target, req.update, finding), "updated"
    else:
        dup = None if req.force_new else near_duplicate(finding, _read_file(target)[1] + indexed)
        if dup:
            warnings.append(f"{dup.id} already records {', '.join(dup.fix_classes)} in this context: nothing "
                            f"written (--update {dup.id} adds this measurement to it, --force-new writes a "
                            "separate finding)")
            return AttachResult("duplicate", dup.id, str(_file_of(store, dup.id) or target), dup, warnings)
        written, action = _append(target, finding, {r.id for r in indexed}), "written"
    auto = {p.resolve() for p in store.auto_sources()}
    store.sync(load, [] if target in auto else [target])  # a file elsewhere is pinned, so reindex keeps it
    return AttachResult(action, written.id, str(target), written, warnings)


# ------------------------------------------------------------------ report


def report(res: AttachResult) -> str:
    from kb.render import context_line

    f = res.finding
    if res.action == "duplicate":
        head = f"duplicate: {res.id} (in {res.path}) already records this fix in this context; nothing written"
    else:
        head = f"{res.action} {res.id} {'to' if res.action == 'written' else 'in'} {res.path}"
    out = [head, f"  title       {f.title}", f"  context     {context_line(f) or 'unknown'}",
           f"  fix         {f.fix}", f"  fix classes {', '.join(f.fix_classes)}", f"  confidence  {f.confidence}"]
    out += [f"  command     {c}" for c in f.commands]
    if f.gains:
        out.append("  gains")
        out += [f"    {g.describe()}" + (f"  [{g.runs} run{'s' * (g.runs != 1)} per side]" if g.runs else "")
                for g in f.gains]
    out += [f"warning: {w}" for w in res.warnings]
    return "\n".join(out)
