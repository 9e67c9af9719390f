"""`kb doctor URL`: probe the server, sweep it, diagnose the sweep.

The sweep's JSONL (with /metrics samples and the probed server arguments) is
read back through ingest.run like any benchmark file, together with the
server log (`--log`, only the stats lines written during the sweep count) and
the launch command (`--launch`), so the recommendations are diffs against what
is running and `kb diagnose` on the kept files gives the same answer.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ingest.hf_config import load_profile
from ingest.run import read_run
from kb.diagnose import diagnose, report as diag_report
from kb.errors import InputError, KbError, ServerError
from kb.live import client as cl
from kb.live.probe import ProbeResult, probe, report as probe_report
from kb.live.sweep import SweepOptions, SweepResult, sweep, table


@dataclass
class DoctorResult:
    probe: ProbeResult
    sweep: SweepResult
    out: Path
    diagnosis: object  # kb.diagnose.Diagnosis

    def to_json(self) -> dict:
        return {"probe": self.probe.model_dump(mode="json"),
                "sweep": {"out": str(self.out), "levels": [level_summary(r) for r in self.sweep.levels],
                          "interrupted": self.sweep.interrupted, "error": self.sweep.error,
                          "warnings": self.sweep.warnings},
                "diagnosis": self.diagnosis.to_json()}


def level_summary(row: dict) -> dict:
    """A sweep line without its raw /metrics samples, plus their maxima."""
    out = {k: v for k, v in row.items() if k not in ("kb_metrics", "server_info")}
    samples = (row.get("kb_metrics") or {}).get("samples") or []
    if samples:
        out["metrics_max"] = {k: max((s.get(k) or 0) for s in samples)
                              for k in ("running", "waiting", "kv_cache_usage")}
        out["metrics_samples"] = len(samples)
    return out


def default_out(home: Path, url: str) -> Path:
    u = cl.base_url(url)
    name = f"doctor-{u.host}-{u.port or ''}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl".replace(":", "_")
    return home / "runs" / name


def doctor(url: str, opts: SweepOptions, findings: list, out: Path, api_key: str | None = None,
           launch: str | None = None, log: Path | None = None, config: str | None = None, gpu: str | None = None,
           thresholds: dict | None = None, timeouts: cl.Timeouts | None = None) -> DoctorResult:
    """Probe, sweep (levels written to `out` as they finish), diagnose. A sweep that
    stops on a server error is still diagnosed from its finished levels; the caller
    reports the error after the report."""
    if log is not None:
        if not log.is_file():
            raise InputError(log, "no such file (the server log given with --log)")
        offset = os.path.getsize(log)
    p = probe(url, api_key, timeouts)
    res = sweep(p, opts, api_key, out)
    if not res.levels:
        if res.interrupted and not res.error:
            raise KeyboardInterrupt  # Ctrl-C before a level finished: nothing to diagnose (exit 130)
        raise ServerError(res.error or "no level finished")
    if config is None and p.model_path:
        config = _local_config(p.model_path)
    paths = [out] + ([log] if log is not None else [])
    since = {str(log): offset} if log is not None else None
    ev = read_run(paths, config=config, gpu=gpu, engine=p.engine, launch=launch, since=since)
    d = diagnose(ev, findings, thresholds)
    return DoctorResult(p, res, out, d)


def _local_config(model_path: str) -> str | None:
    """The served model's config.json when this machine has it (a local directory or
    the Hugging Face cache; nothing is downloaded), else None."""
    try:
        load_profile(model_path)
    except (KbError, OSError, ValueError):
        return None
    return model_path


def report(r: DoctorResult) -> str:
    parts = [probe_report(r.probe), "", f"Sweep ({len(r.sweep.levels)} levels, written to {r.out})",
             table(r.sweep.levels)]
    if r.sweep.prompt_tokens:
        parts.append(f"  prompts: {r.sweep.prompt_words} words = {r.sweep.prompt_tokens} tokens")
    for w in r.sweep.warnings:
        parts.append(f"warning: {w}")
    parts += ["", diag_report(r.diagnosis)]
    return "\n".join(parts)
