"""Every rule against real-format evidence: tests/rules/KBxxx/fires/CASE/ must make the
rule propose its fix, tests/rules/KBxxx/quiet/CASE/ must not.

A case folder holds evidence files as kb reads them (a launch command, a server log,
benchmark output, config.json, nvidia-smi output) and an optional case.json: read_run
options ("gpu", "engine"; "config" relative to the case), "expect" (text the rule's
recommendation must contain: a flag change, a command) and "why" (what the case shows).
The whole pipeline runs: files → evidence → signals → `kb diagnose` with no findings."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ingest.run import read_run
from kb.diagnose import diagnose
from kb.records import SEVERITY_ORDER
from kb.rules import registry
from kb.rules.base import RuleContext
from kb.signals import DETECTORS

ROOT = Path(__file__).parent / "rules"
KINDS = ("fires", "quiet")
CASES = sorted((d.parent.parent.name, d.parent.name, d) for d in ROOT.glob("KB*/*/*") if d.is_dir())


def _diagnose(case: Path):
    opts = json.loads((case / "case.json").read_text()) if (case / "case.json").exists() else {}
    files = sorted(p for p in case.iterdir() if p.name != "case.json")
    config = str(case / opts["config"]) if opts.get("config") else None
    ev = read_run(files, config=config, gpu=opts.get("gpu"), engine=opts.get("engine"))
    return diagnose(ev, []), opts


def test_every_rule_has_cases_that_fire_and_cases_that_stay_quiet():
    have = {(rule, kind) for rule, kind, _ in CASES}
    lacking = [f"{r.id}/{k}" for r in registry.RULES for k in KINDS if (r.id, k) not in have]
    assert not lacking, f"rules without fixtures: {lacking}"
    assert {rule for rule, _, _ in CASES} <= {r.id for r in registry.RULES}
    assert {kind for _, kind, _ in CASES} <= set(KINDS)


@pytest.mark.parametrize("rule_id,kind,case", CASES, ids=[f"{r}-{k}-{c.name}" for r, k, c in CASES])
def test_rule_fixture(rule_id, kind, case):
    d, opts = _diagnose(case)
    rule = registry.get(rule_id)
    recs = [r for r in d.recommendations if r.rule == f"{rule.id} {rule.name}"]
    if kind == "quiet":
        assert not recs, f"{rule_id} fired on {case.name}: {recs[0].title}"
        return
    assert recs, f"{rule_id} silent on {case.name}; signals {[s.id for s in d.signals]}; warnings {d.warnings}"
    assert opts.get("expect"), f"{case}: a fires case names what the rule must propose (case.json expect)"
    rec = recs[0]
    assert SEVERITY_ORDER[rec.severity] <= SEVERITY_ORDER[rule.severity], "severity above the rule's declared maximum"
    text = "\n".join([rec.title, *rec.commands, *(f"{f.flag} {f.new}" for f in rec.flags)])
    for want in opts.get("expect", []):
        assert want in text, f"{want!r} not in:\n{text}"


@pytest.mark.parametrize("rule_id,kind,case", CASES, ids=[f"{r}-{k}-{c.name}" for r, k, c in CASES])
def test_rule_metadata_is_truthful_on_fixture(rule_id, kind, case):
    """For every rule on every case: with a needed kind of evidence absent its check (run
    without the registry's gate) stays quiet, so the gate changes nothing; and a proposal
    leans only on signals the rule declares it reads."""
    d, _ = _diagnose(case)
    if not d.engine:
        return
    ctx = RuleContext(ev=d.ev, signals={s.id: s for s in d.signals}, engine=d.engine, catalog=d.catalog)
    for rule in registry.RULES:
        limits = {t.name: t.default for t in rule.thresholds}
        p = rule.check(replace(ctx, thresholds=limits))
        if registry.missing(rule, ctx) or d.engine not in rule.engines:
            assert p is None, f"{rule.id} fires without {registry.missing(rule, ctx)} (engine {d.engine})"
        if p:
            undeclared = {s for s in p.supporting if s in DETECTORS} - set(rule.signals)
            assert not undeclared, f"{rule.id} leans on undeclared signals {undeclared}"
