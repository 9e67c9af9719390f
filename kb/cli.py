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
                        help="Benchmark outputs, server logs, config.json, nvidia-smi output, or directories.")
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
                absent = f"; not given: {', '.join(row['absent'])}" if row["absent"] else ""
                typer.echo(f"  {r.id} [{r.kind}] found: {', '.join(row['found']) or '-'}; "
                           f"missing: {', '.join(row['missing']) or '-'}{absent}")
    from kb.render import file_line

    for f in run_files:
        typer.echo(file_line(f))
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
        run: Optional[List[Path]] = typer.Option(None, "--run", help="This run's files or directory: answer from its signals too."),
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
    from kb import index as kbindex
    from kb import render
    from kb.errors import NotFoundError

    store = _store()
    f = store.read(_loader(), lambda d: kbindex.get(d, finding_id))
    if f is None:
        raise NotFoundError(f"no finding with id {finding_id!r} (try `kb ask`)")
    typer.echo(json.dumps(render.finding_json(f), indent=2) if as_json else render.finding_full(f))
    if not as_json:
        for line in render.source_files(f):
            typer.echo(line)


def _run_options(paths, config, gpu, engine, launch, thresholds):
    from ingest.run import read_run
    from kb.signals import load_thresholds

    ev = read_run(list(paths), config=config, gpu=gpu, engine=engine, launch=launch)
    return ev, load_thresholds(thresholds)


# Fleets from Prometheus (kb/fleet): `kb signals|diagnose --prometheus URL` instead of files
_PROM = typer.Option(None, "--prometheus", help="Prometheus URL: read every vLLM/sglang instance it scrapes instead of files.")
_PROM_SELECTOR = typer.Option(None, "--selector", help='Label matchers for the instances, e.g. \'{job="vllm"}\'.')
_PROM_SINCE = typer.Option(None, "--since", help="Range ending now, e.g. 30m, 1h, 2d (default 1h).")
_PROM_START = typer.Option(None, "--start", help="Range start: RFC 3339 (2026-12-01T15:00:00Z) or Unix seconds.")
_PROM_END = typer.Option(None, "--end", help="Range end (with --start).")
_PROM_STEP = typer.Option("15s", "--step", help="Resolution of the range queries (raised to keep 1,000 points per series).")
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
    from kb.signals import load_thresholds

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
            prometheus: Optional[str] = _PROM, selector: Optional[str] = _PROM_SELECTOR, since: Optional[str] = _PROM_SINCE,
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
             as_json: bool = typer.Option(False, "--json")):
    """Signals, then ranked recommendations with exact commands and the findings behind them."""
    from kb import index as kbindex
    from kb.diagnose import diagnose as run_diagnose, report

    if _fleet(paths, prometheus, selector, since, start, end, step, prometheus_token, prometheus_user,
              thresholds, as_json, diagnose=True):
        return
    _check_engine(engine)
    ev, th = _run_options(paths, config, gpu, engine, launch, thresholds)
    store = _store()
    d = run_diagnose(ev, store.read(_loader(), kbindex.all_records), th)
    typer.echo(json.dumps(d.to_json(), indent=2, default=str) if as_json else report(d))


@app.command()
def launch(model: str = typer.Option(..., "--model", help="config.json, a model directory, or a repo id in the local Hugging Face cache."),
           gpus: str = typer.Option(..., "--gpus", help='e.g. "8x RTX PRO 6000", "4x H100".'),
           engine: str = typer.Option(..., "--engine", help="sglang or vllm."),
           context: Optional[int] = typer.Option(None, "--context", min=256, help="Context length to serve (default: the model's, at most 32768)."),
           goal: str = typer.Option("throughput", "--goal", help="throughput or latency."),
           version: Optional[str] = typer.Option(None, "--version", help="Engine version (default: newest catalog)."),
           model_path: Optional[str] = typer.Option(None, "--model-path", help="What the command should load, when --model is a local config file."),
           workload: Optional[str] = typer.Option(None, "--workload", help="INPUT:OUTPUT tokens per request (e.g. 1024:1024), or a benchmark file / run directory to read them from."),
           dataset: Optional[str] = typer.Option(None, "--dataset", help="random: the engine benchmark's random-dataset lengths."),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="The load to serve (default: what the KV cache holds)."),
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

    typer.echo(one_line(f"# {engine} {p.version}: {profile.name or model} on {hw.count}x {hw.gpu} ({hw.arch}, {hw.interconnect})"))
    if p.catalog_note:
        typer.echo(one_line(f"# note: {p.catalog_note}"))
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
def attach(before: Optional[List[Path]] = typer.Option(None, "--before", help="Benchmark output or run directory before the change (repeatable)."),
           after: Optional[List[Path]] = typer.Option(None, "--after", help="Benchmark output or run directory after the change (repeatable)."),
           fix: Optional[str] = typer.Option(None, "--fix", help="What changed, in words."),
           command: Optional[List[str]] = typer.Option(None, "--command", help="An exact command of the fix (repeatable)."),
           title: Optional[str] = typer.Option(None, "--title"),
           tag: Optional[List[str]] = typer.Option(None, "--tag"),
           fix_class: Optional[List[str]] = typer.Option(None, "--fix-class", help="A fix-class slug (repeatable; inferred when not given)."),
           symptom: Optional[List[str]] = typer.Option(None, "--symptom", help="What was seen (repeatable; from the before run when not given)."),
           cause: Optional[str] = typer.Option(None, "--cause", help="The root cause, in words."),
           note: Optional[str] = typer.Option(None, "--note", help="Free text kept with the finding."),
           to: Optional[Path] = typer.Option(None, "--to", help="Findings file to write (default $KB_HOME/findings/attached.md)."),
           update: Optional[str] = typer.Option(None, "--update", metavar="ID", help="Add this measurement to finding ID, in the file that holds it."),
           force_new: bool = typer.Option(False, "--force-new", help="Write a new finding even if a near-duplicate exists."),
           engine: Optional[str] = _ENGINE, gpu: Optional[str] = _GPU, config: Optional[str] = _CONFIG,
           as_json: bool = typer.Option(False, "--json")):
    """Record what a run taught us as a finding: gains computed from the runs, context from their files."""
    from kb.attach import Request, attach as do_attach, report

    _check_engine(engine)
    res = do_attach(Request(before=list(before or []), after=list(after or []), fix=fix, commands=list(command or []),
                            title=title, tags=list(tag or []), fix_classes=list(fix_class or []),
                            symptoms=list(symptom or []), cause=cause, note=note, to=to, update=update,
                            force_new=force_new, engine=engine, gpu=gpu, config=config), _store())
    typer.echo(json.dumps(res.to_json(), indent=2, ensure_ascii=False) if as_json else report(res))


_API_KEY = typer.Option(None, "--api-key", envvar="KB_API_KEY", show_default=False,
                        help="API key sent as a Bearer token (or env KB_API_KEY); never printed or stored.")
_CONNECT_TIMEOUT = typer.Option(5.0, "--connect-timeout", min=0.1, help="Seconds to wait for a connection.")
_CONCURRENCY = typer.Option("1,8,32,128", "--concurrency", "-c", help="Concurrency levels, comma-separated.")
_REQUESTS = typer.Option(None, "--requests", "-n", min=1, help="Requests per level (default max(16, 4 x level)).")
_DURATION = typer.Option(None, "--duration", min=0.1, help="Seconds per level: stop sending after this.")
_INPUT_LEN = typer.Option(256, "--input-len", min=1, help="Prompt length in tokens.")
_OUTPUT_LEN = typer.Option(256, "--output-len", min=1, help="Output tokens per request (ignore_eos).")
_LEVEL_TIME = typer.Option(900.0, "--max-level-time", min=1.0, help="Hard cap on one level's wall time, seconds.")
_CHUNK_TIMEOUT = typer.Option(60.0, "--timeout", min=0.1, help="Seconds to wait for each token chunk.")


def _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout, max_level_time):
    from kb.live.client import Timeouts
    from kb.live.sweep import SweepOptions, parse_levels

    return SweepOptions(levels=parse_levels(concurrency), requests=requests, duration=duration, input_len=input_len,
                        output_len=output_len, max_level_time=max_level_time, progress=True,
                        timeouts=Timeouts(connect=connect_timeout, read=timeout))


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
          input_len: int = _INPUT_LEN, output_len: int = _OUTPUT_LEN,
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="JSONL file (sglang bench_serving shape), one line per finished level."),
          api_key: Optional[str] = _API_KEY,
          timeout: float = _CHUNK_TIMEOUT,
          connect_timeout: float = _CONNECT_TIMEOUT, max_level_time: float = _LEVEL_TIME,
          as_json: bool = typer.Option(False, "--json")):
    """Streaming load over concurrency levels: throughput, TTFT, TPOT, ITL and /metrics samples."""
    from kb.errors import ServerError
    from kb.live.doctor import level_summary
    from kb.live.probe import probe as do_probe
    from kb.live.sweep import sweep as do_sweep, table

    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time)
    p = do_probe(url, api_key, _probe_timeouts(connect_timeout, timeout))
    res = do_sweep(p, opts, api_key, out)
    if as_json:
        _echo_json({"url": p.url, "engine": p.engine, "version": p.version, "model": p.model,
                    "input_len": input_len, "output_len": output_len, "prompt_tokens": res.prompt_tokens,
                    "out": str(out) if out else None, "levels": [level_summary(r) for r in res.levels],
                    "interrupted": res.interrupted, "error": res.error, "warnings": res.warnings})
    else:
        typer.echo(f"kb sweep — {p.url} · {p.engine or 'unknown engine'} {p.version or ''} · {p.model}".replace("  ", " "))
        typer.echo(f"  prompts {res.prompt_tokens or '?'} tokens ({res.prompt_words} words), {output_len} output tokens")
        if res.levels:
            typer.echo(table(res.levels))
        for w in res.warnings:
            typer.echo(f"warning: {w}")
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
           duration: Optional[float] = _DURATION, input_len: int = _INPUT_LEN, output_len: int = _OUTPUT_LEN,
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where the sweep goes (default $KB_HOME/runs/doctor-HOST-PORT-TIME.jsonl)."),
           launch: Optional[str] = _LAUNCH,
           log: Optional[Path] = typer.Option(None, "--log", help="The server's log file: start-up facts and the stats lines written during the sweep."),
           config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU, thresholds: Optional[str] = _THRESHOLDS,
           api_key: Optional[str] = _API_KEY,
           timeout: float = _CHUNK_TIMEOUT,
           connect_timeout: float = _CONNECT_TIMEOUT, max_level_time: float = _LEVEL_TIME,
           as_json: bool = typer.Option(False, "--json")):
    """Probe + sweep + diagnose a running server: the plateau, its cause, and the flags to change."""
    from kb import index as kbindex
    from kb.errors import ServerError
    from kb.live.doctor import default_out, doctor as do_doctor, report
    from kb.signals import load_thresholds

    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time)
    th = load_thresholds(thresholds)
    store = _store()
    target = out or default_out(store.home, url)
    r = do_doctor(url, opts, store.read(_loader(), kbindex.all_records), target, api_key=api_key, launch=launch, log=log,
                  config=config, gpu=gpu, thresholds=th, timeouts=_probe_timeouts(connect_timeout, timeout))
    typer.echo(json.dumps(r.to_json(), indent=2, default=str) if as_json else report(r))
    if r.sweep.error:
        raise ServerError(f"{r.sweep.error}; {_kept(len(r.sweep.levels), target)}")
    if r.sweep.interrupted:
        typer.echo(f"kb: interrupted: {_kept(len(r.sweep.levels), target)}", err=True)
        raise typer.Exit(130)


def main() -> None:
    try:
        from kb.askcli import main as plain_ask

        if not plain_ask(sys.argv[1:]):  # a plain `kb ask` skips building typer's command line
            app()
    except KbError as e:
        from kb.redact import redact_text

        typer.echo(f"kb: error: {redact_text(str(e))}", err=True)  # a message may quote a server's answer
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("kb: interrupted", err=True)
        sys.exit(130)
