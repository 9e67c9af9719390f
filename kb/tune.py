"""`kb tune`: start the server from its launch command, sweep, diagnose, try the changes
kb recommends, keep what works, and record what it learned.

The search is knowledge-guided, not a grid: candidates are the flag changes of the
diagnosis's recommendations (values computed by the rules and findings), tried one at
a time on top of the best configuration so far, each in a fresh server on the same
workload. A candidate that wins is refined numerically (a capacity setting doubled
while the gain exceeds the noise), and its own diagnosis adds the next candidates.
A candidate that fails — a flag the engine rejects, OOM at start-up, a crash under
load — is recorded with the log lines that say why, and the search goes on.

A trial is one server start: the baseline's, each candidate's (a start that fails
counts). `max_trials` bounds the starts, so the budget compares with a grid's cells.
Each trial warms the server up (the workload's top level, unrecorded) before it sweeps:
a fresh CPU vLLM served its first sweep at 40-60% of the next ones' throughput.

Noise: the baseline's server is swept twice; the band is the larger of the two sweeps'
relative difference and 3 %. A candidate within the band of the best is swept once more
in the same server, before it stops, and judged on the mean of its two sweeps; one far
beyond the band is not repeated. The search stops at the trial or time budget, or when
no candidate is left.

The score (higher is better): for `--goal throughput` the best output tok/s over the
levels (with an SLO, the best goodput: output tok/s of requests that met it); for
`--goal latency` the output tok/s one request sees (1000 / median TPOT) at the levels
that meet the SLO, averaged. Every server kb starts is stopped on every path (success,
error, Ctrl-C, SIGTERM), and its process group dies with kb if kb itself is killed; see
kb/live/server.py.
"""

from __future__ import annotations

import math
import shlex
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ingest.launch_command import parse_launch_command
from ingest.run import read_run
from kb import report as rp
from kb.attach import Request, attach
from kb.compare import compare_sides, read_side, table
from kb.diagnose import diagnose
from kb.errors import KbError, ServerError, UsageError
from kb.flags import catalog
from kb.launchcmd import apply, render, split_args
from kb.live.doctor import doctor
from kb.live.server import ManagedServer, StartFailed, multi_node
from kb.live.sweep import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, SweepOptions, sweep

MIN_NOISE = 0.03
# Settings whose value is a capacity: a winning increase is tried once more, doubled.
# The running cap is not doubled past the sweep's highest concurrency: with at most c
# requests in flight a cap above c never binds, so the trial would measure only noise.
RUNNING_CAP = ("max-num-seqs", "max-running-requests")
CAPACITY = ("max-num-seqs", "max-running-requests", "max-num-batched-tokens", "chunked-prefill-size",
            "cuda-graph-max-bs", "cuda-graph-max-bs-decode", "max-cudagraph-capture-size", "max-prefill-tokens")


def default_warmup(sw: SweepOptions) -> int:
    """Warm-up requests for a trial: one per worker of the top level, at least 8."""
    return max(8, math.ceil(max(sw.levels)))


@dataclass
class TuneOptions:
    launch: str
    sweep: SweepOptions
    goal: str = "throughput"
    budget_minutes: float = 60.0
    max_trials: int = 8  # server starts, the baseline's included
    dry_run: bool = False
    candidates: list[str] = field(default_factory=list)  # extra flag changes to try first, e.g. "--max-num-seqs 64"
    config: str | None = None
    gpu: str | None = None
    workdir: Path | None = None
    start_timeout: float = 600.0
    attach: bool = True
    report: Path | None = None  # before/after HTML (default: WORKDIR/report.html)


@dataclass
class Trial:
    n: int
    label: str
    argv: list[str]
    changes: list[tuple[str, object]]
    status: str = "pending"  # ok | failed | interrupted
    score: float | None = None
    scores: list[float] = field(default_factory=list)
    meets_slo: bool | None = None
    why: list[str] = field(default_factory=list)
    out: Path | None = None
    outs: list[Path] = field(default_factory=list)  # every sweep of this configuration (repeats too)
    log: Path | None = None
    minutes: float = 0.0
    levels: list[dict] = field(default_factory=list)
    diagnosis: object = None
    fix_classes: list[str] = field(default_factory=list)
    starts: int = 1  # server starts: 0 for a candidate the engine's parser would refuse

    @property
    def command(self) -> str:
        return render(self.argv)

    def to_json(self) -> dict:
        return {"n": self.n, "label": self.label, "status": self.status, "score": self.score,
                "scores": self.scores, "meets_slo": self.meets_slo, "why": self.why, "command": self.command,
                "changes": [[f, v] for f, v in self.changes], "minutes": round(self.minutes, 2),
                "sweeps": len(self.outs), "starts": self.starts,
                "out": str(self.out) if self.out else None, "log": str(self.log) if self.log else None}


@dataclass
class TuneResult:
    engine: str
    goal: str
    unit: str
    trials: list[Trial] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)  # dry run / multi-node: what would be tried
    noise: float | None = None
    noise_note: str = ""
    best: Trial | None = None
    baseline: Trial | None = None
    stopped: str = ""
    kept: list[str] = field(default_factory=list)  # the changes the best configuration carries
    finding: object = None  # kb.attach.AttachResult
    interrupted: bool = False
    workdir: Path | None = None
    comparison: str = ""  # kb compare's table, baseline vs best, per level and metric
    report: Path | None = None  # the before/after HTML report (kb report), when written

    def to_json(self) -> dict:
        return {"engine": self.engine, "goal": self.goal, "unit": self.unit, "noise": self.noise,
                "noise_note": self.noise_note,
                "plan": self.plan, "stopped": self.stopped, "interrupted": self.interrupted,
                "trials": [t.to_json() for t in self.trials],
                "baseline": self.baseline.n if self.baseline else None, "best": self.best.n if self.best else None,
                "best_command": self.best.command if self.best else None,
                "gain": self.gain(), "finding": self.finding.to_json() if self.finding else None,
                "comparison": self.comparison, "report": str(self.report) if self.report else None,
                "workdir": str(self.workdir) if self.workdir else None}

    def gain(self) -> float | None:
        if self.best and self.baseline and self.baseline.score and self.best.score is not None:
            return round(self.best.score / self.baseline.score, 4)
        return None


# ------------------------------------------------------------------ scoring


def score(levels: list[dict], goal: str, slo: bool) -> tuple[float, bool | None]:
    """(score, meets the SLO at some level or None without one). Higher is better."""
    meets = None
    if slo:
        ok = [r for r in levels if (r.get("slo") or {}).get("meets")]
        meets = bool(ok)
    if goal == "latency":
        pool = (ok if slo and ok else levels) if slo else levels
        tpots = [r["median_tpot_ms"] for r in pool if r.get("median_tpot_ms")]
        return (round(1000.0 / (sum(tpots) / len(tpots)), 3) if tpots else 0.0), meets
    if slo:
        return round(max((r["slo"].get("goodput_tok_s") or 0.0) for r in levels if r.get("slo")), 3), meets
    return round(max(r.get("output_throughput") or 0.0 for r in levels), 3), meets


def verdict(cand: float, best: float, noise: float) -> str:
    """better / worse / within noise, relative to the best so far."""
    if best <= 0:
        return "better" if cand > 0 else "within noise"
    rel = (cand - best) / best
    return "better" if rel > noise else "worse" if rel < -noise else "within noise"


# ------------------------------------------------------------------ candidates


def parse_candidate(text: str) -> list[tuple[str, object]]:
    """`--max-num-seqs 64 --enable-chunked-prefill` → [(flag, value)]; True for a switch."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"candidate {text!r}: {e}") from None
    if not words or not words[0].startswith("--"):
        raise UsageError(f"candidate {text!r}: expected server flags, e.g. \"--max-num-seqs 64\"")
    _, pairs = split_args(["x", *words])
    return [(f, " ".join(v) if v else True) for f, v in pairs]


def from_diagnosis(d, seen: set[str]) -> list[tuple[str, list[tuple[str, object]], list[str]]]:
    """(label, changes, fix classes) from each recommendation with flag changes, in rank order."""
    out = []
    for rec in getattr(d, "recommendations", None) or []:
        changes = [(f.flag, f.new) for f in rec.flags if f.flag]
        key = " ".join(f"{f}={v}" for f, v in changes)
        if not changes or key in seen:
            continue
        seen.add(key)
        out.append((f"{rec.rule}: {rec.title}", changes, [rec.fix_class]))
    return out


def refinements(changes: list[tuple[str, object]], argv_before: list[str],
                in_flight: int | None = None) -> list[tuple[str, object]]:
    """A winning raise of a capacity setting, doubled once more (a running cap only while
    it stays within `in_flight`, the most requests the sweep has in flight, when known)."""
    _, before = split_args(argv_before)
    prev = {f: v[0] for f, v in before if v}
    out = []
    for flag, value in changes:
        if flag.lstrip("-") not in CAPACITY:
            continue
        try:
            new, old = int(str(value)), int(str(prev.get(flag, 0)))
        except ValueError:
            continue
        if new > old and not (in_flight and flag.lstrip("-") in RUNNING_CAP and new >= in_flight):
            out.append((flag, new * 2))
    return out


def unstartable(engine: str, argv: list[str], changes: list[tuple[str, object]]) -> str | None:
    """Why the engine would reject a change before serving, from kb's catalog of its
    argument parser: a number flag given a value that is not a number. Only the type is
    checked — it holds across versions, where a flag's existence and choices do not — so
    a start is never refused that the engine would accept."""
    _, pairs = split_args(argv)
    cat = catalog(engine, flags=[f for f, _ in pairs])
    for flag, value in changes:
        kind = (cat.flags.get(flag) or {}).get("type")
        if value is True or kind not in ("int", "float"):
            continue
        try:
            (int if kind == "int" else float)(str(value))
        except ValueError:
            return (f"not started: {flag} takes an {'integer' if kind == 'int' else 'number'} in {engine} "
                    f"{cat.version}'s argument parser (kb's flag catalog), not {value!r}")
    return None


# ------------------------------------------------------------------ running trials


def _engine(argv: list[str]) -> str:
    cmd = parse_launch_command(shlex.join(argv))
    if cmd is None:
        raise UsageError("launch: expected a `vllm serve …` or `python -m sglang.launch_server …` command")
    return cmd.engine


def _split_env(launch: str) -> tuple[dict[str, str], list[str]]:
    try:
        words = shlex.split(launch)
    except ValueError as e:
        raise UsageError(f"launch: {e}") from None
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-") and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if not words:
        raise UsageError("launch: no command given")
    return env, words


class _Terminated(Exception):
    pass


def _on_sigterm(signum, frame):
    raise _Terminated()


def run_trial(t: Trial, opts: TuneOptions, env: dict[str, str], findings: list, workdir: Path,
              repeat_if=lambda score: False) -> Trial:
    """Start, warm up, sweep, diagnose; sweep once more in the same server when
    repeat_if(score) (the baseline for the noise band, a candidate within it); stop."""
    t.log, t.out = workdir / f"trial-{t.n}.log", workdir / f"trial-{t.n}.jsonl"
    t0 = time.monotonic()
    server = ManagedServer(list(t.argv), t.log, env=env, start_timeout=opts.start_timeout)
    try:
        server.start()  # on a free port kb adds when the command names none; t.argv stays the user's
        r = doctor(server.url, opts.sweep, findings, t.out, launch=render(server.argv), log=t.log, config=opts.config,
                   gpu=opts.gpu)
        t.levels, t.diagnosis = r.sweep.levels, r.diagnosis
        if r.sweep.interrupted:
            t.status = "interrupted"
            raise KeyboardInterrupt
        if r.sweep.error:
            t.status, t.why = "failed", [r.sweep.error, *server.why(4)]
        else:
            t.status = "ok"
            t.score, t.meets_slo = score(t.levels, opts.goal, bool(opts.sweep.slo))
            t.scores = [t.score]
            t.outs = [t.out]
            if repeat_if(t.score):
                _sweep_again(t, r.probe, opts, workdir / f"trial-{t.n}-again.jsonl")
    except StartFailed as e:
        t.status, t.why = "failed", [str(e), *e.lines]
    except ServerError as e:
        t.status, t.why = "failed", [str(e), *server.why(4)]
    finally:
        server.stop()
        t.minutes = (time.monotonic() - t0) / 60
    return t


def _sweep_again(t: Trial, probe, opts: TuneOptions, out: Path) -> None:
    """The same workload once more in the warm server; the trial's score becomes the mean."""
    again = sweep(probe, replace(opts.sweep, warmup=0), out=out)
    if again.interrupted:
        raise KeyboardInterrupt
    if again.error or not again.levels:
        t.why.append(f"the repeat sweep did not finish: {again.error or 'no level finished'}")
        return
    s, _ = score(again.levels, opts.goal, bool(opts.sweep.slo))
    t.scores.append(s)
    t.outs.append(out)
    t.score = round(sum(t.scores) / len(t.scores), 3)


def _lengths(sw) -> str:
    """input:output as the sweep will send them (a default is fitted to the server's context)."""
    return f"{sw.input_len or DEFAULT_INPUT_LEN}:{sw.output_len or DEFAULT_OUTPUT_LEN}"


def dry_plan(opts: TuneOptions, findings: list, engine: str, argv: list[str], why_plan: str | None) -> list[str]:
    """What kb tune would do: the baseline and the candidates kb's diagnosis of the launch
    command alone proposes (a real run adds those its sweep and log reveal)."""
    ev = read_run([], config=opts.config, gpu=opts.gpu, engine=engine, launch=shlex.join(argv))
    d = diagnose(ev, findings)
    levels = ",".join(f"{x:g}" for x in opts.sweep.levels)
    plan = [f"{'plan only: ' + why_plan if why_plan else 'dry run'}: nothing is started",
            f"baseline: start `{render(argv)}`, sweep {'rates' if opts.sweep.rate else 'concurrency'} {levels} "
            f"({_lengths(opts.sweep)} tokens) after a warm-up of {opts.sweep.warmup} requests, twice in the same "
            f"server for the noise band, diagnose"]
    n = 0
    for text in opts.candidates:
        n += 1
        plan.append(f"candidate {n} (given): {text}")
    for label, changes, _ in from_diagnosis(d, set()):
        n += 1
        plan.append(f"candidate {n} ({label}): " + " ".join(f"{f} {v}" if v is not True else f for f, v in changes))
    plan.append(f"then: refine winning capacity settings (doubled while the gain exceeds the noise) and add the "
                f"winners' own recommendations; at most {opts.max_trials} server starts (the baseline's included) "
                f"or {opts.budget_minutes:g} minutes")
    return plan


def tune(opts: TuneOptions, findings: list, store=None) -> TuneResult:
    env, argv = _split_env(opts.launch)
    engine = _engine(argv)
    unit = "output tok/s per user" if opts.goal == "latency" else (
        "goodput, output tok/s" if opts.sweep.slo else "output tok/s")
    res = TuneResult(engine=engine, goal=opts.goal, unit=unit)
    spans = multi_node(argv)
    if opts.dry_run or spans:
        res.plan = dry_plan(opts, findings, engine, argv, f"the launch spans several machines ({spans})" if spans
                            else None)
        res.stopped = "dry run" if not spans else "multi-node launch: plan only"
        return res
    workdir = opts.workdir or Path.cwd() / f"kb-tune-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    res.workdir = workdir
    deadline = time.monotonic() + opts.budget_minutes * 60
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _search(res, opts, env, argv, findings, workdir, deadline)
    except (KeyboardInterrupt, _Terminated):
        res.interrupted, res.stopped = True, "interrupted"
    finally:
        signal.signal(signal.SIGTERM, old)
    if res.best and res.baseline and res.best is not res.baseline and not res.interrupted:
        _before_after(res, opts)
        if opts.attach:
            res.finding = _attach(res, opts, store)
    return res


def _before_after(res: TuneResult, opts: TuneOptions) -> None:
    """kb compare's level-by-level table (noise band from the repeats) and kb report's
    before/after page for the baseline against the best configuration."""
    try:
        c = compare_sides([read_side(list(res.baseline.outs), "baseline"), read_side(list(res.best.outs), "best")])
        res.comparison = table(c)
    except KbError as e:
        res.comparison = f"(not compared: {e})"
        return
    try:
        out = opts.report or (res.workdir / "report.html")
        rp.write(rp.from_comparison(c), out)
        res.report = out
    except KbError as e:  # matplotlib missing: the message says what to install
        res.comparison += f"\n(no HTML report: {e})"


def _search(res: TuneResult, opts: TuneOptions, env: dict, argv: list[str], findings: list, workdir: Path,
            deadline: float) -> None:
    base = run_trial(Trial(n=0, label="baseline", argv=argv, changes=[]), opts, env, findings, workdir,
                     repeat_if=lambda score: True)
    res.trials.append(base)
    if base.status != "ok":
        raise KbError("the baseline did not run: " + "; ".join(base.why[:3]))
    res.baseline = res.best = base
    first, again = base.scores[0], (base.scores[1:] or [None])[0]
    res.noise = round(max(MIN_NOISE, abs(again - first) / ((again + first) / 2)) if again and first else MIN_NOISE, 4)
    res.noise_note = (f"baseline swept twice in one warm server: {first:,.1f} and {again:,.1f}" if again else
                      f"the baseline's second sweep failed: the {MIN_NOISE * 100:.0f}% floor")
    in_flight = None if opts.sweep.rate else math.ceil(max(opts.sweep.levels))  # open-loop rates: unbounded
    seen: set[str] = set()
    queue = [(f"given: {c}", parse_candidate(c), []) for c in opts.candidates]
    queue += from_diagnosis(base.diagnosis, seen)
    n = 0
    while queue:
        if sum(t.starts for t in res.trials) >= opts.max_trials:
            res.stopped = f"trial budget ({opts.max_trials} server starts) reached"
            return
        if time.monotonic() >= deadline:
            res.stopped = f"time budget ({opts.budget_minutes:g} min) reached"
            return
        label, changes, classes = queue.pop(0)
        n += 1
        best = res.best
        cand_argv = apply(best.argv, [(f, v, []) for f, v in changes])
        if cand_argv == best.argv:
            n -= 1
            continue
        why = unstartable(res.engine, cand_argv, changes)
        if why:  # recorded as failed without spending a server start on it
            res.trials.append(Trial(n=n, label=label, argv=cand_argv, changes=changes, status="failed", why=[why],
                                    starts=0))
            continue
        t = run_trial(Trial(n=n, label=label, argv=cand_argv, changes=changes, fix_classes=classes), opts, env,
                      findings, workdir,
                      repeat_if=lambda s, b=best.score: verdict(s, b, res.noise) == "within noise"
                      and time.monotonic() < deadline)
        res.trials.append(t)
        if t.status != "ok":
            continue
        v = verdict(t.score, best.score, res.noise)
        slo_ok = t.meets_slo is not False or best.meets_slo is False
        if v == "better" and slo_ok:
            res.best = t
            res.kept += [f"{f} {v2}" if v2 is not True else f for f, v2 in changes]
            refine = [(f"refine: {f} {v2}", [(f, v2)], classes) for f, v2 in refinements(changes, best.argv, in_flight)]
            queue[:0] = refine
            queue += from_diagnosis(t.diagnosis, seen)
    res.stopped = "no candidate left"


def _attach(res: TuneResult, opts: TuneOptions, store):
    b, w = res.baseline, res.best
    classes = sorted({c for x in res.trials if x.status == "ok" and x is not b and x.score is not None
                      and x.score > b.score for c in x.fix_classes})
    req = Request(before=list(b.outs), after=list(w.outs), fix=f"kb tune kept: {', '.join(res.kept) or w.label}",
                  commands=[w.command], fix_classes=classes, tags=["kb-tune"],
                  note=f"found by kb tune in {len(res.trials)} server starts ({res.stopped}); noise band "
                       f"±{res.noise * 100:.1f}% from the baseline swept twice in one server",
                  engine=res.engine, config=opts.config, gpu=opts.gpu)
    try:
        return attach(req, store)
    except KbError as e:
        res.stopped += f"; the finding was not attached: {e}"
        return None


def report(res: TuneResult) -> str:
    lines = [f"kb tune — {res.engine}, goal {res.goal} ({res.unit})"]
    if res.plan:
        return "\n".join([*lines, *(f"  {p}" for p in res.plan)])
    if res.noise is not None:
        lines.append(f"  noise band ±{res.noise * 100:.1f}% ({res.noise_note})")
    lines.append(f"  {'#':>2}  {'status':<11} {'score':>10}  {'vs base':>8}  {'min':>5}  trial")
    base = res.baseline.score if res.baseline and res.baseline.score else None
    for t in res.trials:
        rel = f"{t.score / base:>7.2f}x" if base and t.score is not None else f"{'-':>8}"
        sc = f"{t.score:>10,.1f}" if t.score is not None else f"{'-':>10}"
        mark = " *" if res.best is t else ""
        lines.append(f"  {t.n:>2}  {t.status:<11} {sc}  {rel}  {t.minutes:>5.1f}  {t.label}{mark}")
        for w in t.why[:4]:
            lines.append(f"        {w}")
    lines.append(f"  stopped: {res.stopped}")
    if res.best:
        lines += ["", "best launch command" + (" (the baseline: nothing beat it beyond the noise)"
                                               if res.best is res.baseline else f" ({res.gain():.2f}x the baseline)"),
                  res.best.command]
    if res.comparison:
        lines += ["", "baseline vs best (kb compare)", res.comparison]
    if res.report:
        lines.append(f"\nbefore/after report: {res.report}")
    if res.finding:
        lines.append(f"\nrecorded as finding {res.finding.id} ({res.finding.action}, {res.finding.path})")
    return "\n".join(lines)
