"""Fleets: diagnose every vLLM / sglang instance Prometheus scrapes (issue 19).

    collect.py  the PromQL kb sends, the time range and the bounds (kb/live/promapi.py talks HTTP)
    ingest/prometheus.py  the answers → one ServerTrace per instance
    report.py   signals per instance, fleet-wide vs confined verdicts, the worst instance, the report
"""

from __future__ import annotations

from dataclasses import dataclass

from kb.diagnose import diagnose
from kb.fleet.collect import collect, duration, time_range
from kb.fleet.report import build
from kb.live.promapi import PromApi


@dataclass
class Query:
    url: str
    selector: str | None = None
    since: str | None = None
    start: str | None = None
    end: str | None = None
    step: str = "15s"
    token: str | None = None
    user: str | None = None


def from_prometheus(q: Query, thresholds: dict | None = None, findings: list | None = None):
    """The fleet report; with `findings`, the worst instance is diagnosed too (kb diagnose).
    Raises kb.errors.ServerError for Prometheus failures, kb.errors.UsageError for bad settings."""
    start, end = time_range(q.since, q.start, q.end)
    step = duration(q.step, "step")
    with PromApi(q.url, token=q.token, user=q.user) as api:
        answers = collect(api, q.selector, start, end, step)
    fleet = build(answers, thresholds)
    if findings is not None:
        fleet.diagnosis = diagnose(fleet.worst.ev, findings, thresholds)
        router = next((v for v in fleet.verdicts if v.scope == "confined" and "router" in v.text), None)
        if router:
            fleet.diagnosis.warnings.insert(0, f"this cap binds on {', '.join(router.instances)} only while other "
                                               f"instances have room: fix the routing first (see Fleet above)")
    return fleet
