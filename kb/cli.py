"""The `kb` command line. Each command parses its options, makes one call on the library
(kb.app.KnowledgeBase) and prints the result's text or JSON; kb's errors become one clear
line and exit code 1, usage errors (typer's, and kb.errors.UsageError) exit 2. The
library is imported when a command runs: `kb --help` and typer's parsing stay fast."""

from __future__ import annotations

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


def _kb():
    from kb.app import KnowledgeBase

    return KnowledgeBase(_state["home"])


def _print(res, as_json: bool = False, **text_options) -> None:
    """A result's JSON, or its text (nothing when it has none)."""
    out = res.json_text() if as_json else res.text(**text_options)
    if out:
        typer.echo(out)


def _wrote(report) -> None:
    if report is not None:
        typer.echo(report.text(), err=True)


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
    _print(_kb().ingest(list(paths)), as_json, detail=report)


@app.command()
def reindex():
    """Rebuild the index from every source file."""
    _print(_kb().reindex())


@app.command()
def ask(question: str = typer.Argument(..., help="A question, as you would ask a colleague."),
        limit: int = typer.Option(5, "--limit", "-n", min=1, max=50),
        run: Optional[List[Path]] = typer.Option(None, "--run",
                                                 help="This run's files or directory: answer from its signals too."),
        gpu: Optional[str] = _GPU, config: Optional[str] = _CONFIG, engine: Optional[str] = _ENGINE,
        as_json: bool = typer.Option(False, "--json")):
    """Answer from past findings: symptom, cause, fix, commands, measured gain, source."""
    _print(_kb().ask(question, run=list(run or []), limit=limit, gpu=gpu, config=config, engine=engine), as_json)


@app.command()
def show(finding_id: str = typer.Argument(..., metavar="ID"), as_json: bool = typer.Option(False, "--json")):
    """Print one finding whole."""
    _print(_kb().show(finding_id), as_json)


@app.command()
def rules(rule_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="A rule id (KB112) or name: explain it."),
          thresholds: Optional[str] = _THRESHOLDS, as_json: bool = typer.Option(False, "--json")):
    """List the rules (id, name, severity, fix class, needed evidence), or explain one."""
    _print(_kb().rules(rule_id, thresholds), as_json)


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
    from kb.fleet import Query

    _print(_kb().fleet(Query(prometheus, selector, since, start, end, step, token, user), thresholds, diagnose),
           as_json)
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
    if _fleet(paths, prometheus, selector, since, start, end, step, prometheus_token, prometheus_user,
              thresholds, as_json, diagnose=False):
        return
    _print(_kb().signals(list(paths), config, gpu, engine, launch, thresholds), as_json)


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
    if _fleet(paths, prometheus, selector, since, start, end, step, prometheus_token, prometheus_user,
              thresholds, as_json, diagnose=True):
        return
    run = {"config": config, "gpu": gpu, "engine": engine, "launch": launch, "thresholds": thresholds}
    base = _kb()
    _print(base.why(list(paths), why, **run) if why else base.diagnose(list(paths), **run), as_json)


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
    _print(_kb().plan_launch(model, gpus, engine, context, goal, version, model_path, workload, dataset, concurrency),
           as_json)


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
    from kb.attach import Request

    res = _kb().attach(Request(before=list(before or []), after=list(after or []), fix=fix,
                               commands=list(command or []), title=title, tags=list(tag or []),
                               fix_classes=list(fix_class or []), symptoms=list(symptom or []), cause=cause,
                               note=note, to=to, update=update, force_new=force_new, engine=engine, gpu=gpu,
                               config=config), report)
    _print(res, as_json)
    _wrote(res.report)


@app.command("report")
def report_cmd(paths: List[Path] = typer.Argument(..., help="Run files or directories (benchmarks, kb sweep/doctor "
                                                              "output, logs, config.json, nvidia-smi), or a saved "
                                                              "`kb diagnose --json` / `kb doctor --json`."),
               out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
               config: Optional[str] = _CONFIG, gpu: Optional[str] = _GPU, engine: Optional[str] = _ENGINE,
               launch: Optional[str] = _LAUNCH, thresholds: Optional[str] = _THRESHOLDS):
    """One self-contained HTML page: curves with the knee, latency percentiles, Pareto view,
    server state, signals and recommendations."""
    _wrote(_kb().report(list(paths), out, config, gpu, engine, launch, thresholds))


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
    res = _kb().compare(list(runs), noise, fail_on_regression, report)
    _print(res, as_json)
    _wrote(res.report)
    if res.regressed:
        raise typer.Exit(3)


_API_KEY = typer.Option(None, "--api-key", envvar="KB_API_KEY", show_default=False,
                        help="API key sent as a Bearer token (or env KB_API_KEY); never printed or stored.")
_CONNECT_TIMEOUT = typer.Option(5.0, "--connect-timeout", min=0.1, help="Seconds to wait for a connection.")
_CONCURRENCY = typer.Option("1,8,32,128", "--concurrency", "-c", help="Concurrency levels, comma-separated.")
_REQUESTS = typer.Option(None, "--requests", "-n", min=1, help="Requests per level (default max(16, 4 x level)).")
_DURATION = typer.Option(None, "--duration", min=0.1, help="Seconds per level: stop sending after this.")
_WARMUP = typer.Option(None, "--warmup", min=0,
                       help="Requests sent at the highest level before the measured levels, not recorded "
                            "(kb sweep: 0; kb tune: the highest level, at least 8).")
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


def _stopped(sweep, kept: str) -> None:
    """A sweep that failed part-way is an error (exit 1), one interrupted exits 130; the
    finished levels are kept either way."""
    from kb.errors import ServerError

    if sweep.error:
        raise ServerError(f"{sweep.error}; {kept}")
    if sweep.interrupted:
        typer.echo(f"kb: interrupted: {kept}", err=True)
        raise typer.Exit(130)


def _probe_timeouts(connect_timeout: float, timeout: float):
    """The probe's timeouts under a sweep: its info endpoints answer at once, so a long
    per-chunk timeout is capped at 30 s for them."""
    from kb.live.client import Timeouts

    return Timeouts(connect=connect_timeout, read=min(timeout, 30.0))


@app.command()
def probe(url: str = typer.Argument(..., help="The server, e.g. http://127.0.0.1:8000"),
          api_key: Optional[str] = _API_KEY,
          timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds to wait for each answer."),
          connect_timeout: float = _CONNECT_TIMEOUT, as_json: bool = typer.Option(False, "--json")):
    """Engine, version, model, context length and tuning arguments of a running server."""
    from kb.live.client import Timeouts

    _print(_kb().probe(url, api_key, Timeouts(connect=connect_timeout, read=timeout)), as_json)


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
          warmup: Optional[int] = _WARMUP,
          as_json: bool = typer.Option(False, "--json")):
    """Streaming load over concurrency levels: throughput, TTFT, TPOT, ITL and /metrics samples."""
    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time, rate, slo)
    opts.warmup = warmup or 0
    res = _kb().sweep(url, opts, api_key, out, find_max, max_level, _probe_timeouts(connect_timeout, timeout))
    _print(res, as_json)
    _stopped(res.sweep, res.stopped())


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
    opts = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                          max_level_time)
    res = _kb().doctor(url, opts, out, api_key, launch, log, config, gpu, thresholds,
                       _probe_timeouts(connect_timeout, timeout), report)
    _print(res, as_json)
    _wrote(res.report)
    _stopped(res.result.sweep, res.stopped())


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
         max_trials: int = typer.Option(8, "--max-trials", min=1,
                                        help="Server starts at most: the baseline's, each candidate's (a failed "
                                             "start counts) and each repeat's."),
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
         max_level_time: float = _LEVEL_TIME, warmup: Optional[int] = _WARMUP,
         as_json: bool = typer.Option(False, "--json")):
    """Start the server, sweep, diagnose, try kb's recommended changes one by one, keep what works, record it."""
    from kb.tune import TuneOptions, default_warmup

    sw = _sweep_options(concurrency, requests, duration, input_len, output_len, timeout, connect_timeout,
                        max_level_time, rate, slo)
    sw.progress = False
    sw.warmup = default_warmup(sw) if warmup is None else warmup
    res = _kb().tune(TuneOptions(launch=launch, sweep=sw, goal=goal, budget_minutes=budget_minutes,
                                 max_trials=max_trials, dry_run=dry_run, candidates=list(candidate or []),
                                 config=config, gpu=gpu, workdir=out_dir, start_timeout=start_timeout,
                                 attach=not no_attach, report=report))
    _print(res, as_json)
    if res.result.interrupted:
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
