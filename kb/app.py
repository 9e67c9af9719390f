"""kb as a library: `KnowledgeBase(home)` does what each `kb` command does, and the
command line is a thin shell around it (the way sqlite-utils' `Database` carries its CLI).

    from kb import KnowledgeBase

    base = KnowledgeBase()  # $KB_HOME, else $XDG_DATA_HOME/kb
    print(base.ask("throughput plateaus at 128 concurrent requests").text())
    d = base.diagnose(["bench.jsonl", "server.log"], config="config.json")
    d.to_json()["recommendations"][0]["commands"]

Every method returns a result: a pydantic model with `text()` (what `kb` prints) and
`to_json()` (what `kb --json` prints). A bad value for a setting raises
kb.errors.UsageError naming the setting; a bad input file kb.errors.InputError.

Each method imports the subsystem it runs: `kb ask` answers in a fraction of a second and
must not pay for the rules, the live client (aiohttp) or the plots (matplotlib).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict

from kb.errors import NotFoundError, UsageError
from kb.records import Finding, Hardware
from kb.store import Store

ENGINES = ("sglang", "vllm")
GOALS = ("throughput", "latency")
INGEST_FIELDS = ["symptoms", "root_cause", "fix", "fix_classes", "commands", "gains", "sources", "context"]


def load_findings(path: Path, shown: str) -> list[Finding]:
    """The store's loader: the findings parser, imported only when a source file changed
    (a `kb ask` on an unchanged knowledge base never parses markdown)."""
    from ingest.detect import load_findings as load

    return load(path, shown)


def check_engine(engine: str | None) -> None:
    if engine and engine not in ENGINES:
        raise UsageError(f"engine: expected sglang or vllm, got {engine!r}")


def check_goal(goal: str) -> None:
    if goal not in GOALS:
        raise UsageError(f"goal: expected throughput or latency, got {goal!r}")


class Result(BaseModel):
    """A command's result: `text()` is what `kb` prints, `to_json()` what `kb --json` prints."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def text(self) -> str:
        raise NotImplementedError

    def to_json(self) -> Any:
        raise NotImplementedError

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False, default=str)


# ------------------------------------------------------------------ knowledge base


class IngestedFile(BaseModel):
    path: str
    status: str  # added | updated | removed | unchanged
    records: list[dict]  # per record: id, kind, title, found, missing, absent


class IngestResult(Result):
    findings: list[IngestedFile]
    evidence: list[dict]  # each run file: what it was read as, or why it was skipped
    warnings: list[str]
    bench: bool  # benchmark results were read (they are not stored)

    def to_json(self) -> dict:
        return {"findings": [f.model_dump() for f in self.findings], "evidence": self.evidence,
                "warnings": self.warnings}

    def text(self, detail: bool = False) -> str:
        """`detail`: per record, which fields were found and which are missing."""
        from kb.render import file_line, format_lines

        out = []
        for fr in self.findings:
            out.append(f"{fr.path}: findings, {fr.status}" + (f", {len(fr.records)} records" if fr.records else ""))
            for row in fr.records if detail else []:
                absent = f"; not given: {', '.join(row['absent'])}" if row["absent"] else ""
                out.append(f"  {row['id']} [{row['kind']}] found: {', '.join(row['found']) or '-'}; "
                           f"missing: {', '.join(row['missing']) or '-'}{absent}")
        for f in self.evidence:
            out.append(file_line(f))
            out += format_lines(f) if detail else []
            if detail and f.get("columns"):  # a table read by the generic results reader: how
                out.append(f"  columns: {f['columns']}")
        out += [f"warning: {w}" for w in self.warnings]
        if self.bench:
            out.append("(run evidence is read, not stored: use `kb diagnose` on these files)")
        return "\n".join(out)


def ingest_row(r: Finding) -> dict:
    """`kb ingest --report`'s row for one record: the fields found, the required ones missing,
    and (apart) the optional ones it does not give, e.g. a gains table when the source
    measured nothing; a note lacks everything a canonical finding has."""
    absent = r.missing_fields()
    missing = r.missing_required() if r.kind == "finding" else absent
    return {"id": r.id, "kind": r.kind, "title": r.title, "found": [f for f in INGEST_FIELDS if f not in absent],
            "missing": missing, "absent": [f for f in absent if f not in missing]}


class ReindexResult(Result):
    files: int
    records: int

    def to_json(self) -> dict:
        return {"files": self.files, "records": self.records}

    def text(self) -> str:
        return f"reindexed {self.files} files, {self.records} records"


class AskResult(Result):
    question: str
    answers: list  # kb.search.Answer, best first
    diagnosis: Any = None  # kb.diagnose.Diagnosis of the run asked about, if any

    def to_json(self) -> dict:
        from kb.render import answers_json

        return answers_json(self.question, self.answers, self.diagnosis)

    def text(self) -> str:
        from kb.render import answers_text

        return answers_text(self.answers, self.diagnosis)


class RulesResult(Result):
    rules: list[dict] | None = None  # the listing (kb.rules.describe.row per rule), or
    explained: dict | None = None  # one rule explained (kb.rules.describe.explain)

    def to_json(self) -> Any:
        return self.explained if self.explained is not None else self.rules

    def text(self) -> str:
        from kb.rules import describe

        return describe.explain_text(self.explained) if self.explained is not None else describe.listing_text()


class ShowResult(Result):
    finding: Finding

    def to_json(self) -> dict:
        from kb.render import finding_json

        return finding_json(self.finding)

    def text(self) -> str:
        from kb.render import finding_full, source_files

        return "\n".join([finding_full(self.finding), *source_files(self.finding)])


# ------------------------------------------------------------------ a run's evidence


class SignalsResult(Result):
    files: list[dict]
    signals: list  # kb.records.Signal
    warnings: list[str]

    def to_json(self) -> dict:
        return {"files": self.files, "signals": [s.model_dump(mode="json") for s in self.signals],
                "warnings": self.warnings}

    def text(self) -> str:
        from kb.render import file_line, signal_lines

        out = [file_line(f) for f in self.files] + ["\n".join(signal_lines(s)) for s in self.signals]
        if not self.signals:
            out.append("no signals: nothing in this evidence looks wrong")
        return "\n".join(out)


class FleetResult(Result):
    fleet: Any  # kb.fleet.report.Fleet
    diagnosed: bool

    def to_json(self) -> dict:
        return self.fleet.to_json()

    def text(self) -> str:
        from kb.fleet.report import report

        return report(self.fleet, self.diagnosed)


class DiagnoseResult(Result):
    diagnosis: Any  # kb.diagnose.Diagnosis

    def to_json(self) -> dict:
        return self.diagnosis.to_json()

    def text(self) -> str:
        from kb.diagnose import report

        return report(self.diagnosis)


class WhyResult(Result):
    why: dict  # kb.diagnose.why: one rule's or finding's conditions on this run

    def to_json(self) -> dict:
        return self.why

    def text(self) -> str:
        from kb.diagnose import why_report

        return why_report(self.why)


class LaunchResult(Result):
    plan: Any  # kb.launch.LaunchPlan
    model: str  # as named by the user or its config
    hardware: Hardware

    def to_json(self) -> dict:
        return self.plan.model_dump(mode="json")

    def text(self) -> str:
        from kb.launch import report

        return report(self.plan, self.model, self.hardware)


class ReportFile(Result):
    path: Path
    size: int  # bytes

    def to_json(self) -> dict:
        return {"path": str(self.path), "bytes": self.size}

    def text(self) -> str:
        return f"report written to {self.path} ({self.size / 1024:,.0f} KB, one self-contained HTML file)"


class AttachOutcome(Result):
    result: Any  # kb.attach.AttachResult
    report: ReportFile | None = None

    def to_json(self) -> dict:
        return self.result.to_json()

    def text(self) -> str:
        from kb.attach import report

        return report(self.result)


class CompareResult(Result):
    comparison: Any  # kb.compare.Comparison
    fail_on_regression: float | None = None  # percent
    report: ReportFile | None = None

    def to_json(self) -> dict:
        return self.comparison.to_json(self.fail_on_regression)

    def text(self) -> str:
        from kb.compare import table

        return table(self.comparison, self.fail_on_regression)

    @property
    def regressed(self) -> bool:
        return self.fail_on_regression is not None and bool(self.comparison.regressions(self.fail_on_regression))


# ------------------------------------------------------------------ a live server


def _kept(n: int, out: Path | None) -> str:
    if out is None:
        return f"{n} finished level{'s' * (n != 1)} (not kept: no output file)"
    return f"{n} finished level{'s' * (n != 1)} kept in {out}"


class ProbeOutcome(Result):
    probe: Any  # kb.live.probe.ProbeResult

    def to_json(self) -> dict:
        return self.probe.model_dump(mode="json")

    def text(self) -> str:
        from kb.live.probe import report

        return report(self.probe)


class SweepOutcome(Result):
    probe: Any  # kb.live.probe.ProbeResult
    sweep: Any  # kb.live.sweep.SweepResult
    out: Path | None = None
    found: Any = None  # kb.live.slo.FindMax, for a find-max search
    unit: str = "concurrent requests"
    max_level: float | None = None

    def to_json(self) -> dict:
        from kb.live.doctor import level_summary

        p, res, found = self.probe, self.sweep, self.found
        return {"url": p.url, "engine": p.engine, "version": p.version, "model": p.model,
                "input_len": res.input_len, "output_len": res.output_len, "prompt_tokens": res.prompt_tokens,
                "out": str(self.out) if self.out else None, "levels": [level_summary(r) for r in res.levels],
                "find_max": None if found is None else {"best": found.best, "broke_at": found.broke_at,
                                                        "why": found.why, "tried": found.tried, "unit": self.unit},
                "interrupted": res.interrupted, "error": res.error, "warnings": res.warnings}

    def text(self) -> str:
        from kb.live.sweep import table

        p, res, found = self.probe, self.sweep, self.found
        out = [f"kb sweep — {p.url} · {p.engine or 'unknown engine'} {p.version or ''} · {p.model}".replace("  ", " "),
               f"  prompts {res.prompt_tokens or '?'} tokens ({res.prompt_words} words), {res.output_len} output "
               "tokens"]
        if res.levels:
            out.append(table(res.levels))
        out += [f"warning: {w}" for w in res.warnings]
        if found is not None:
            out.append(f"highest level meeting the SLO: {found.best if found.best is not None else 'none'} {self.unit}"
                       + (f"; broke at {found.broke_at:g}: {'; '.join(found.why)}" if found.broke_at is not None
                          else f" (the ceiling, max_level {self.max_level:g}, still meets it)")
                       + f"  [tried {', '.join(f'{t:g}' for t in found.tried)}]")
        if self.out and res.levels and not res.error and not res.interrupted:
            out.append(f"written to {self.out}")
        return "\n".join(out)

    def stopped(self) -> str:
        """How many levels finished and where they are, for an error or an interruption."""
        return _kept(len(self.sweep.levels), self.out)


class DoctorOutcome(Result):
    result: Any  # kb.live.doctor.DoctorResult
    report: ReportFile | None = None

    def to_json(self) -> dict:
        return self.result.to_json()

    def text(self) -> str:
        from kb.live.doctor import report

        return report(self.result)

    def stopped(self) -> str:
        return _kept(len(self.result.sweep.levels), self.result.out)


class TuneOutcome(Result):
    result: Any  # kb.tune.TuneResult

    def to_json(self) -> dict:
        return self.result.to_json()

    def text(self) -> str:
        from kb.tune import report

        return report(self.result)


# ------------------------------------------------------------------ the facade


class KnowledgeBase:
    """One knowledge-base directory (findings index + manifest) and every command on it."""

    def __init__(self, home: Path | str | None = None):
        self.store = Store(Path(home) if home else None)

    @property
    def home(self) -> Path:
        return self.store.home

    def findings(self) -> list[Finding]:
        """Every indexed record (shipped and your own findings), after a sync."""
        from kb import index

        return self.store.read(load_findings, index.all_records)

    # -------------------------------------------------------------- knowledge

    def ingest(self, paths: Sequence[Path]) -> IngestResult:
        """Index findings files (unchanged files cost nothing) and say what each run file is."""
        from ingest.detect import split_paths
        from ingest.run import read_run, require_named
        from kb.store import not_findings

        paths = [Path(p) for p in paths]
        findings, evidence, skipped = split_paths(paths, exclude=not_findings)
        ev = read_run(evidence) if evidence else None
        run_files = (ev.files if ev else []) + [{"path": str(p), "skipped": why} for p, why in skipped]
        require_named(paths, run_files)  # before anything is stored
        rep = self.store.sync(load_findings, findings)
        asked = {str(p.resolve()) for p in findings}
        rows = [fr for fr in rep.files if fr.status != "unchanged" or str(Path(fr.path).resolve()) in asked]
        return IngestResult(findings=[IngestedFile(path=fr.path, status=fr.status,
                                                   records=[ingest_row(r) for r in fr.records]) for fr in rows],
                            evidence=run_files, warnings=ev.warnings if ev else [], bench=bool(ev and ev.bench))

    def reindex(self) -> ReindexResult:
        rep = self.store.reindex(load_findings)
        return ReindexResult(files=len([f for f in rep.files if f.status != "removed"]),
                             records=sum(len(f.records) for f in rep.files))

    def ask(self, question: str, run: Sequence[Path] | None = None, limit: int = 5, gpu: str | None = None,
            config: str | None = None, engine: str | None = None) -> AskResult:
        """Past findings for a question; with `run` (this run's files), ranked by what its
        diagnosis recommends too."""
        from kb.search import ask

        diagnosis, boost = None, None
        if run:
            diagnosis = self.diagnose(run, config=config, gpu=gpu, engine=engine, ranked_by_text=False).diagnosis
            top = max((r.score for r in diagnosis.recommendations), default=0) or 1
            boost = {}
            for r in diagnosis.recommendations:
                boost[r.fix_class] = max(boost.get(r.fix_class, 0), r.score / top)
        answers = self.store.read(load_findings, lambda d: ask(d, question, limit, boost))
        return AskResult(question=question, answers=answers, diagnosis=diagnosis)

    def show(self, finding_id: str) -> ShowResult:
        from kb import index

        f = self.store.read(load_findings, lambda d: index.get(d, finding_id))
        if f is None:
            raise NotFoundError(f"no finding with id {finding_id!r} (try `kb ask`)")
        return ShowResult(finding=f)

    def rules(self, rule_id: str | None = None, thresholds: str | Path | None = None) -> RulesResult:
        """Every rule (id, name, severity, fix class, needed evidence), or rule `rule_id`
        explained with its thresholds (a TOML file's values over the defaults)."""
        from kb.rules import describe
        from kb.rules.registry import load_thresholds

        if rule_id is None:
            return RulesResult(rules=[describe.row(r) for r in describe.RULES])
        return RulesResult(explained=describe.explain(rule_id, load_thresholds(thresholds and str(thresholds))))

    # -------------------------------------------------------------- a run's evidence

    def read_run(self, paths: Sequence[Path], config: str | None = None, gpu: str | None = None,
                 engine: str | None = None, launch: str | None = None):
        """Everything the files (and settings) say about one run: kb.evidence.RunEvidence."""
        from ingest.run import read_run

        check_engine(engine)
        return read_run([Path(p) for p in paths], config=config, gpu=gpu, engine=engine, launch=launch)

    def signals(self, paths: Sequence[Path], config: str | None = None, gpu: str | None = None,
                engine: str | None = None, launch: str | None = None,
                thresholds: str | Path | None = None) -> SignalsResult:
        """The symptoms a run shows, with their evidence. `thresholds`: a TOML file of overrides."""
        from kb.rules.registry import load_thresholds
        from kb.signals import detect

        ev = self.read_run(paths, config, gpu, engine, launch)
        return SignalsResult(files=ev.files, signals=detect(ev, load_thresholds(thresholds and str(thresholds))),
                             warnings=ev.warnings)

    def fleet(self, query, thresholds: str | Path | None = None, diagnose: bool = False) -> FleetResult:
        """Every vLLM/sglang instance a Prometheus scrapes (`query`: kb.fleet.Query); with
        `diagnose`, the worst instance diagnosed against the findings."""
        from kb.fleet import from_prometheus
        from kb.rules.registry import load_thresholds

        th = load_thresholds(thresholds and str(thresholds))
        fleet = from_prometheus(query, th, self.findings() if diagnose else None)
        return FleetResult(fleet=fleet, diagnosed=diagnose)

    def diagnose(self, paths: Sequence[Path], config: str | None = None, gpu: str | None = None,
                 engine: str | None = None, launch: str | None = None, thresholds: str | Path | None = None,
                 ranked_by_text: bool = True) -> DiagnoseResult:
        """Signals, then ranked recommendations with exact commands and the findings behind
        them. `ranked_by_text`: findings whose words resemble the run's rank higher (the
        index `kb ask` uses)."""
        from kb import index
        from kb.diagnose import diagnose
        from kb.rules.registry import load_thresholds
        from kb.search import searcher

        ev = self.read_run(paths, config, gpu, engine, launch)
        th = load_thresholds(thresholds and str(thresholds))
        d = self.store.read(load_findings, lambda idx: diagnose(ev, index.all_records(idx), th,
                                                                searcher(idx) if ranked_by_text else None))
        return DiagnoseResult(diagnosis=d)

    def why(self, paths: Sequence[Path], ident: str, **run) -> WhyResult:
        """Which conditions of rule or finding `ident` held, failed or were unknown on this run."""
        from kb.diagnose import why

        return WhyResult(why=why(self.diagnose(paths, **run).diagnosis, ident))

    def plan_launch(self, model: str, gpus: str, engine: str, context: int | None = None,
                    goal: str = "throughput", version: str | None = None, model_path: str | None = None,
                    workload: str | None = None, dataset: str | None = None,
                    concurrency: int | None = None) -> LaunchResult:
        """A launch command for `model` (config.json, model directory or cached repo id) on
        `gpus` ("8x H100"), sized for the workload, every flag explained."""
        from ingest.hf_config import load_profile
        from ingest.nvidia_smi import hardware_from_string
        from ingest.run import read_run
        from kb.flags import catalog
        from kb.launch import plan, workload_from, workload_from_runs

        check_engine(engine)
        if not engine:
            raise UsageError("engine: give sglang or vllm")
        check_goal(goal)
        profile = load_profile(model)
        hw, warnings = hardware_from_string(gpus)
        spec = Path(model)
        path = model_path or (str(spec.parent) if spec.is_file() else model)
        if model_path:
            profile = profile.model_copy(update={"name": model_path})
        if workload and Path(workload).exists():
            wl = workload_from_runs(read_run([Path(workload)]).bench, concurrency, workload)
        else:
            wl = workload_from(workload, dataset, concurrency, engine)
        p = plan(profile, hw, engine, catalog(engine, version), path, context, goal, wl)
        p.notes = warnings + p.notes
        return LaunchResult(plan=p, model=profile.name or model, hardware=hw)

    def attach(self, request, report: Path | None = None) -> AttachOutcome:
        """Record what a run taught as a finding (`request`: kb.attach.Request); with
        `report`, also the before/after HTML report."""
        from kb import report as html
        from kb.attach import attach

        check_engine(request.engine)
        if report:
            _require_plots()
        res = attach(request, self.store)
        written = None
        if report:
            rep = html.from_attach(request.before, request.after, request.config, request.gpu, request.engine)
            written = ReportFile(path=report, size=html.write(rep, report))
        return AttachOutcome(result=res, report=written)

    def report(self, paths: Sequence[Path], out: Path, config: str | None = None, gpu: str | None = None,
               engine: str | None = None, launch: str | None = None,
               thresholds: str | Path | None = None) -> ReportFile:
        """One self-contained HTML page of a run (or of a saved `kb diagnose/doctor --json`)."""
        from kb import report as html
        from kb.rules.registry import load_thresholds

        check_engine(engine)
        _require_plots()
        paths = [Path(p) for p in paths]
        th = load_thresholds(thresholds and str(thresholds))
        saved = [(p, s) for p in paths if (s := html.load_saved(p))]
        if saved and len(paths) > 1:
            raise UsageError("paths: a saved diagnosis is reported on its own")
        if saved:
            rep = html.from_saved(saved[0][0], *saved[0][1], thresholds=th)
        else:
            d = self.diagnose(paths, config, gpu, engine, launch, thresholds, ranked_by_text=False).diagnosis
            rep = html.from_diagnosis(d, th, name=", ".join(p.name for p in paths))
        return ReportFile(path=out, size=html.write(rep, out))

    def compare(self, runs: Sequence[Path], noise: float = 3.0, fail_on_regression: float | None = None,
                report: Path | None = None) -> CompareResult:
        """Runs aligned by load and workload (the first is the baseline): per level and
        metric the delta, the noise band (percent) and a verdict."""
        from kb import report as html
        from kb.compare import compare

        if len(runs) < 2:
            raise UsageError("runs: give two runs or more, the baseline first")
        if fail_on_regression is not None and fail_on_regression < 0:
            raise UsageError(f"fail_on_regression: expected a percentage of 0 or more, got {fail_on_regression:g}")
        if report:
            _require_plots()
        c = compare([[Path(p)] for p in runs], noise / 100)
        written = ReportFile(path=report, size=html.write(html.from_comparison(c), report)) if report else None
        return CompareResult(comparison=c, fail_on_regression=fail_on_regression, report=written)

    # -------------------------------------------------------------- a live server

    def probe(self, url: str, api_key: str | None = None, timeouts=None) -> ProbeOutcome:
        """Engine, version, model, context length and tuning arguments of a running server."""
        from kb.live.probe import probe

        return ProbeOutcome(probe=probe(url, api_key, timeouts))

    def sweep(self, url: str, options, api_key: str | None = None, out: Path | None = None,
              find_max: bool = False, max_level: float = 1024, probe_timeouts=None) -> SweepOutcome:
        """Streaming load over the levels of `options` (kb.live.sweep.SweepOptions); with
        `find_max`, the highest level meeting options.slo, up to `max_level`."""
        from kb.live.probe import probe
        from kb.live.sweep import sweep, sweep_find_max

        if find_max and not options.slo:
            raise UsageError("find_max needs an SLO: the objectives a level must meet")
        p = probe(url, api_key, probe_timeouts)
        found = None
        if find_max:
            found, res = sweep_find_max(p, options, max_level, api_key, out)
        else:
            res = sweep(p, options, api_key, out)
        return SweepOutcome(probe=p, sweep=res, out=out, found=found, max_level=max_level,
                            unit="req/s" if options.rate else "concurrent requests")

    def doctor(self, url: str, options, out: Path | None = None, api_key: str | None = None,
               launch: str | None = None, log: Path | None = None, config: str | None = None,
               gpu: str | None = None, thresholds: str | Path | None = None, probe_timeouts=None,
               report: Path | None = None) -> DoctorOutcome:
        """Probe + sweep + diagnose a running server. The sweep goes to `out` (default
        HOME/runs/doctor-HOST-PORT-TIME.jsonl); `report` also writes the HTML report (even
        when the sweep stopped early: its finished levels are diagnosed)."""
        from kb import report as html
        from kb.live.doctor import default_out, doctor
        from kb.rules.registry import load_thresholds

        if report:
            _require_plots()
        th = load_thresholds(thresholds and str(thresholds))
        target = out or default_out(self.home, url)
        r = doctor(url, options, self.findings(), target, api_key=api_key, launch=launch, log=log, config=config,
                   gpu=gpu, thresholds=th, timeouts=probe_timeouts)
        written = None
        if report:
            written = ReportFile(path=report, size=html.write(html.from_diagnosis(r.diagnosis, th,
                                                                                  name=target.name), report))
        return DoctorOutcome(result=r, report=written)

    def tune(self, options) -> TuneOutcome:
        """Start the server, sweep, diagnose, try kb's changes one by one, keep what works
        and record it (`options`: kb.tune.TuneOptions; workdir None: HOME/runs/tune-TIME)."""
        import time

        from kb.tune import tune

        check_goal(options.goal)
        if options.workdir is None:
            options.workdir = self.home / "runs" / f"tune-{time.strftime('%Y%m%d-%H%M%S')}"
        return TuneOutcome(result=tune(options, self.findings(), self.store))


def _require_plots() -> None:
    """Fail before any work when matplotlib is missing (naming what to install)."""
    from kb.plots import require

    require()
