"""One self-contained HTML page for a kb.report.Report: inline CSS and SVG, no request
to anywhere (no CDN, font, image or script URL), readable without JavaScript (the one
inline script only adds copy buttons)."""

from __future__ import annotations

import html
import time

from kb import plots
from kb.compare import summary
from kb.version import __version__ as KB_VERSION

LOAD_LABELS = {"concurrency": "concurrency (requests in flight)", "rate": "request rate (req/s)",
               "all": "requests sent at once"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2125;background:#f6f7f9}
main{max-width:1120px;margin:0 auto;padding:18px 24px 48px}
h1{font-size:20px;margin:6px 0 2px}
h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #dde1e6;padding-bottom:4px}
.sub{color:#5c6670;font-size:12px}
section.card{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:10px 14px;margin:10px 0}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eef0f2;vertical-align:top}
th{color:#5c6670;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.facts th{width:150px}
svg.plot{max-width:100%;height:auto;display:block;margin:4px auto}
.sev{display:inline-block;border-radius:3px;padding:0 6px;font-size:11px;font-weight:700;color:#fff;
text-transform:uppercase}
.sev-critical{background:#7a0010}.sev-severe{background:#c62828}
.sev-moderate{background:#e08a00}.sev-low{background:#6b8e23}.sev-none{background:#888}
ul.ev{margin:4px 0 0 18px;padding:0;font-size:12.5px}ul.ev code{color:#5c6670}
pre.cmd{background:#0f1720;color:#e6edf3;padding:8px 10px;border-radius:4px;overflow-x:auto;white-space:pre-wrap;
word-break:break-all;margin:4px 0;user-select:all}
.cmdbox{position:relative}.cmdbox button{position:absolute;right:6px;top:6px;font-size:11px}
.better{color:#1b7f3b;font-weight:600}.worse{color:#c62828;font-weight:700}.noise{color:#5c6670}
.warn{color:#8a5300}
details summary{cursor:pointer;color:#33506e}
"""

SCRIPT = """document.querySelectorAll('.cmdbox').forEach(function(b){var k=document.createElement('button');
k.textContent='copy';k.onclick=function(){navigator.clipboard&&navigator.clipboard.writeText(b.querySelector('pre').textContent);
k.textContent='copied';};b.prepend(k);});"""


def e(text) -> str:
    return html.escape(str(text), quote=True)


def _n(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}"


def _lv(v: float) -> str:
    """A load level: 8, 0.5, 1,024."""
    return f"{v:,g}" if v < 1e6 else f"{v:,.0f}"


def _link(src: str) -> str:
    """A finding's source: a link when it is a web address (followed only on a click)."""
    if src.startswith(("https://", "http://")):
        return f'<a href="{e(src)}" rel="noreferrer">{e(src)}</a>'
    return f"<code>{e(src)}</code>"


def load_label(ss: list) -> str:
    """The load axis's title: the one kind of load the series share, else both."""
    kinds = {s.kind for s in ss}
    return LOAD_LABELS[kinds.pop()] if len(kinds) == 1 else "load (concurrency or req/s)"


def render(rep) -> str:
    parts = [f"<h1>{e('kb compare' if rep.comparison else 'kb report')}</h1>",
             f'<div class="sub">{e(rep.title)}<br>written by kb {e(KB_VERSION)} on '
             f"{e(time.strftime('%Y-%m-%d %H:%M %Z'))}; every figure below is measured in the files listed at the "
             "end</div>"]
    if rep.comparison:
        parts.append(_comparison(rep))
    if rep.facts:
        rows = "".join(f"<tr><th>{e(k)}</th><td>{_fact(k, v)}</td></tr>" for k, v in rep.facts)
        parts.append('<h2>Model, hardware and launch</h2><section class="card"><table '
                     f'class="facts">{rows}</table></section>')
    pts = [s for s in rep.series if s.points]
    if pts:
        label = load_label(pts)
        parts.append('<h2 id="throughput">Throughput against load</h2><section class="card">'
                     + plots.throughput(pts, label) + _knee_text(pts) + _points_table(pts) + "</section>")
        parts.append('<h2 id="latency">Latency percentiles against load</h2><section class="card">'
                     + plots.latency(pts, label) + "</section>")
        if any(p.per_user is not None for s in pts for p in s.points):
            parts.append('<h2 id="pareto">Throughput per GPU against speed per user</h2><section class="card">'
                         + plots.pareto(pts) + _pareto_text(pts) + "</section>")
    else:
        parts.append('<h2>Curves</h2><section class="card">no benchmark results in these files</section>')
    if rep.state:
        parts.append('<h2 id="state">Server state during the sweep</h2><section class="card">'
                     + plots.server_state(rep.state)
                     + f'<div class="sub">from {e(rep.state[0].get("source", ""))}</div></section>')
    if not rep.comparison:
        parts.append(_signals(rep.signals))
        parts.append(_recommendations(rep.recommendations, rep.combined))
    if rep.warnings:
        parts.append("<h2>Warnings</h2><section class=\"card\"><ul>"
                     + "".join(f'<li class="warn">{e(w)}</li>' for w in rep.warnings) + "</ul></section>")
    parts.append(_files(rep.files))
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(('kb compare · ' if rep.comparison else 'kb report · ') + rep.title)}</title>"
            f"<style>{CSS}</style></head>\n<body><main>\n{body}\n</main><script>{SCRIPT}</script></body></html>\n")


def _fact(k: str, v: str) -> str:
    if k.endswith("launch command"):
        return f'<div class="cmdbox"><pre class="cmd">{e(v)}</pre></div>'
    return e(v)


def _knee_text(series) -> str:
    out = []
    for s in series:
        k = s.knee
        if k:
            out.append(f"<li><b>{e(s.name)}</b>: throughput stops scaling after {_lv(k['knee'])} "
                       f"({_n(k['knee_throughput'])} tok/s); {_lv(k['knee'])} → {_lv(k['next_level'])} adds "
                       f"{k['gain_after_knee']:+.1%}; shaded: the plateau up to {_lv(k['max_level'])}. Scaling "
                       f"efficiency {k['efficiency']:.0%} over the sweep.</li>")
        elif len(s.points) >= 2:
            out.append(f"<li><b>{e(s.name)}</b>: no knee: every step up in load adds 10% or more per doubling</li>")
    note = ('<div class="sub">The knee is the first level after which doubling the load adds less than 10% '
            "throughput (kb signal throughput-plateau, threshold knee_gain). Solid: total tok/s; dashed: "
            "output tok/s.</div>")
    return (f"<ul>{''.join(out)}</ul>" if out else "") + note


def _points_table(series) -> str:
    head = ("<tr><th>series</th><th>load</th><th>runs</th><th>total tok/s</th><th>output tok/s</th>"
            "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>ITL p50</th><th>ITL p99</th></tr>")
    keys = ["total_tok_s", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
            "itl_p50_ms", "itl_p99_ms"]
    rows = "".join(f"<tr><td>{e(s.name)}</td><td class=n>{_lv(p.level)}</td><td class=n>{p.runs}</td>"
                   + "".join(f"<td class=n>{_n(p.values.get(k))}</td>" for k in keys) + "</tr>"
                   for s in series for p in s.points)
    return (f"<details><summary>the numbers (medians of the runs at each level; latencies in ms)</summary>"
            f"<table>{head}{rows}</table></details>")


def _pareto_text(series) -> str:
    notes = {s.gpus_note for s in series if s.gpus_note}
    extra = f" GPU count unknown for some runs: per {', '.join(sorted(notes))} there." if notes else ""
    return ('<div class="sub">Per user: output throughput / concurrency; per GPU: output throughput / GPUs '
            "(nvidia-smi or --gpu, else TP × PP × DP), as vLLM's <code>bench sweep plot_pareto</code> computes them. "
            f"Labels are the concurrency. Up and to the right is better.{e(extra)}</div>")


def _signals(signals) -> str:
    if not signals:
        return '<h2 id="signals">Signals</h2><section class="card">none: nothing in this evidence looks wrong</section>'
    items = []
    for s in signals:
        ev = "".join(f"<li>{e(x.text)}" + (f" <code>{e(x.where)}</code>" if x.where else "") + "</li>"
                     for x in s.evidence)
        items.append(f'<section class="card signal" data-signal="{e(s.id)}"><span class="sev sev-{e(s.severity)}">'
                     f"{e(s.severity)}</span> <b>{e(s.title)}</b> <code>{e(s.id)}</code><div>{e(s.summary)}</div>"
                     f'<ul class="ev">{ev}</ul></section>')
    return '<h2 id="signals">Signals</h2>' + "".join(items)


def _recommendations(recs, combined) -> str:
    if not recs:
        return '<h2 id="recommendations">Recommendations</h2><section class="card">none</section>'
    items = []
    for r in recs:
        flags = "".join(f"<tr><td><code>{e(f.flag)}</code></td><td>{e(_val(f.current, True))}</td>"
                        f"<td>{e(_val(f.new, False))}</td><td>{e(f.why)}</td></tr>" for f in r.flags)
        cmds = "".join(f'<div class="cmdbox"><pre class="cmd">{e(c)}</pre></div>' for c in r.commands)
        found = "".join(f"<li><b>{e(c.id)}</b> (similarity {c.similarity:.2f}): {e(c.gain or 'no measured gain')}"
                        f"{' — ' + e(c.context) if c.context else ''} — {_link(c.source)}</li>" for c in r.findings)
        notes = "".join(f"<li>{e(n)}</li>" for n in r.notes)
        items.append(
            f'<section class="card rec" data-rule="{e(r.rule)}"><b>{r.rank}. {e(r.title)}</b> '
            f'<span class="sev sev-{e(r.severity)}">{e(r.severity)}</span> '
            f'<span class="sub">{e(r.rule)} · confidence {r.confidence:.2f}</span>'
            f"<div>{e(r.rationale)}</div>"
            + (f"<table><tr><th>flag</th><th>now</th><th>change to</th><th>why</th></tr>{flags}</table>" if flags
               else "")
            + cmds
            + f"<div><b>expected gain:</b> {e(r.expected_gain or 'unmeasured for this context')}</div>"
            + (f'<div>findings behind it:</div><ul class="ev">{found}</ul>' if found else "")
            + (f'<ul class="ev">{notes}</ul>' if notes else "") + "</section>")
    tail = (f'<h3>All changes together</h3><div class="cmdbox"><pre class="cmd">{e(combined)}</pre></div>'
            if combined else "")
    return '<h2 id="recommendations">Recommendations</h2>' + "".join(items) + tail


def _val(v, current: bool) -> str:
    if v is None:
        return "(unset)" if current else "(remove)"
    if v is True:
        return "(on)"
    return str(v)


def _comparison(rep) -> str:
    c = rep.comparison
    out = [f'<h2 id="comparison">Against the baseline: {e(c.baseline.name)}</h2>',
           f'<div class="sub">Verdicts: better / worse when the change is outside the noise band, else within '
           f"noise. Noise band: the larger spread ((max−min)/median) of the repeated runs on either side at that "
           f"level; ±{c.default_noise:.0%} (default) where a side has a single run (marked *).</div>"]
    for s in c.others:
        changed = rep.changes.get(s.name) or []
        rows = []
        for row in s.rows:
            for i, cell in enumerate(row.cells):
                band, src = cell.noise
                d = cell.delta
                cls = {"better": "better", "worse": "worse"}.get(cell.verdict, "noise")
                rows.append(f"<tr><td>{e(row.level) if i == 0 else ''}</td><td>{e(cell.metric.label)} "
                            f"({e(cell.metric.unit)})</td><td class=n>{_n(cell.base_median)}</td>"
                            f"<td class=n>{_n(cell.median)}</td><td class=n>{'-' if d is None else f'{d:+.1%}'}</td>"
                            f"<td class=n>±{band:.1%}{'' if src == 'repeats' else '*'}</td>"
                            f"<td class=n>{len(cell.base)}/{len(cell.value)}</td><td class=n>{cell.spreads()}</td>"
                            f"<td class=\"{cls}\">{e(cell.verdict)}</td></tr>")
        table = ("<table class=\"cmp\"><tr><th>level</th><th>metric</th><th>baseline</th><th>this "
                 "run</th><th>delta</th>"
                 f"<th>noise</th><th>runs</th><th>spread</th><th>verdict</th></tr>{''.join(rows)}</table>")
        skipped = "".join(f'<li class="warn">not compared: {e(n)}</li>' for n in s.not_compared)
        out.append(f'<section class="card side"><b>{e(s.name)}</b><div>{e(summary(s))}</div>'
                   + (f"<div>changed: {e(', '.join(changed))}</div>" if changed else "")
                   + table + (f"<ul>{skipped}</ul>" if skipped else "") + "</section>")
    return "".join(out)


def _files(files) -> str:
    if not files:
        return ""
    rows = "".join(f"<tr><td><code>{e(f['path'])}</code></td><td>"
                   + (e(f"{f['kind']} → {f['yielded']}") if "kind" in f else f"skipped ({e(f['skipped'])})")
                   + "</td></tr>" for f in files)
    return f'<h2 id="files">Files</h2><section class="card"><table>{rows}</table></section>'
