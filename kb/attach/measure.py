"""What the benchmark files say: both sides read with ingest.run.read_run, paired level
by level (kb.compare), and the gains table with its confidence, or the after runs alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.run import read_run
from kb.attach.context import changed_args
from kb.attach.gains import confidence, gains, observed, spread_notes
from kb.attach.request import Request
from kb.compare import levels, match_levels
from kb.errors import InputError
from kb.evidence import RunEvidence
from kb.records import BenchRun, Gain


def _read(paths: list[Path], req: Request) -> RunEvidence:
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
