"""A fleet read from Prometheus: each instance's trace through the same signals and rules
as a log or a live sweep, grouped by instance, the worst named, and each problem judged
fleet-wide or confined to some instances.

A problem every instance shows is the engine's configuration; one that some instances
show while others have room is the traffic's distribution: one replica pinned at its
running cap with a queue while another runs far below that cap with no queue means the
router sends it more than its share, and raising the engine's cap would not help the
fleet's idle capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ingest.prometheus import Answers, iso, trace as make_trace, version_hint
from kb.diagnose import report as diagnosis_report
from kb.evidence import RunEvidence
from kb.records import SEVERITY_ORDER, ServerTrace, Signal
from kb.render import signal_lines
from kb.signals import detect

ROOM = 0.5  # another instance "has room" when it never ran more than half the pinned instance's cap, with no queue


@dataclass
class Instance:
    name: str
    engine: str
    model: str | None
    version_hint: str | None
    trace: ServerTrace
    ev: RunEvidence
    signals: list[Signal] = field(default_factory=list)

    def rank(self) -> tuple:
        s = self.trace.stats
        worst = max((SEVERITY_ORDER[x.severity] for x in self.signals), default=0)
        return (worst, len(self.signals), s.get("queue_nonzero_frac") or 0, s.get("running_mean") or 0)

    def idle(self) -> bool:
        return not self.trace.stats.get("samples")

    def to_json(self) -> dict:
        s = self.trace.stats
        return {"instance": self.name, "engine": self.engine, "model": self.model, "version_hint": self.version_hint,
                "idle": self.idle(), "source": self.trace.source, "startup": self.trace.startup,
                "server_args": self.trace.server_args,
                "stats": {k: s.get(k) for k in ("steps", "idle_steps", "samples", "running_max", "running_mean",
                                                "queued_max", "queue_nonzero_frac", "token_usage_max",
                                                "gen_throughput_max", "gen_throughput_mean", "prompt_throughput_max",
                                                "events", "requests", "prefix_hit_rate", "latency")},
                "signals": [x.model_dump(mode="json") for x in self.signals]}


@dataclass
class Verdict:
    signal: str
    title: str
    severity: str
    scope: str  # fleet-wide | confined | single
    instances: list[str]
    others: list[str]
    text: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Fleet:
    answers: Answers
    instances: list[Instance]  # worst first
    verdicts: list[Verdict]
    diagnosis: object = None  # kb.diagnose.Diagnosis of the worst instance (kb diagnose only)
    warnings: list[str] = field(default_factory=list)

    @property
    def worst(self) -> Instance:
        return self.instances[0]

    def to_json(self) -> dict:
        a = self.answers
        return {"prometheus": {"url": a.url, "selector": a.selector, "start": iso(a.start), "end": iso(a.end),
                               "step_s": a.step, "rate_window_s": a.window},
                "instances": [i.to_json() for i in self.instances],
                "worst": self.worst.name if self.worst.signals else None,
                "fleet": [v.to_json() for v in self.verdicts],
                "diagnosis": self.diagnosis.to_json() if self.diagnosis is not None else None,
                "warnings": self.warnings}


def build(a: Answers, thresholds: dict | None = None) -> Fleet:
    names = a.names
    instances = []
    for name in sorted(a.engine):
        tr = make_trace(a, name)
        ev = RunEvidence(engine=tr.engine, traces=[tr], server_args=dict(tr.server_args),
                         server_args_source=tr.source if tr.server_args else None, model_path=a.model.get(name),
                         files=[{"path": tr.source, "kind": "prometheus", "yielded": _yielded(tr)}])
        inst = Instance(name, tr.engine, a.model.get(name), version_hint(names, tr.engine), tr, ev)
        inst.signals = detect(ev, thresholds)
        instances.append(inst)
    instances.sort(key=lambda i: i.rank(), reverse=True)
    return Fleet(a, instances, verdicts(instances), warnings=list(a.warnings))


def _yielded(tr: ServerTrace) -> str:
    s = tr.stats
    return (f"{tr.engine} via Prometheus: {s.get('steps', 0)} steps of {s.get('step_s'):g} s, "
            f"{s.get('idle_steps', 0)} idle")


def verdicts(instances: list[Instance]) -> list[Verdict]:
    out = []
    by_signal: dict[str, list[tuple[Instance, Signal]]] = {}
    for inst in instances:
        for s in inst.signals:
            by_signal.setdefault(s.id, []).append((inst, s))
    n = len(instances)
    for sid, hits in by_signal.items():
        worst = max(hits, key=lambda h: SEVERITY_ORDER[h[1].severity])
        names = [i.name for i, _ in hits]
        others = [i for i in instances if i.name not in names]
        title, sev = worst[1].title, worst[1].severity
        if n == 1:
            out.append(Verdict(sid, title, sev, "single", names, [],
                               f"{title.lower()} on the only instance, {names[0]}"))
            continue
        if not others:
            out.append(Verdict(sid, title, sev, "fleet-wide", names, [],
                               f"fleet-wide: all {n} instances show it, so it is the engines' configuration "
                               f"(or the total load), not how the traffic is spread"))
            continue
        text = f"confined to {len(names)} of {n} instances ({_list(names)}); {_list([o.name for o in others])} " \
               f"{'does' if len(others) == 1 else 'do'} not show it"
        if sid == "running-cap-with-queue":
            cap = worst[1].data.get("cap") or 0
            roomy = [o for o in others if (o.trace.stats.get("running_max") or 0) <= cap * ROOM
                     and not (o.trace.stats.get("queued_max") or 0)]
            if roomy and len(roomy) == len(others):
                text = (f"confined to {_list(names)}: running requests pinned at the cap ({cap}) with a queue, while "
                        + "; ".join(_room(o) for o in roomy)
                        + " — the router sends the pinned instance(s) more than their share; fix the load "
                          "balancing (a least-loaded or queue-aware policy) before raising the engine's cap")
        out.append(Verdict(sid, title, sev, "confined", names, [o.name for o in others], text))
    out.sort(key=lambda v: -SEVERITY_ORDER[v.severity])
    return out


def _room(o: Instance) -> str:
    s = o.trace.stats
    if o.idle():
        return f"{o.name} was idle ({s.get('steps', 0)} steps with nothing running or waiting)"
    return f"{o.name} ran at most {s.get('running_max') or 0} requests with no queue"


def _list(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ------------------------------------------------------------------ text


def _n(v, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def table(f: Fleet) -> list[str]:
    width = max(12, *(len(i.name) for i in f.instances))
    out = [f"  {'instance':<{width}}  engine  {'running max/mean':>16}  {'queue>0':>7}  {'waiting max':>11}  "
           f"{'KV max':>6}  {'gen tok/s':>9}  {'TTFT p50/p99 ms':>15}  {'TPOT p50 ms':>11}  {'preempt':>7}  signals"]
    for i in f.instances:
        s = i.trace.stats
        if i.idle():  # every step had nothing running or waiting
            s = {**s, "running_max": 0, "running_mean": 0.0, "queue_nonzero_frac": 0.0, "queued_max": 0}
        lat = s.get("latency") or {}
        run = f"{_n(s.get('running_max'))} / {_n(s.get('running_mean'), ',.1f')}"
        q = s.get("queue_nonzero_frac")
        kv = s.get("token_usage_max")
        ev = sum((s.get("events") or {}).values())
        ttft = f"{_n(lat.get('ttft_p50_ms'))} / {_n(lat.get('ttft_p99_ms'))}"
        sig = ", ".join(x.id for x in i.signals) or ("idle" if i.idle() else "-")
        out.append(f"  {i.name:<{width}}  {i.engine:<6}  {run:>16}  {_n(q * 100 if q is not None else None):>6}%  "
                   f"{_n(s.get('queued_max')):>11}  {_n(kv * 100 if kv is not None else None, '.1f'):>5}%  "
                   f"{_n(s.get('gen_throughput_mean')):>9}  {ttft:>15}  {_n(lat.get('tpot_p50_ms'), ',.1f'):>11}  "
                   f"{ev:>7}  {sig}")
    return out


def report(f: Fleet, with_diagnosis: bool) -> str:
    a = f.answers
    out = [f"kb {'diagnose' if with_diagnosis else 'signals'} — Prometheus {a.url} · {a.selector} · "
           f"{iso(a.start)} → {iso(a.end)}, step {a.step:g} s (rate window {a.window:g} s)", ""]
    engines = sorted({(i.engine, i.version_hint or "version not shown") for i in f.instances})
    out.append(f"Instances ({len(f.instances)}, worst first) · " + "; ".join(f"{e}: {h}" for e, h in engines))
    out += table(f)
    out += ["", "Fleet"]
    if not f.verdicts:
        out.append("  nothing looks wrong on any instance")
    for v in f.verdicts:
        out.append(f"  {v.signal} ({v.severity}): {v.text}")
    if f.worst.signals:
        out.append(f"  worst instance: {f.worst.name}")
    if with_diagnosis and f.diagnosis is not None:
        out += ["", f"Diagnosis of the worst instance, {f.worst.name}", ""]
        out.append(diagnosis_report(f.diagnosis))
    else:
        for i in f.instances:
            if i.signals:
                out += ["", f"Signals of {i.name}"]
                for s in i.signals:
                    out += signal_lines(s, "  ")
    for w in f.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)
