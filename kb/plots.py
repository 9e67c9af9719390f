"""The report's figures: matplotlib drawn straight to SVG text, inlined in the HTML.

matplotlib's SVG backend needs no browser, JavaScript or network, and writes text
as <text> (svg.fonttype "none"), so a figure is a few KB and its labels can be read
back from the DOM. Each series' markers carry an id (`gid`) so tests and readers
can count the points. It is an optional extra: `pip install 'kb[report]'`.
"""

from __future__ import annotations

import io
import math
import re

from kb.errors import KbError

INSTALL = "pip install 'kb[report]'"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


def require():
    """matplotlib's Figure class, or a one-line error saying what to install."""
    try:
        import matplotlib

        matplotlib.use("svg", force=True)  # no display, no GUI toolkit
        from matplotlib.figure import Figure
    except ImportError:
        raise KbError(f"HTML reports draw their plots with matplotlib, which is not installed: {INSTALL}") from None
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "kb", "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False})
    return Figure


def to_svg(fig, name: str) -> str:
    """The figure as an <svg> element: no XML prolog, no metadata, every id prefixed
    with `name` so several figures can share one HTML page."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', svg)
    svg = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)
    return svg.replace("<svg ", f'<svg class="plot" data-plot="{name}" ', 1)


def _fmt(v: float) -> str:
    return f"{v:g}" if v < 1e5 else f"{v:,.0f}"


def _label(series, s, what: str) -> str:
    """A legend entry: the series' name only when several series share the plot."""
    return what if len(series) == 1 else f"{s.name}: {what}"


def _legend(fig, ax, series, loc: str) -> None:
    """One series: a small legend inside the axes. Several: below the figure, where it
    hides no curve (bbox_inches="tight" keeps it in the picture)."""
    if len(series) == 1:
        ax.legend(fontsize=7, loc=loc, frameon=False)
        return
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=7, frameon=False)


def _load_axis(ax, series, label: str) -> None:
    levels = sorted({p.level for s in series for p in s.points if p.level > 0})
    if len(levels) >= 3 and levels[-1] / levels[0] >= 8:
        ax.set_xscale("log", base=2)  # concurrency sweeps double; equal steps read best
        ax.set_xticks(levels)
        ax.set_xticklabels([_fmt(v) for v in levels])
        ax.minorticks_off()
    ax.set_xlabel(label)
    ax.grid(True, linestyle=":", linewidth=0.6, alpha=0.7)


def _values(s, key: str) -> tuple[list[float], list[float]]:
    pts = [p for p in s.points if p.values.get(key) is not None and p.level > 0]
    return [p.level for p in pts], [p.values[key] for p in pts]


def throughput(series, load_label: str) -> str:
    """Total (solid) and output (dashed) tok/s against load; each series' knee marked and
    its plateau (knee to the highest level) shaded, from kb.signals.throughput_plateau."""
    fig = require()(figsize=(7.2, 3.8))
    ax = fig.add_subplot()
    for i, s in enumerate(series):
        c = COLORS[i % len(COLORS)]
        x, y = _values(s, "total_tok_s")
        ax.plot(x, y, marker="o", color=c, label=_label(series, s, "total tok/s"), gid=f"total-{i}")
        x, y = _values(s, "output_tok_s")
        if y:
            ax.plot(x, y, marker="s", markersize=4, linestyle="--", color=c, label=_label(series, s, "output tok/s"),
                    gid=f"output-{i}")
        if s.knee:
            k = s.knee
            ax.axvspan(k["knee"], k["max_level"], color=c, alpha=0.08, gid=f"plateau-{i}")
            ax.plot([k["knee"]], [k["knee_throughput"]], marker="*", markersize=14, color=c, linestyle="none",
                    gid=f"knee-{i}")
            ax.annotate(f"knee: {_fmt(k['knee'])} ({k['gain_after_knee']:+.0%} after)",
                        (k["knee"], k["knee_throughput"]), xytext=(-10, 14), textcoords="offset points",
                        ha="right", fontsize=8, color=c, gid=f"knee-label-{i}",
                        arrowprops={"arrowstyle": "-", "color": c, "lw": 0.6})
    _load_axis(ax, series, load_label)
    ax.set_ylabel("tok/s")
    ax.set_ylim(bottom=0)
    _legend(fig, ax, series, loc="lower right")
    return to_svg(fig, "throughput")


LATENCIES = [("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl")]


def latency(series, load_label: str) -> str:
    """TTFT, TPOT and ITL p50 (solid) and p99 (dashed) against load; a log y axis when
    the values span more than 20x (TTFT under queueing does)."""
    fig = require()(figsize=(10.5, 3.3))
    axes = fig.subplots(1, 3)
    for ax, (title, key) in zip(axes, LATENCIES, strict=True):
        ys = []
        for i, s in enumerate(series):
            c = COLORS[i % len(COLORS)]
            for pct, style, marker in (("p50", "-", "o"), ("p99", "--", "^")):
                x, y = _values(s, f"{key}_{pct}_ms")
                if y:
                    ax.plot(x, y, linestyle=style, marker=marker, markersize=4, color=c,
                            label=_label(series, s, pct), gid=f"{key}-{pct}-{i}")
                    ys += y
        positive = [v for v in ys if v > 0]
        if positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
        elif ys:
            ax.set_ylim(bottom=0)
        if not ys:
            ax.text(0.5, 0.5, "not in these runs", transform=ax.transAxes, ha="center", color="#888")
        ax.set_title(f"{title} (ms)", fontsize=9)
        _load_axis(ax, series, load_label)
    fig.tight_layout()
    _legend(fig, axes[0], series, loc="best")
    return to_svg(fig, "latency")


def pareto(series) -> str:
    """Output tok/s per GPU against output tok/s per user, one line per series, points
    labelled by concurrency; the grey line is the frontier over every point (as vLLM's
    `bench sweep plot_pareto` draws it: vllm/benchmarks/sweep/plot_pareto.py)."""
    fig = require()(figsize=(7.2, 4.0))
    ax = fig.add_subplot()
    every = []
    for i, s in enumerate(series):
        c = COLORS[i % len(COLORS)]
        pts = [p for p in s.points if p.per_user is not None and p.per_gpu is not None]
        if not pts:
            continue
        ax.plot([p.per_user for p in pts], [p.per_gpu for p in pts], marker="o", color=c,
                label=s.name, gid=f"series-{i}")
        for p in pts:
            ax.annotate(_fmt(p.level), (p.per_user, p.per_gpu), xytext=(4, 4), textcoords="offset points",
                        fontsize=7, color=c)
        every += [(p.per_user, p.per_gpu) for p in pts]
    front = frontier(every)
    if len(series) > 1 and len(front) > 1:
        ax.plot([x for x, _ in front], [y for _, y in front], color="#999", linewidth=3, alpha=0.4,
                zorder=0, label="Pareto frontier", gid="frontier")
    gpus = {s.gpus_note for s in series}
    ax.set_xlabel("output tok/s per user (output throughput / concurrency)")
    ax.set_ylabel("output tok/s per GPU" if gpus == {""} else "output tok/s per " + "; ".join(sorted(gpus)))
    ax.grid(True, linestyle=":", linewidth=0.6, alpha=0.7)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if len(series) > 1:
        _legend(fig, ax, series, loc="best")
    return to_svg(fig, "pareto")


def frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both axes, by per-user speed."""
    out, best = [], -math.inf
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return sorted(out)


def server_state(panels: list[dict]) -> str:
    """Running and waiting requests, KV-cache usage and preemptions over the sweep.
    `panels` come from kb.report.server_state: x values, series by name, level marks."""
    p = panels[0]
    rows = 2 + bool(p.get("preemptions"))
    fig = require()(figsize=(10.5, 1.9 * rows + 0.4))
    axes = fig.subplots(rows, 1, sharex=True)
    ax = axes[0]
    ax.step(p["x"], p["running"], where="post", color=COLORS[0], label="running", gid="running")
    if any(v is not None for v in p["waiting"]):
        ax.step(p["x"], [v or 0 for v in p["waiting"]], where="post", color=COLORS[1], label="waiting",
                gid="waiting")
    ax.set_ylabel("requests")
    ax.legend(fontsize=7, frameon=False, loc="center left")
    ax = axes[1]
    kv = [v * 100 if v is not None else math.nan for v in p["kv"]]
    ax.plot(p["x"], kv, color=COLORS[2], gid="kv")
    ax.set_ylabel("KV cache used %")
    ax.set_ylim(0, max(5.0, min(100.0, max((v for v in kv if v == v), default=0) * 1.2)))
    if rows == 3:
        ax = axes[2]
        xs = [x for x, _ in p["preemptions"]]
        ax.bar(xs, [n for _, n in p["preemptions"]], width=max(p["x"][-1] / 80, 0.5), color=COLORS[4],
               gid="preemptions")
        ax.set_ylabel("preemptions")
    for ax in axes:
        ax.grid(True, linestyle=":", linewidth=0.6, alpha=0.7)
        for x0, _label in p.get("marks", []):
            ax.axvline(x0, color="#bbb", linewidth=0.6)
    for x0, label in p.get("marks", []):
        axes[0].annotate(label, (x0, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                         textcoords="offset points", fontsize=7, color="#666", va="top")
    axes[-1].set_xlabel(p["xlabel"])
    fig.tight_layout()
    return to_svg(fig, "state")
