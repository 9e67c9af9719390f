"""The `kb` command line. Each command parses its options, calls one library
function, and turns kb's errors into one clear line and exit code 1 (usage errors
exit 2, from typer). Heavy modules are imported inside the commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from kb.errors import KbError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="kb: a tuning knowledge base for LLM inference servers (sglang, vLLM).")

_state: dict = {"home": None}


@app.callback()
def _main(kb_dir: Optional[Path] = typer.Option(None, "--kb-dir", envvar="KB_HOME",
                                                 help="Knowledge-base directory (default: $XDG_DATA_HOME/kb).")):
    _state["home"] = kb_dir


def _store():
    from kb.store import Store

    return Store(_state["home"])


def _loader():
    from ingest.detect import load_findings

    return load_findings


def _echo_json(obj) -> None:
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False))


_PATHS = typer.Argument(..., help="Benchmark outputs, server logs, config.json, nvidia-smi output, or directories.")
_CONFIG = typer.Option(None, "--config", help="config.json, a model directory, or a Hugging Face repo id in the local cache.")
_GPU = typer.Option(None, "--gpu", help='GPUs, e.g. "8x RTX PRO 6000" (overrides nvidia-smi files).')
_ENGINE = typer.Option(None, "--engine", help="sglang or vllm, when the files do not say.")
_LAUNCH = typer.Option(None, "--launch", help="The launch command in use, quoted.")
_THRESHOLDS = typer.Option(None, "--thresholds", help="TOML file overriding signal thresholds.")


@app.command()
def ingest(paths: List[Path] = typer.Argument(..., help="Findings markdown, run outputs (benchmarks, logs, config.json, nvidia-smi), or directories."),
           report: bool = typer.Option(False, "--report", help="Show, per record, which fields were found and which are missing."),
           as_json: bool = typer.Option(False, "--json")):
    """Index findings (re-ingesting unchanged files does no work) and say what each run file is."""
    from ingest.detect import split_paths
    from ingest.run import read_run

    findings, evidence, skipped = split_paths(list(paths))
    rep = _store().sync(_loader(), findings)
    asked = {str(p.resolve()) for p in findings}
    rows = [fr for fr in rep.files if fr.status != "unchanged" or _resolved(fr.path) in asked]
    ev = read_run(evidence) if evidence else None
    run_files = (ev.files if ev else []) + [{"path": str(p), "skipped": why} for p, why in skipped]
    if as_json:
        _echo_json({"findings": [{"path": fr.path, "status": fr.status, "records": [_report_row(r) for r in fr.records]}
                                 for fr in rows], "evidence": run_files})
        return
    for fr in rows:
        typer.echo(f"{fr.path}: findings, {fr.status}" + (f", {len(fr.records)} records" if fr.records else ""))
        if report:
            for r in fr.records:
                row = _report_row(r)
                typer.echo(f"  {r.id} [{r.kind}] found: {', '.join(row['found']) or '-'}; missing: {', '.join(row['missing']) or '-'}")
    from kb.render import file_line

    for f in run_files:
        typer.echo(file_line(f))
    if ev and ev.bench:
        typer.echo("(run evidence is read, not stored: use `kb diagnose` on these files)")


def _resolved(p: str) -> str:
    return str(Path(p).resolve())


def _report_row(r) -> dict:
    missing = r.missing_fields()
    fields = ["symptoms", "root_cause", "fix", "fix_classes", "commands", "gains", "sources", "context"]
    return {"id": r.id, "kind": r.kind, "title": r.title, "found": [f for f in fields if f not in missing],
            "missing": missing}


@app.command()
def reindex():
    """Rebuild the index from every source file."""
    rep = _store().reindex(_loader())
    n = sum(len(f.records) for f in rep.files)
    typer.echo(f"reindexed {len([f for f in rep.files if f.status != 'removed'])} files, {n} records")


@app.command()
def ask(question: str = typer.Argument(..., help="A question, as you would ask a colleague."),
        limit: int = typer.Option(5, "--limit", "-n", min=1, max=50),
        run: Optional[List[Path]] = typer.Option(None, "--run", help="This run's files or directory: answer from its signals too."),
        gpu: Optional[str] = _GPU, config: Optional[str] = _CONFIG, engine: Optional[str] = _ENGINE,
        as_json: bool = typer.Option(False, "--json")):
    """Answer from past findings: symptom, cause, fix, commands, measured gain, source."""
    from kb import render
    from kb.search import ask as do_ask

    store = _store()
    store.sync(_loader())
    diag, boost = None, None
    if run:
        from ingest.run import read_run
        from kb import index as kbindex
        from kb.diagnose import diagnose as run_diagnose

        _check_engine(engine)
        diag = run_diagnose(read_run(list(run), config=config, gpu=gpu, engine=engine),
                            kbindex.all_records(store.index_dir))
        top = max((r.score for r in diag.recommendations), default=0) or 1
        boost = {}
        for r in diag.recommendations:
            boost[r.fix_class] = max(boost.get(r.fix_class, 0), r.score / top)
    answers = do_ask(store.index_dir, question, limit, boost)
    if as_json:
        out = {"question": question}
        if diag:
            out["run"] = {"signals": [s.model_dump(mode="json") for s in diag.signals],
                          "recommendations": [r.model_dump(mode="json") for r in diag.recommendations[:3]]}
        out["answers"] = [{"rank": i, "score": round(a.score, 3), **render.finding_json(a.finding)}
                          for i, a in enumerate(answers, 1)]
        _echo_json(out)
        return
    if diag:
        typer.echo("This run")
        for s in diag.signals:
            typer.echo("\n".join(render.signal_lines(s, "  ", evidence=0)))
        for r in diag.recommendations[:3]:
            typer.echo(f"  → {r.title}  [{r.rule}]" + (f"\n    $ {r.commands[0]}" if r.commands else ""))
        typer.echo("\nPast findings")
    if not answers:
        typer.echo("no finding matches that question")
        return
    typer.echo("\n\n".join(render.finding_summary(a.finding, i) for i, a in enumerate(answers, 1)))


@app.command()
def show(finding_id: str = typer.Argument(..., metavar="ID"), as_json: bool = typer.Option(False, "--json")):
    """Print one finding whole."""
    from kb import index as kbindex
    from kb import render
    from kb.errors import NotFoundError

    store = _store()
    store.sync(_loader())
    f = kbindex.get(store.index_dir, finding_id)
    if f is None:
        raise NotFoundError(f"no finding with id {finding_id!r} (try `kb ask`)")
    typer.echo(json.dumps(render.finding_json(f), indent=2) if as_json else render.finding_full(f))


def _run_options(paths, config, gpu, engine, launch, thresholds):
    from ingest.run import read_run
    from kb.signals import load_thresholds

    ev = read_run(list(paths), config=config, gpu=gpu, engine=engine, launch=launch)
    return ev, load_thresholds(thresholds)


@app.command()
def signals(paths: List[Path] = _PATHS, config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU,
            engine: Optional[str] = _ENGINE, launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS,
            as_json: bool = typer.Option(False, "--json")):
    """The symptoms this run shows, with their evidence."""
    from kb.signals import detect

    _check_engine(engine)
    ev, th = _run_options(paths, config, gpu, engine, launch, thresholds)
    found = detect(ev, th)
    if as_json:
        _echo_json({"files": ev.files, "signals": [s.model_dump(mode="json") for s in found], "warnings": ev.warnings})
        return
    from kb.render import file_line, signal_lines

    for f in ev.files:
        typer.echo(file_line(f))
    for s in found:
        typer.echo("\n".join(signal_lines(s)))
    if not found:
        typer.echo("no signals: nothing in this evidence looks wrong")


def _check_engine(engine):
    if engine and engine not in ("sglang", "vllm"):
        raise typer.BadParameter("expected sglang or vllm", param_hint="--engine")


@app.command()
def diagnose(paths: List[Path] = _PATHS, config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU,
             engine: Optional[str] = _ENGINE, launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS,
             as_json: bool = typer.Option(False, "--json")):
    """Signals, then ranked recommendations with exact commands and the findings behind them."""
    from kb import index as kbindex
    from kb.diagnose import diagnose as run_diagnose, report

    _check_engine(engine)
    ev, th = _run_options(paths, config, gpu, engine, launch, thresholds)
    store = _store()
    store.sync(_loader())
    d = run_diagnose(ev, kbindex.all_records(store.index_dir), th)
    typer.echo(json.dumps(d.to_json(), indent=2, default=str) if as_json else report(d))


@app.command()
def launch(model: str = typer.Option(..., "--model", help="config.json, a model directory, or a repo id in the local Hugging Face cache."),
           gpus: str = typer.Option(..., "--gpus", help='e.g. "8x RTX PRO 6000", "4x H100".'),
           engine: str = typer.Option(..., "--engine", help="sglang or vllm."),
           context: Optional[int] = typer.Option(None, "--context", min=256, help="Context length to serve (default: the model's, at most 32768)."),
           goal: str = typer.Option("throughput", "--goal", help="throughput or latency."),
           version: Optional[str] = typer.Option(None, "--version", help="Engine version (default: newest catalog)."),
           model_path: Optional[str] = typer.Option(None, "--model-path", help="What the command should load, when --model is a local config file."),
           as_json: bool = typer.Option(False, "--json")):
    """A recommended launch command for a model on given GPUs, every flag explained."""
    from pathlib import Path as _P

    from ingest.hf_config import load_profile
    from ingest.nvidia_smi import hardware_from_string
    from kb.flags import catalog
    from kb.launch import plan

    _check_engine(engine)
    if goal not in ("throughput", "latency"):
        raise typer.BadParameter("expected throughput or latency", param_hint="--goal")
    profile = load_profile(model)
    hw, warnings = hardware_from_string(gpus)
    spec = _P(model)
    path = model_path or (str(spec.parent) if spec.is_file() else model)
    if model_path:
        profile = profile.model_copy(update={"name": model_path})
    p = plan(profile, hw, engine, catalog(engine, version), path, context, goal)
    p.notes = warnings + p.notes
    if as_json:
        typer.echo(p.model_dump_json(indent=2))
        return
    m = p.memory
    typer.echo(f"# {engine} {p.version}: {profile.name or model} on {hw.count}x {hw.gpu} ({hw.arch}, {hw.interconnect})")
    if p.catalog_note:
        typer.echo(f"# note: {p.catalog_note}")
    typer.echo(p.command)
    typer.echo("")
    typer.echo("Memory (per GPU)")
    typer.echo(f"  weights   {m.weights_total_gib:,.1f} GiB total ({m.weight_format}) over TP{m.tp} × PP{m.pp} = {m.weights_per_gpu_gib:,.2f} GiB"
               + (" (attention replicated per DP-attention rank)" if m.dp_attention else ""))
    typer.echo(f"  usable    {m.gpu_memory_gib:g} GiB × {m.fraction} − reserve = {m.usable_per_gpu_gib:,.2f} GiB")
    typer.echo(f"  KV cache  {m.kv_per_gpu_gib:,.2f} GiB / {m.kv_bytes_per_token_per_gpu:,} B per token ({m.kv_dtype}) = "
               f"{m.kv_tokens:,} tokens" + (" (× DP attention ranks)" if m.dp_attention else ""))
    typer.echo(f"  requests  {m.full_context_requests:,} at the full {m.context:,}-token context; running cap {m.max_running}")
    typer.echo("")
    typer.echo("Flags")
    for f in p.flags:
        val = "" if f.value is True else f" {f.value}"
        typer.echo(f"  {f.flag}{val}\n      {f.why}  [{f.source}]")
    for n in p.notes:
        typer.echo(f"note: {n}")


def main() -> None:
    try:
        app()
    except KbError as e:
        typer.echo(f"kb: error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("kb: interrupted", err=True)
        sys.exit(130)
