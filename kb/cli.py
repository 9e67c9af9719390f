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
    from kb.askcli import loader

    return loader()


def _echo_json(obj) -> None:
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False))


_PATHS = typer.Argument(None, show_default=False,
                        help="Benchmark outputs, server logs, config.json, nvidia-smi output, prose (read as text "
                             "evidence), directories, or - for stdin.")
_CONFIG = typer.Option(None, "--config",
                       help="config.json, a model directory, or a Hugging Face repo id in the local cache.")
_GPU = typer.Option(None, "--gpu", help='GPUs, e.g. "8x RTX PRO 6000" (overrides nvidia-smi files).')
_ENGINE = typer.Option(None, "--engine", help="sglang or vllm, when the files do not say.")
_LAUNCH = typer.Option(None, "--launch", help="The launch command in use, quoted.")
_THRESHOLDS = typer.Option(None, "--thresholds",
                           help="TOML file overriding signal and rule thresholds (docs/RULES.md).")
_REPORT = typer.Option(None, "--report",
                       help="Also write an HTML report (plots inline; needs pip install 'kb[report]').")


@app.command()
def ingest(paths: List[Path] = typer.Argument(...,
                                              help="Findings markdown, run outputs (benchmarks, logs, config.json, "
                                                   "nvidia-smi), or directories."),
           report: bool = typer.Option(False, "--report",
                                       help="Show, per record, which fields were found and which are missing."),
           as_json: bool = typer.Option(False, "--json")):
    """Index findings (re-ingesting unchanged files does no work) and say what each run file is."""
    from ingest.detect import split_paths
    from ingest.run import read_run, require_named
    from kb.store import not_findings

    findings, evidence, skipped = split_paths(list(paths), exclude=not_findings)
    ev = read_run(evidence) if evidence else None
    run_files = (ev.files if ev else []) + [{"path": str(p), "skipped": why} for p, why in skipped]
    require_named(paths, run_files)  # before anything is stored
    rep = _store().sync(_loader(), findings)
    asked = {str(p.resolve()) for p in findings}
    rows = [fr for fr in rep.files if fr.status != "unchanged" or _resolved(fr.path) in asked]
    if as_json:
        _echo_json({"findings": [{"path": fr.path, "status": fr.status, "records": [_report_row(r) for r in fr.records]}
                                 for fr in rows], "evidence": run_files, "warnings": ev.warnings if ev else []})
        return
    for fr in rows:
        typer.echo(f"{fr.path}: findings, {fr.status}" + (f", {len(fr.records)} records" if fr.records else ""))
        if report:
            for r in fr.records:
                row = _report_row(r)
                absent = f"; not given: {', '.join(row['absent'])}" if row["absent"] else ""
                typer.echo(f"  {r.id} [{r.kind}] found: {', '.join(row['found']) or '-'}; "
                           f"missing: {', '.join(row['missing']) or '-'}{absent}")
    from kb.render import file_line, format_lines

    for f in run_files:
        typer.echo(file_line(f))
        for line in format_lines(f) if report else []:
            typer.echo(line)
        if report and f.get("columns"):  # a table read by the generic results reader: how
            typer.echo(f"  columns: {f['columns']}")
    for w in ev.warnings if ev else []:
        typer.echo(f"warning: {w}")
    if ev and ev.bench:
        typer.echo("(run evidence is read, not stored: use `kb diagnose` on these files)")


def _resolved(p: str) -> str:
    return str(Path(p).resolve())


def _report_row(r) -> dict:
    # a canonical finding lacks only what FORMAT.md requires; optional parts it does not
    # give (a gains table when the source measured nothing) are listed apart
    absent = r.missing_fields()
    missing = r.missing_required() if r.kind == "finding" else absent
    fields = ["symptoms", "root_cause", "fix", "fix_classes", "commands", "gains", "sources", "context"]
    return {"id": r.id, "kind": r.kind, "title": r.title, "found": [f for f in fields if f not in absent],
            "missing": missing, "absent": [f for f in absent if f not in missing]}


@app.command()
def reindex():
    """Rebuild the index from every source file."""
    rep = _store().reindex(_loader())
    n = sum(len(f.records) for f in rep.files)
    typer.echo(f"reindexed {len([f for f in rep.files if f.status != 'removed'])} files, {n} records")


@app.command()
def ask(question: str = typer.Argument(..., help="A question, as you would ask a colleague."),
        limit: int = typer.Option(5, "--limit", "-n", min=1, max=50),
        run: Optional[List[Path]] = typer.Option(None, "--run",
                                                 help="This run's files or directory: answer from its signals too."),
        gpu: Optional[str] = _GPU, config: Optional[str] = _CONFIG, engine: Optional[str] = _ENGINE,
        as_json: bool = typer.Option(False, "--json")):
    """Answer from past findings: symptom, cause, fix, commands, measured gain, source."""
    _ask(question, limit, run, gpu, config, engine, as_json)


def _ask(question: str, limit: int, run, gpu, config, engine, as_json: bool) -> None:
    from kb.search import ask as do_ask

    store = _store()
    diag, boost = None, None
    if run:
        from ingest.run import read_run
        from kb import index as kbindex
        from kb.diagnose import diagnose as run_diagnose

        _check_engine(engine)
        diag = run_diagnose(read_run(list(run), config=config, gpu=gpu, engine=engine),
                            store.read(_loader(), kbindex.all_records))
        top = max((r.score for r in diag.recommendations), default=0) or 1
        boost = {}
        for r in diag.recommendations:
            boost[r.fix_class] = max(boost.get(r.fix_class, 0), r.score / top)
    answers = store.read(_loader(), lambda d: do_ask(d, question, limit, boost))
    from kb.askcli import print_answers

    print_answers(question, answers, as_json, diag, echo=typer.echo)


@app.command()
def show(finding_id: str = typer.Argument(..., metavar="ID"), as_json: bool = typer.Option(False, "--json")):
    """Print one finding whole."""
    from kb import index as kbindex, render
    from kb.errors import NotFoundError

    store = _store()
    f = store.read(_loader(), lambda d: kbindex.get(d, finding_id))
    if f is None:
        raise NotFoundError(f"no finding with id {finding_id!r} (try `kb ask`)")
    typer.echo(json.dumps(render.finding_json(f), indent=2) if as_json else render.finding_full(f))
    if not as_json:
        for line in render.source_files(f):
            typer.echo(line)


@app.command()
def rules(rule_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="A rule id (KB112) or name: explain it."),
          thresholds: Optional[str] = _THRESHOLDS, as_json: bool = typer.Option(False, "--json")):
    """List the rules (id, name, severity, fix class, needed evidence), or explain one."""
    from kb.rules import describe
    from kb.rules.registry import load_thresholds

    if rule_id is None:
        typer.echo(json.dumps([describe.row(r) for r in describe.RULES], indent=2) if as_json
                   else describe.listing_text())
        return
    e = describe.explain(rule_id, load_thresholds(thresholds))
    typer.echo(json.dumps(e, indent=2) if as_json else describe.explain_text(e))


def _run_options(paths, config, gpu, engine, launch, thresholds):
    from ingest.run import read_run
    from kb.rules.registry import load_thresholds

    ev = read_run(list(paths), config=config, gpu=gpu, engine=engine, launch=launch)
    return ev, load_thresholds(thresholds)


# Fleets from Prometheus (kb/fleet): `kb signals|diagnose --prometheus URL` instead of files
_PROM = typer.Option(None, "--prometheus",
                     help="Prometheus URL: read every vLLM/sglang instance it scrapes instead of files.")
_PROM_SELECTOR = typer.Option(None, "--selector", help='Label matchers for the instances, e.g. \'{job="vllm"}\'.')
_PROM_SINCE = typer.Option(None, "--since", help="Range ending now, e.g. 30m, 1h, 2d (default 1h).")
_PROM_START = typer.Option(None, "--start", help="Range start: RFC 3339 (2026-12-01T15:00:00Z) or Unix seconds.")
_PROM_END = typer.Option(None, "--end", help="Range end (with --start).")
_PROM_STEP = typer.Option("15s", "--step",
                          help="Resolution of the range queries (raised to keep 1,000 points per series).")
_PROM_TOKEN = typer.Option(None, "--prometheus-token", envvar="KB_PROMETHEUS_TOKEN", show_default=False,
                           help="Bearer token (or the basic-auth password with --prometheus-user); never printed.")
_PROM_USER = typer.Option(None, "--prometheus-user", help="Basic-auth user name (the password is --prometheus-token).")


def _fleet(paths, prometheus, selector, since, start, end, step, token, user, thresholds, as_json, diagnose) -> bool:
    """`--prometheus`: the fleet report, printed; False when files were given instead."""
    prom_only = [n for n, v in (("--selector", selector), ("--since", since), ("--start", start), ("--end", end),
                                ("--prometheus-user", user)) if v]
    if not prometheus:
        if prom_only:
            raise typer.BadParameter(f"{prom_only[0]} needs --prometheus URL", param_hint=prom_only[0])
        if not paths:
            raise typer.BadParameter("give run files or directories, or --prometheus URL", param_hint="PATHS")
        return False
    if paths:
        raise typer.BadParameter("give either files or --prometheus, not both", param_hint="--prometheus")
    from kb.fleet import Query, from_prometheus
    from kb.fleet.collect import UsageError
    from kb.fleet.report import report
    from kb.rules.registry import load_thresholds

    th = load_thresholds(thresholds)
    findings = None
    if diagnose:
        from kb import index as kbindex

        findings = _store().read(_loader(), kbindex.all_records)
    try:
        fleet = from_prometheus(Query(prometheus, selector, since, start, end, step, token, user), th, findings)
    except UsageError as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(json.dumps(fleet.to_json(), indent=2, default=str) if as_json else report(fleet, diagnose))
    return True


@app.command()
def signals(paths: Optional[List[Path]] = _PATHS, config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU,
            engine: Optional[str] = _ENGINE, launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS,
            prometheus: Optional[str] = _PROM, selector: Optional[str] = _PROM_SELECTOR,
            since: Optional[str] = _PROM_SINCE,
            start: Optional[str] = _PROM_START, end: Optional[str] = _PROM_END, step: str = _PROM_STEP,
            prometheus_token: Optional[str] = _PROM_TOKEN, prometheus_user: Optional[str] = _PROM_USER,
            as_json: bool = typer.Option(False, "--json")):
    """The symptoms this run shows, with their evidence (or every instance's, from Prometheus)."""
    from kb.signals import detect

    if _fleet(paths, prometheus, selector, since, start, end, step, prometheus_token, prometheus_user,
              thresholds, as_json, diagnose=False):
        return
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
def diagnose(paths: Optional[List[Path]] = _PATHS, config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU,
             engine: Optional[str] = _ENGINE, launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS,
             prometheus: Optional[str] = _PROM, selector: Optional[str] = _PROM_SELECTOR,
             since: Optional[str] = _PROM_SINCE, start: Optional[str] = _PROM_START, end: Optional[str] = _PROM_END,
             step: str = _PROM_STEP, prometheus_token: Optional[str] = _PROM_TOKEN,
             prometheus_user: Optional[str] = _PROM_USER,
             why: Optional[str] = typer.Option(None, "--why", metavar="ID",
                                               help="A rule id (KB105) or finding id: which of its conditions held, "
                                                    "failed or were unknown."),
             as_json: bool = typer.Option(False, "--json")):
    """Signals, then ranked recommendations with exact commands and the findings behind them.
    PATHS may be prose (a pasted issue, notes) and `-` for standard input."""
    from kb import index as kbindex
    from kb.diagnose import diagnose as run_diagnose, report, why as explain, why_report

    if _fleet(paths, prometheus, selector, since, start, end, step, prometheus_token, prometheus_user,
              thresholds, as_json, diagnose=True):
        return
    _check_engine(engine)
    ev, th = _run_options(paths, config, gpu, engine, launch, thresholds)
    from kb.search import searcher

    store = _store()
    d = store.read(_loader(), lambda idx: run_diagnose(ev, kbindex.all_records(idx), th, searcher(idx)))
    if why:
        w = explain(d, why)
        typer.echo(json.dumps(w, indent=2, default=str) if as_json else why_report(w))
        return
    typer.echo(json.dumps(d.to_json(), indent=2, default=str) if as_json else report(d))


@app.command()
def launch(model: str = typer.Option(..., "--model",
                                     help="config.json, a model directory, or a repo id in the local Hugging Face "
                                          "cache."),
           gpus: str = typer.Option(..., "--gpus", help='e.g. "8x RTX PRO 6000", "4x H100".'),
           engine: str = typer.Option(..., "--engine", help="sglang or vllm."),
           context: Optional[int] = typer.Option(None, "--context", min=256,
                                                 help="Context length to serve (default: the model's, at most 32768)."),
           goal: str = typer.Option("throughput", "--goal", help="throughput or latency."),
           version: Optional[str] = typer.Option(None, "--version", help="Engine version (default: newest catalog)."),
           model_path: Optional[str] = typer.Option(None, "--model-path",
                                                    help="What the command should load, when --model is a local "
                                                         "config file."),
           workload: Optional[str] = typer.Option(None, "--workload",
                                                  help="INPUT:OUTPUT tokens per request (e.g. 1024:1024), or a "
                                                       "benchmark file / run directory to read them from."),
           dataset: Optional[str] = typer.Option(None, "--dataset",
                                                 help="random: the engine benchmark's random-dataset lengths."),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1,
                                                     help="The load to serve (default: what the KV cache holds)."),
           as_json: bool = typer.Option(False, "--json")):
    """A recommended launch command for a model on given GPUs, sized for the workload, every flag explained."""
    from pathlib import Path as _P

    from ingest.hf_config import load_profile
    from ingest.nvidia_smi import hardware_from_string
    from kb.flags import catalog
    from kb.launch import plan, workload_from, workload_from_runs

    _check_engine(engine)
    if goal not in ("throughput", "latency"):
        raise typer.BadParameter("expected throughput or latency", param_hint="--goal")
    profile = load_profile(model)
    hw, warnings = hardware_from_string(gpus)
    spec = _P(model)
    path = model_path or (str(spec.parent) if spec.is_file() else model)
    if model_path:
        profile = profile.model_copy(update={"name": model_path})
    if workload and _P(workload).exists():
        from ingest.run import read_run

        wl = workload_from_runs(read_run([_P(workload)]).bench, concurrency, workload)
    else:
        wl = workload_from(workload, dataset, concurrency, engine)
    p = plan(profile, hw, engine, catalog(engine, version), path, context, goal, wl)
    p.notes = warnings + p.notes
    if as_json:
        typer.echo(p.model_dump_json(indent=2))
        return
    m = p.memory
    from kb.launchcmd import one_line

    typer.echo(one_line(f"# {engine} {p.version}: {profile.name or model} on {hw.count}x {hw.gpu} ({hw.arch}, "
                        f"{hw.interconnect})"))
    if p.catalog_note:
        typer.echo(one_line(f"# note: {p.catalog_note}"))
    typer.echo(p.command)
    typer.echo("")
    typer.echo("Memory (per GPU)")
    typer.echo(f"  weights   {m.weights_total_gib:,.1f} GiB total ({m.weight_format}) over TP{m.tp} × PP{m.pp} = "
               f"{m.weights_per_gpu_gib:,.2f} GiB"
               + (" (attention replicated per DP-attention rank)" if m.dp_attention else ""))
    typer.echo(f"  usable    {m.gpu_memory_gib:g} GiB × {m.fraction} − reserve = {m.usable_per_gpu_gib:,.2f} GiB")
    typer.echo(f"  KV cache  {m.kv_per_gpu_gib:,.2f} GiB / {m.kv_bytes_per_token_per_gpu:,} B per token "
               f"({m.kv_dtype}) = "
               f"{m.kv_tokens:,} tokens" + (" (× DP attention ranks)" if m.dp_attention else ""))
    typer.echo(f"  requests  {m.full_context_requests:,} at the full {m.context:,}-token context; running cap "
               f"{m.max_running}")
    typer.echo("")
    typer.echo("Sized for the workload")
    for line in p.sizing:
        typer.echo(f"  {line}")
    typer.echo("")
    typer.echo("Flags")
    for f in p.flags:
        val = "" if f.value is True else f" {f.value}"
        typer.echo(f"  {f.flag}{val}\n      {f.why}  [{f.source}]")
    for n in p.notes:
        typer.echo(f"note: {n}")


@app.command()
def attach(before: Optional[List[Path]] = typer.Option(None, "--before",
                                                       help="Benchmark output or run directory before the change "
                                                            "(repeatable)."),
           after: Optional[List[Path]] = typer.Option(None, "--after",
                                                      help="Benchmark output or run directory after the change "
                                                           "(repeatable)."),
           fix: Optional[str] = typer.Option(None, "--fix", help="What changed, in words."),
           command: Optional[List[str]] = typer.Option(None, "--command",
                                                       help="An exact command of the fix (repeatable)."),
           title: Optional[str] = typer.Option(None, "--title"),
           tag: Optional[List[str]] = typer.Option(None, "--tag"),
           fix_class: Optional[List[str]] = typer.Option(None, "--fix-class",
                                                         help="A fix-class slug (repeatable; inferred when not "
                                                              "given)."),
           symptom: Optional[List[str]] = typer.Option(None, "--symptom",
                                                       help="What was seen (repeatable; from the before run when not "
                                                            "given)."),
           cause: Optional[str] = typer.Option(None, "--cause", help="The root cause, in words."),
           note: Optional[str] = typer.Option(None, "--note", help="Free text kept with the finding."),
           to: Optional[Path] = typer.Option(None, "--to",
                                             help="Findings file to write (default $KB_HOME/findings/attached.md)."),
           update: Optional[str] = typer.Option(None, "--update", metavar="ID",
                                                help="Add this measurement to finding ID, in the file that holds it."),
           force_new: bool = typer.Option(False, "--force-new",
                                          help="Write a new finding even if a near-duplicate exists."),
           engine: Optional[str] = _ENGINE, gpu: Optional[str] = _GPU, config: Optional[str] = _CONFIG,
           report: Optional[Path] = typer.Option(None, "--report", help="Also write an HTML report of the runs: before "
                                                 "and after overlaid, or the after run alone (pip install "
                                                 "'kb[report]')."),
           as_json: bool = typer.Option(False, "--json")):
    """Record what a run taught us as a finding: gains computed from the runs, context from their files."""
    from kb.attach import Request, attach as do_attach, report as attach_report

    _check_engine(engine)
    if report:
        _require_plots()
    res = do_attach(Request(before=list(before or []), after=list(after or []), fix=fix, commands=list(command or []),
                            title=title, tags=list(tag or []), fix_classes=list(fix_class or []),
                            symptoms=list(symptom or []), cause=cause, note=note, to=to, update=update,
                            force_new=force_new, engine=engine, gpu=gpu, config=config), _store())
    typer.echo(json.dumps(res.to_json(), indent=2, ensure_ascii=False) if as_json else attach_report(res))
    if report:
        from kb import report as rp

        _wrote(report, rp.write(rp.from_attach(list(before or []), list(after or []), config, gpu, engine), report))


def _require_plots() -> None:
    """Fail before any work when matplotlib is missing (exit 1, naming what to install)."""
    from kb.plots import require

    require()


def _wrote(path: Path, size: int) -> None:
    typer.echo(f"report written to {path} ({size / 1024:,.0f} KB, one self-contained HTML file)", err=True)


@app.command("report")
def report_cmd(paths: List[Path] = typer.Argument(..., help="Run files or directories (benchmarks, kb sweep/doctor "
                                                              "output, logs, config.json, nvidia-smi), or a saved "
                                                              "`kb diagnose --json` / `kb doctor --json`."),
               out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
               config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU, engine: Optional[str] = _ENGINE,
               launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS):
    """One self-contained HTML page: curves with the knee, latency percentiles, Pareto view,
    server state, signals and recommendations."""
    from kb import report as rp

    _check_engine(engine)
    _require_plots()
    saved = [(p, s) for p in paths if (s := rp.load_saved(p))]
    if saved and len(paths) > 1:
        raise typer.BadParameter("a saved diagnosis is reported on its own", param_hint="PATHS")
    if saved:
        from kb.rules.registry import load_thresholds

        rep = rp.from_saved(saved[0][0], *saved[0][1], thresholds=load_thresholds(thresholds))
    else:
        from kb import index as kbindex
        from kb.diagnose import diagnose as run_diagnose

        ev, th = _run_options(paths, config, gpu, engine, launch, thresholds)
        d = run_diagnose(ev, _store().read(_loader(), kbindex.all_records), th)
        rep = rp.from_diagnosis(d, th, name=", ".join(p.name for p in paths))
    _wrote(out, rp.write(rep, out))


@app.command("compare")
def compare_cmd(runs: List[Path] = typer.Argument(...,
                                                  help="Two or more runs (files or directories); the first is the "
                                                       "baseline."),
                as_json: bool = typer.Option(False, "--json"),
                report: Optional[Path] = _REPORT,
                fail_on_regression: Optional[float] = typer.Option(
                    None, "--fail-on-regression", metavar="PCT", min=0.0,
                    help="Exit 3 when any metric is worse than the baseline by more than PCT percent and the noise "
                         "band."),
                noise: float = typer.Option(3.0, "--noise", metavar="PCT", min=0.0,
                                            help="Noise band (percent) for levels with a single run per side.")):
    """Runs aligned by load and workload: per level and metric the delta, the noise band and a verdict."""
    from kb.compare import compare, table

    if len(runs) < 2:
        raise typer.BadParameter("give two runs or more: the baseline first", param_hint="RUNS")
    if report:
        _require_plots()
    c = compare([[p] for p in runs], noise / 100)
    typer.echo(json.dumps(c.to_json(fail_on_regression), indent=2) if as_json else table(c, fail_on_regression))
    if report:
        from kb import report as rp

        _wrote(report, rp.write(rp.from_comparison(c), report))
    if fail_on_regression is not None and c.regressions(fail_on_regression):
        raise typer.Exit(3)


_API_KEY = typer.Option(None, "--api-key", envvar="KB_API_KEY", show_default=False,
                        help="API key sent as a Bearer token (or env KB_API_KEY); never printed or stored.")
_CONNECT_TIMEOUT = typer.Option(5.0, "--connect-timeout", min=0.1, help="Seconds to wait for a connection.")
_CONCURRENCY = typer.Option("1,8,32,128", "--concurrency", "-c", help="Concurrency levels, comma-separated.")
_REQUESTS = typer.Option(None, "--requests", "-n", min=1, help="Requests per level (default max(16, 4 x level)).")
_DURATION = typer.Option(None, "--duration", min=0.1, help="Seconds per level: stop sending after this.")
_INPUT_LEN = typer.Option(None, "--input-len", min=1,
                          help="Prompt length in tokens (default 256, fitted to the server's context).")
_OUTPUT_LEN = typer.Option(None, "--output-len", min=1,
                           help="Output tokens per request, ignore_eos (default 256, fitted to the server's context).")
_LEVEL_TIME = typer.Option(900.0, "--max-level-time", min=1.0, help="Hard cap on one level's wall time, seconds.")
_CHUNK_TIMEOUT = typer.Option(60.0, "--timeout", min=0.1, help="Seconds to wait for each token chunk.")


def _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout, max_level_time,
                   rate: str | None = None, slo: str | None = None):
    from kb.live import slo as slos
    from kb.live.client import Timeouts
    from kb.live.sweep import SweepOptions, parse_levels, parse_rates

    return SweepOptions(levels=parse_rates(rate) if rate else parse_levels(concurrency), requests=requests,
                        duration=duration, input_len=input_len, output_len=output_len, max_level_time=max_level_time,
                        progress=True, timeouts=Timeouts(connect=connect_timeout, read=timeout), rate=bool(rate),
                        slo=slos.parse(slo) if slo else None)


def _probe_timeouts(connect_timeout: float, timeout: float):
    """The probe's timeouts under a sweep: its info endpoints answer at once, so a long
    per-chunk timeout is capped at 30 s for them."""
    from kb.live.client import Timeouts

    return Timeouts(connect=connect_timeout, read=min(timeout, 30.0))


def _kept(n: int, out: Optional[Path]) -> str:
    if out is None:
        return f"{n} finished level{'s' * (n != 1)} (not kept: no --out)"
    return f"{n} finished level{'s' * (n != 1)} kept in {out}"


@app.command()
def probe(url: str = typer.Argument(..., help="The server, e.g. http://127.0.0.1:8000"),
          api_key: Optional[str] = _API_KEY,
          timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds to wait for each answer."),
          connect_timeout: float = _CONNECT_TIMEOUT, as_json: bool = typer.Option(False, "--json")):
    """Engine, version, model, context length and tuning arguments of a running server."""
    from kb.live.client import Timeouts
    from kb.live.probe import probe as do_probe, report

    p = do_probe(url, api_key, Timeouts(connect=connect_timeout, read=timeout))
    typer.echo(json.dumps(p.model_dump(mode="json"), indent=2) if as_json else report(p))


@app.command()
def sweep(url: str = typer.Argument(..., help="The server, e.g. http://127.0.0.1:8000"),
          concurrency: str = _CONCURRENCY, requests: Optional[int] = _REQUESTS, duration: Optional[float] = _DURATION,
          input_len: Optional[int] = _INPUT_LEN, output_len: Optional[int] = _OUTPUT_LEN,
          out: Optional[Path] = typer.Option(None, "--out", "-o",
                                             help="JSONL file (sglang bench_serving shape), one line per finished "
                                                  "level."),
          api_key: Optional[str] = _API_KEY,
          timeout: float = _CHUNK_TIMEOUT,
          connect_timeout: float = _CONNECT_TIMEOUT, max_level_time: float = _LEVEL_TIME,
          rate: Optional[str] = typer.Option(None, "--rate",
                                             help="Request rates (req/s, Poisson arrivals) instead of concurrencies, "
                                                  "e.g. 0.5,1,2,4."),
          slo: Optional[str] = typer.Option(None, "--slo",
                                            help='Objectives, e.g. "ttft_p99<=2000ms,tpot_p50<=50ms": per level the '
                                                 'share of requests meeting them and the goodput.'),
          find_max: bool = typer.Option(False, "--find-max",
                                        help="Search the highest level meeting --slo: double from the first level, "
                                             "then bisect."),
          max_level: float = typer.Option(1024, "--max-level", min=0.01, help="Highest level --find-max may try."),
          as_json: bool = typer.Option(False, "--json")):
    """Streaming load over concurrency levels: throughput, TTFT, TPOT, ITL and /metrics samples."""
    from kb.errors import ServerError, UsageError
    from kb.live.doctor import level_summary
    from kb.live.probe import probe as do_probe
    from kb.live.sweep import sweep as do_sweep, sweep_find_max, table

    if find_max and not slo:
        raise UsageError("--find-max needs --slo: the objectives a level must meet")
    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time, rate, slo)
    p = do_probe(url, api_key, _probe_timeouts(connect_timeout, timeout))
    found = None
    if find_max:
        found, res = sweep_find_max(p, opts, max_level, api_key, out)
    else:
        res = do_sweep(p, opts, api_key, out)
    unit = "req/s" if rate else "concurrent requests"
    if as_json:
        _echo_json({"url": p.url, "engine": p.engine, "version": p.version, "model": p.model,
                    "input_len": res.input_len, "output_len": res.output_len, "prompt_tokens": res.prompt_tokens,
                    "out": str(out) if out else None, "levels": [level_summary(r) for r in res.levels],
                    "find_max": None if found is None else {"best": found.best, "broke_at": found.broke_at,
                                                            "why": found.why, "tried": found.tried, "unit": unit},
                    "interrupted": res.interrupted, "error": res.error, "warnings": res.warnings})
    else:
        typer.echo(f"kb sweep — {p.url} · {p.engine or 'unknown engine'} {p.version or ''} · {p.model}".replace("  ",
                                                                                                                " "))
        typer.echo(f"  prompts {res.prompt_tokens or '?'} tokens ({res.prompt_words} words), {res.output_len} output "
                   "tokens")
        if res.levels:
            typer.echo(table(res.levels))
        for w in res.warnings:
            typer.echo(f"warning: {w}")
        if found is not None:
            typer.echo(f"highest level meeting the SLO: {found.best if found.best is not None else 'none'} {unit}"
                       + (f"; broke at {found.broke_at:g}: {'; '.join(found.why)}" if found.broke_at is not None else
                          f" (the ceiling --max-level {max_level:g} still meets it)")
                       + f"  [tried {', '.join(f'{t:g}' for t in found.tried)}]")
        if out and res.levels and not res.error and not res.interrupted:
            typer.echo(f"written to {out}")
    if res.error:
        raise ServerError(f"{res.error}; {_kept(len(res.levels), out)}")
    if res.interrupted:
        typer.echo(f"kb: interrupted: {_kept(len(res.levels), out)}", err=True)
        raise typer.Exit(130)


@app.command()
def doctor(url: str = typer.Argument(..., help="The server, e.g. http://127.0.0.1:8000"),
           concurrency: str = _CONCURRENCY, requests: Optional[int] = _REQUESTS,
           duration: Optional[float] = _DURATION, input_len: Optional[int] = _INPUT_LEN,
           output_len: Optional[int] = _OUTPUT_LEN,
           out: Optional[Path] = typer.Option(None, "--out", "-o",
                                              help="Where the sweep goes (default "
                                                   "$KB_HOME/runs/doctor-HOST-PORT-TIME.jsonl)."),
           launch: Optional[str] = _LAUNCH,
           log: Optional[Path] = typer.Option(None, "--log",
                                              help="The server's log file: start-up facts and the stats lines written "
                                                   "during the sweep."),
           config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU, thresholds: Optional[str] = _THRESHOLDS,
           api_key: Optional[str] = _API_KEY,
           timeout: float = _CHUNK_TIMEOUT,
           connect_timeout: float = _CONNECT_TIMEOUT, max_level_time: float = _LEVEL_TIME,
           report: Optional[Path] = _REPORT,
           as_json: bool = typer.Option(False, "--json")):
    """Probe + sweep + diagnose a running server: the plateau, its cause, and the flags to change."""
    from kb import index as kbindex
    from kb.errors import ServerError
    from kb.live.doctor import default_out, doctor as do_doctor, report as doctor_report
    from kb.rules.registry import load_thresholds

    if report:
        _require_plots()
    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time)
    th = load_thresholds(thresholds)
    store = _store()
    target = out or default_out(store.home, url)
    r = do_doctor(url, opts, store.read(_loader(), kbindex.all_records), target, api_key=api_key, launch=launch,
                  log=log,
                  config=config, gpu=gpu, thresholds=th, timeouts=_probe_timeouts(connect_timeout, timeout))
    typer.echo(json.dumps(r.to_json(), indent=2, default=str) if as_json else doctor_report(r))
    if report:  # written even when the sweep stopped early: its finished levels are diagnosed
        from kb import report as rp

        _wrote(report, rp.write(rp.from_diagnosis(r.diagnosis, th, name=target.name), report))
    if r.sweep.error:
        raise ServerError(f"{r.sweep.error}; {_kept(len(r.sweep.levels), target)}")
    if r.sweep.interrupted:
        typer.echo(f"kb: interrupted: {_kept(len(r.sweep.levels), target)}", err=True)
        raise typer.Exit(130)


@app.command()
def tune(launch: str = typer.Option(..., "--launch",
                                    help='The server\'s launch command, quoted: "vllm serve …" or "python -m '
                                         'sglang.launch_server …" (KEY=VALUE prefixes become its environment).'),
         goal: str = typer.Option("throughput", "--goal", help="throughput or latency."),
         slo: Optional[str] = typer.Option(None, "--slo",
                                           help='Objectives each kept configuration must meet, e.g. '
                                                '"ttft_p99<=2000ms,tpot_p50<=50ms".'),
         budget_minutes: float = typer.Option(60.0, "--budget-minutes", min=0.1,
                                              help="Stop starting trials after this many minutes."),
         max_trials: int = typer.Option(8, "--max-trials", min=0,
                                        help="Candidate trials at most (the baseline not counted)."),
         dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; start nothing."),
         candidate: Optional[List[str]] = typer.Option(None, "--candidate",
                                                       help='Flag changes to try first, e.g. "--max-num-seqs 64" '
                                                            '(repeatable).'),
         concurrency: str = _CONCURRENCY, requests: Optional[int] = _REQUESTS, duration: Optional[float] = _DURATION,
         input_len: Optional[int] = _INPUT_LEN, output_len: Optional[int] = _OUTPUT_LEN,
         rate: Optional[str] = typer.Option(None, "--rate", help="Sweep request rates instead of concurrencies."),
         config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU,
         out_dir: Optional[Path] = typer.Option(None, "--out-dir",
                                                help="Where trial logs and sweeps go "
                                                     "(default $KB_HOME/runs/tune-TIME)."),
         start_timeout: float = typer.Option(600.0, "--start-timeout", min=1.0,
                                             help="Seconds a server may take to answer /health."),
         no_attach: bool = typer.Option(False, "--no-attach", help="Do not record the result as a finding."),
         report: Optional[Path] = typer.Option(None, "--report",
                                               help="The before/after HTML report (default OUT_DIR/report.html)."),
         timeout: float = _CHUNK_TIMEOUT, connect_timeout: float = _CONNECT_TIMEOUT,
         max_level_time: float = _LEVEL_TIME,
         as_json: bool = typer.Option(False, "--json")):
    """Start the server, sweep, diagnose, try kb's recommended changes one by one, keep what works, record it."""
    import time as _time

    from kb import index as kbindex
    from kb.errors import UsageError
    from kb.tune import TuneOptions, report as tune_report, tune as do_tune

    if goal not in ("throughput", "latency"):
        raise UsageError("--goal: expected throughput or latency")
    store = _store()
    sw = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                        max_level_time, rate, slo)
    sw.progress = False
    workdir = out_dir or store.home / "runs" / f"tune-{_time.strftime('%Y%m%d-%H%M%S')}"
    opts = TuneOptions(launch=launch, sweep=sw, goal=goal, budget_minutes=budget_minutes, max_trials=max_trials,
                       dry_run=dry_run, candidates=list(candidate or []), config=config, gpu=gpu, workdir=workdir,
                       start_timeout=start_timeout, attach=not no_attach, report=report)
    res = do_tune(opts, store.read(_loader(), kbindex.all_records), store)
    typer.echo(json.dumps(res.to_json(), indent=2, default=str) if as_json else tune_report(res))
    if res.interrupted:
        typer.echo("kb: interrupted: every server kb started is stopped", err=True)
        raise typer.Exit(130)


def main() -> None:
    try:
        from kb.askcli import main as plain_ask

        if not plain_ask(sys.argv[1:]):  # a plain `kb ask` skips building typer's command line
            app()
    except KbError as e:
        from kb.errors import UsageError
        from kb.redact import redact_text

        typer.echo(f"kb: error: {redact_text(str(e))}", err=True)  # a message may quote a server's answer
        sys.exit(2 if isinstance(e, UsageError) else 1)
    except KeyboardInterrupt:
        typer.echo("kb: interrupted", err=True)
        sys.exit(130)
