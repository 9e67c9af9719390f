"""`kb report` and `kb compare --report`: what a run (or several) shows, as one HTML file.

This module gathers the numbers (series of points per workload, the knee of each
series from kb.signals, the server's state during the sweep, facts about model,
hardware and launch); kb.report_html lays them out and kb.plots draws them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from ingest.kb_sweep import read as read_sweep_line
from ingest.run import read_run
from kb import launchcmd, report_html
from kb.attach import changed_args
from kb.compare import METRICS, Comparison, compare_sides, levels, read_side
from kb.diagnose import diagnose, hw_line, model_line
from kb.errors import InputError
from kb.evidence import RunEvidence
from kb.records import BenchRun, Hardware, ModelProfile, Recommendation, Signal
from kb.redact import redact
from kb.signals import THRESHOLDS, throughput_plateau
from kb.store import atomic_write


@dataclass
class Point:
    level: float
    runs: int
    values: dict[str, float]  # METRICS key → median over the runs at this level
    per_user: float | None = None  # output tok/s per user (output throughput / concurrency)
    per_gpu: float | None = None  # output tok/s per GPU


@dataclass
class Series:
    name: str
    kind: str  # concurrency | rate | all
    input_len: float | None
    output_len: float | None
    points: list[Point]
    knee: dict | None = None  # throughput-plateau signal data: knee, max_level, knee_throughput, ...
    gpus_note: str = ""  # "" when the GPU count is known, else what "per GPU" stands for


@dataclass
class Report:
    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    state: list[dict] = field(default_factory=list)  # server-state panels (kb.plots.server_state)
    signals: list[Signal] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    combined: str | None = None
    files: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    comparison: Comparison | None = None
    changes: dict[str, list[str]] = field(default_factory=dict)  # side name → changed server arguments


# ------------------------------------------------------------------ series


def gpu_count(ev: RunEvidence) -> tuple[float, str]:
    """GPUs behind the server: nvidia-smi / --gpu, else TP x PP x DP from its arguments
    (vLLM's plot_pareto does the same); else 1, said so."""
    if ev.hardware and ev.hardware.count:
        return float(ev.hardware.count), ""
    world, known = 1.0, False
    for names in (("tp_size", "tensor_parallel_size"), ("pp_size", "pipeline_parallel_size"),
                  ("dp_size", "data_parallel_size")):
        try:
            v = float(ev.arg(*names) or 0)
        except (TypeError, ValueError):
            v = 0
        if v >= 1:
            world *= v
            known = True
    return world, "" if known else "server (GPU count unknown)"


def series(name: str, ev: RunEvidence, thresholds: dict | None = None) -> list[Series]:
    """One series per workload (load kind and input/output lengths) in this run."""
    th = (thresholds or THRESHOLDS)["throughput-plateau"]
    gpus, note = gpu_count(ev)
    groups: dict[tuple, list] = {}
    for lv in levels(ev.bench):
        groups.setdefault((lv.key[0], lv.input_len, lv.output_len), []).append(lv)
    out = []
    for (kind, inp, outp), lvs in groups.items():
        points = []
        for lv in lvs:
            vals = {m.key: median(v) for m in METRICS if (v := lv.values(m.get))}
            users = lv.key[1] if kind == "concurrency" else _peak(lv.runs)
            out_tps = vals.get("output_tok_s")
            points.append(Point(level=float(lv.key[1]), runs=len(lv.runs), values=vals,
                                per_user=out_tps / users if out_tps and users else None,
                                per_gpu=out_tps / gpus if out_tps else None))
        sig = throughput_plateau(RunEvidence(bench=[r for lv in lvs for r in lv.runs]), th)
        label = name if len(groups) == 1 else f"{name} ({_workload(kind, inp, outp)})"
        out.append(Series(label, kind, inp, outp, points, sig.data if sig else None, note))
    return out


def _peak(runs: list[BenchRun]) -> float | None:
    peaks = [r.peak_concurrency for r in runs if r.peak_concurrency]
    return median(peaks) if peaks else None


def _workload(kind: str, inp, outp) -> str:
    lens = f"{inp or '?'}/{outp or '?'} tokens in/out" if inp or outp else "lengths unknown"
    return lens if kind == "concurrency" else f"{lens}, {kind}"


# ------------------------------------------------------------------ server state


def server_state(ev: RunEvidence) -> list[dict]:
    """Running, waiting, KV usage and preemptions over time: from the sweep's /metrics
    samples (kb sweep), else from the server log's stats lines."""
    live = sorted((t for t in ev.traces if t.stats.get("origin") == "metrics" and t.samples),
                  key=lambda t: float(t.stats.get("level") or 0))
    if live:
        return [_live_panel(ev, live)]
    logs = [t for t in ev.traces if t.samples]
    if logs:
        return [_log_panel(max(logs, key=lambda t: len(t.samples)))]
    return []


def _t(time: str | None) -> float | None:
    m = re.match(r"^\+([\d.]+)s$", time or "")
    return float(m.group(1)) if m else None


def _live_panel(ev: RunEvidence, traces) -> dict:
    durations = {r.concurrency: r.duration_s for r in ev.bench if r.concurrency and r.duration_s}
    x, running, waiting, kv, marks, pre = [], [], [], [], [], []
    offset = 0.0
    for tr in traces:
        level = tr.stats.get("level")
        marks.append((offset, f"c={level}"))
        ts = [_t(s.time) or 0.0 for s in tr.samples]
        for t, s in zip(ts, tr.samples, strict=True):
            x.append(offset + t)
            running.append(s.running or 0)
            waiting.append(s.queued)
            kv.append(s.token_usage)
        span = durations.get(level) or (max(ts) + (tr.stats.get("interval_s") or 1.0))
        n = sum((tr.stats.get("events") or {}).values())
        if n:
            pre.append((offset + span / 2, n))
        offset += max(span, max(ts, default=0))
    return {"x": x, "running": running, "waiting": waiting, "kv": kv, "marks": marks, "preemptions": pre,
            "xlabel": "seconds into the sweep (/metrics samples; grey lines start each level)",
            "source": ", ".join(sorted({t.source for t in traces}))}


def _log_panel(tr) -> dict:
    samples = tr.samples
    lines = [s.line or 0 for s in samples]
    pre: dict[int, int] = {}
    for e in tr.events:
        if e.kind in ("retract", "preempt") and e.where.line:
            i = next((k for k, ln in enumerate(lines) if ln >= e.where.line), len(lines) - 1)
            pre[i] = pre.get(i, 0) + 1
    return {"x": list(range(len(samples))), "running": [s.running or 0 for s in samples],
            "waiting": [s.queued for s in samples], "kv": [s.token_usage for s in samples], "marks": [],
            "preemptions": sorted(pre.items()), "xlabel": f"stats lines of {tr.source}, in order",
            "source": tr.source}


# ------------------------------------------------------------------ facts


def facts(ev: RunEvidence) -> list[tuple[str, str]]:
    out = [("engine", " ".join(x for x in (ev.engine or "unknown", ev.engine_version or "") if x)),
           ("model", model_line(ev) + (f" ({ev.model_path})" if ev.model_path and ev.model and
                                        ev.model_path != ev.model.name else "")),
           ("hardware", hw_line(ev))]
    if ev.model and ev.model.params_b:
        out.append(("parameters", f"{ev.model.params_b:,.1f} B total"
                    + (f", {ev.model.active_params_b:,.1f} B active" if ev.model.active_params_b else "")))
    if ev.launch_argv:
        out.append(("launch command", launchcmd.render(ev.launch_argv, ev.launch_env)))
    if ev.server_args:
        shown = {k: redact(k, v) for k, v in sorted(ev.server_args.items()) if v not in (None, "", [], {})}
        out.append(("server arguments", ", ".join(f"{k}={_short(v)}" for k, v in shown.items())
                    + (f"  (from {ev.server_args_source})" if ev.server_args_source else "")))
    startup = {k: v for t in ev.traces for k, v in t.startup.items()}
    if startup:
        out.append(("start-up facts", ", ".join(f"{k}={_short(v)}" for k, v in list(startup.items())[:12])))
    return out


def _short(v) -> str:
    s = json.dumps(v) if isinstance(v, (list, dict)) else str(v)
    return s if len(s) <= 80 else s[:77] + "…"


# ------------------------------------------------------------------ building reports


def from_diagnosis(d, thresholds: dict | None = None, name: str = "this run") -> Report:
    """A report of one run from its diagnosis (kb report, kb doctor --report)."""
    ev = d.ev
    title = f"{d.engine or 'engine?'} {ev.engine_version or ''}".strip() + f" · {model_line(ev)} · {hw_line(ev)}"
    return Report(title=title, facts=facts(ev), series=series(_bench_name(ev) or name, ev, thresholds),
                  state=server_state(ev),
                  signals=d.signals, recommendations=d.recommendations, combined=d.combined, files=ev.files,
                  warnings=d.warnings)


def from_comparison(c: Comparison, thresholds: dict | None = None) -> Report:
    """Every run's curves overlaid, with the comparison table (kb compare --report)."""
    ss, fs = [], []
    for s, label in zip(c.sides, short_names([s.name for s in c.sides]), strict=True):
        ss += series(label, s.ev, thresholds)
        fs += s.ev.files
    base = c.baseline.ev
    names = short_names([s.name for s in c.sides])
    rep = Report(title=f"kb compare · baseline {c.baseline.name} · " + " · ".join(s.name for s in c.others),
                 facts=[(n, " · ".join(v for _, v in facts(s.ev)[:3])) for n, s in zip(names, c.sides, strict=True)],
                 series=ss,
                 files=fs, warnings=c.warnings, comparison=c)
    rep.changes = {s.name: [x.strip("`") for x in changed_args(base, s.ev)] for s in c.others}
    return rep


def from_attach(before: list[Path], after: list[Path], config: str | None = None, gpu: str | None = None,
                engine: str | None = None) -> Report:
    """kb attach --report: before and after overlaid, or the after run alone (an observation)."""
    if before:
        return from_comparison(compare_sides([read_side(before, "before: " + ", ".join(map(str, before))),
                                              read_side(after, "after: " + ", ".join(map(str, after)))]))
    return from_diagnosis(diagnose(read_run(after, config=config, gpu=gpu, engine=engine), []),
                          name=", ".join(p.name for p in after))


def short_names(names: list[str]) -> list[str]:
    """File names without their directories when that still tells the runs apart."""
    base = [Path(n.split(": ", 1)[-1].split(", ")[0]).name or n for n in names]
    prefix = [n.split(": ", 1)[0] + ": " if ": " in n else "" for n in names]
    short = [p + b for p, b in zip(prefix, base, strict=True)]
    return short if len(set(short)) == len(short) else names


def _bench_name(ev: RunEvidence) -> str | None:
    """The benchmark files of a run, by name."""
    names = list(dict.fromkeys(Path(r.source.path).name for r in ev.bench if r.source))
    if not names:
        return None
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


def load_saved(path: Path) -> tuple[str, dict] | None:
    """('diagnose'|'doctor', document) when `path` is a saved `kb diagnose --json` or
    `kb doctor --json`; None for anything else."""
    try:
        if not path.is_file() or path.stat().st_size > 64 * 2**20:
            return None
        with open(path, "rb") as fh:
            if fh.read(64).lstrip()[:1] != b"{":
                return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("diagnosis"), dict) and isinstance(doc.get("sweep"), dict) and "probe" in doc:
        return "doctor", doc
    if {"signals", "recommendations", "curve", "files"} <= set(doc):
        return "diagnose", doc
    return None


def from_saved(path: Path, kind: str, doc: dict, thresholds: dict | None = None) -> Report:
    """A report from a saved diagnosis: its signals and recommendations as they were,
    its curve (a doctor file's sweep levels carry every percentile)."""
    diag = doc["diagnosis"] if kind == "doctor" else doc
    try:
        ev = RunEvidence(engine=diag.get("engine"), engine_version=diag.get("engine_version"),
                         model=ModelProfile.model_validate(diag["model"]) if diag.get("model") else None,
                         hardware=Hardware.model_validate(diag["hardware"]) if diag.get("hardware") else None,
                         server_args=diag.get("server_args") or {}, files=diag.get("files") or [])
        if kind == "doctor":
            for n, level in enumerate(doc["sweep"].get("levels") or [], 1):
                ev.bench += [r for r in read_sweep_line(level, str(path), n) or [] if isinstance(r, BenchRun)]
        else:
            ev.bench = [_curve_run(p, str(path)) for p in diag.get("curve") or []]
        signals = [Signal.model_validate(s) for s in diag.get("signals") or []]
        recs = [Recommendation.model_validate(r) for r in diag.get("recommendations") or []]
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise InputError(path, f"a saved kb {kind} --json whose fields do not read back ({str(e)[:160]})") from None
    title = f"{ev.engine or 'engine?'} {ev.engine_version or ''}".strip() + f" · {model_line(ev)} · {hw_line(ev)}"
    return Report(title=title, facts=facts(ev) + [("saved diagnosis", f"{path} (kb {kind} --json)")],
                  series=series(path.name, ev, thresholds), signals=signals, recommendations=recs,
                  combined=diag.get("combined_command"), files=ev.files, warnings=list(diag.get("warnings") or []))


def _curve_run(p: dict, path: str) -> BenchRun:
    """A `kb diagnose --json` curve point as a run: the medians it saved, nothing more."""
    level = float(p["level"])
    return BenchRun(tool="kb-diagnose-json", concurrency=int(level) if level.is_integer() else None,
                    request_rate=None if level.is_integer() else level, total_throughput=p.get("throughput"),
                    output_throughput=p.get("output_throughput"),
                    ttft_ms={"median": p["ttft_median_ms"]} if p.get("ttft_median_ms") is not None else {})


def write(rep: Report, out: Path) -> int:
    """Render and write the HTML (atomically); returns its size in bytes."""
    html = report_html.render(rep)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, html)
    except OSError as e:
        raise InputError(out, f"cannot write the report ({e.strerror or e})") from None
    return len(html.encode())
