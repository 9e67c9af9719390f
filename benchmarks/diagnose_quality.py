"""Diagnosis quality: does `kb diagnose` rank the fix that actually worked?

    python benchmarks/diagnose_quality.py [--set DIR] [--json]

--set (alias --scenarios) picks the scenario directory; the default is
tests/data/diagnosis/ (the set the rules were improved on). The held-out set is
tests/data/diagnosis_heldout/ (same layout, collected later, never tuned on), and
tests/data/diagnosis_2026/ is the frozen 2026 set (37 cases on the 2026 topics, labelled
before kb was run, thin evidence such as one pasted paragraph; see its README).
tests/data/diagnosis_2026b/ is a second frozen 2026 set, collected and labelled
before kb was run on it, kept for an end-of-session generalisation check (see its README).
tests/data/diagnosis_2026c/ is a third frozen set, collected and labelled the same way
(see its README).
tests/data/diagnosis_dev/ is a development set of public cases that kb MAY be tuned on
(see its README); its score says nothing about generalisation.

Every directory under tests/data/diagnosis/ is one public case (an issue thread,
a pull request or a write-up) where people posted their evidence and a fix was
confirmed. Its scenario.json names the source, the GPUs, the engine, a model
config when we have the real one, and the confirmed fix class, labelled from the
thread before kb was run. The other files are the evidence as it was posted.

For each scenario the evidence files are read with ingest.run.read_run (the
directory's files minus scenario.json, with gpu/engine/config from scenario.json)
and diagnosed in-process by kb.diagnose.diagnose with the shipped findings
indexed in a temporary KB_HOME. Reported: hit@1 and hit@3 of the confirmed fix
class among the recommendations' fix classes, a table of every scenario, and for
each miss why kb missed it (evidence not read, signal missing, no rule for that
fix class, needed evidence absent, rule silent, or ranked too low); also the share of scenarios where kb
recommended nothing and, when a scenario lists several acceptable classes
(`fix_classes` in scenario.json, the confirmed class first), hit@3 of any of them.
Prints tables; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SCENARIOS = ROOT / "tests" / "data" / "diagnosis"
META = "scenario.json"

# what a file that holds these words was meant to give the parser
EXPECT = {
    "benchmark block": ("Serving Benchmark Result",),
    "launch command": ("sglang.launch_server", "vllm serve", "vllm.entrypoints", "sglang serve"),
    "sglang server log": ("Decode batch", "Prefill batch", "max_total_num_tokens=", "MoE kernel config",
                          "Capture cuda graph", "#retracted_reqs"),
    "vLLM server log": ("Avg prompt throughput", "Avg generation throughput", "GPU KV cache size",
                        "preempted by PreemptionMode"),
}


@dataclass
class Result:
    slug: str
    label: str
    engine: str | None
    top: list[str]
    all_classes: list[str]
    signals: list[str]
    files: list[dict]
    labels: list[str] = field(default_factory=list)  # all acceptable classes, the confirmed one first
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def hit1(self) -> bool:
        return bool(self.top) and self.top[0] == self.label

    @property
    def hit3(self) -> bool:
        return self.label in self.top[:3]

    @property
    def hit3_any(self) -> bool:
        return any(c in self.top[:3] for c in self.labels or [self.label])

    @property
    def empty(self) -> bool:
        return not self.all_classes


def load_scenarios(root: Path) -> list[tuple[Path, dict]]:
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        meta = d / META
        if meta.is_file():
            out.append((d, json.loads(meta.read_text())))
    return out


def evidence_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and p.name != META)


def findings_in_temp_home(home: Path):
    """The shipped findings, indexed in a throw-away KB_HOME (as `kb diagnose` does)."""
    from ingest.detect import load_findings
    from kb import index as kbindex
    from kb.store import Store

    os.environ["KB_HOME"] = str(home)
    os.environ.pop("KB_FINDINGS", None)
    from kb.search import searcher

    store = Store(home)
    store.sync(load_findings)
    return kbindex.all_records(store.index_dir), searcher(store.index_dir)


def why_missed(res: Result, ev, d: Path) -> list[str]:
    """Plain reasons, most basic first: evidence not read, evidence too thin for
    any signal, then rules and signals."""
    from kb.rules.base import RuleContext
    from kb.rules.registry import EVIDENCE, RULES, missing

    reasons = []
    files = evidence_files(d)
    kinds = {Path(f["path"]).name: f.get("kind") for f in ev.files}
    # 1. did the parser read what the files hold?
    for p in files:
        text = p.read_text(errors="replace")
        has = {what for what, words in EXPECT.items() if any(w in text for w in words)}
        if kinds.get(p.name) is None:
            if "benchmark block" in has and "Total token throughput" not in text.replace("Token", "token"):
                reasons.append(f"parser: {p.name} is a benchmark block cut before its throughput lines: "
                               "no benchmark run")
            elif "launch command" in has:
                reasons.append(f"parser: {p.name} holds a launch command in a form the parser does not take "
                               "(e.g. `docker run --entrypoint python3 IMAGE -m sglang.launch_server ...`)")
            elif p.name.startswith("backend-params"):
                reasons.append(f"parser: {p.name} lists server flags without a launch entry point; "
                               "they are not read as server arguments")
            else:
                reasons.append(f"parser: {p.name} not recognised")
            continue
        if "CUDA graph begin" in text and "bs=[" in text and not any(
                t.startup.get("cuda_graph_max_bs") for t in ev.traces):
            reasons.append(f"parser: {p.name} has the newer capture line "
                           "(`Capture target decode CUDA graph begin. ... bs=[...]`), not read: "
                           "largest captured batch unknown")
    if not ev.engine:
        reasons.append("no engine known: no recommendation can be written")
    # 2. is the evidence rich enough for any signal?
    points = ev.curve()
    if len(points) < 2:
        lv = ", ".join(f"{p.level:g}" for p in points) or "none"
        reasons.append(f"thin evidence: {len(points)} load level(s) ({lv}); throughput-plateau and "
                       "ttft-queueing need two or more")
    if not any(t.stats.get("samples") for t in ev.traces):
        reasons.append("thin evidence: no periodic server stats lines; running-cap, KV-pressure and "
                       "CUDA-graph signals need them")
    # 3. is there a rule for the confirmed fix class, and did it see its signals?
    rules = [r for r in RULES if r.fix_class == res.label]
    ctx = RuleContext(ev=ev, signals={}, engine=ev.engine or "", catalog=None)  # for the evidence a rule needs
    if not rules:
        reasons.append(f"no rule: kb has no rule proposing '{res.label}'")
    for rule in rules:
        seen = [s for s in rule.signals if s in res.signals]
        if res.label in res.all_classes:
            rank = res.all_classes.index(res.label) + 1
            reasons.append(f"ranked: {rule.id} {rule.name} fired but ranked {rank} of {len(res.all_classes)}")
        elif missing(rule, ctx):
            lacking = missing(rule, ctx)
            reasons.append(f"missing evidence: {rule.id} {rule.name} needs "
                           + "; ".join(" or ".join(EVIDENCE[k][0] for k in n.split("|")) for n in lacking))
        elif rule.signals and not seen:
            reasons.append(f"missing signal: {rule.id} {rule.name} reads {', '.join(rule.signals)}; "
                           "none was detected")
        else:
            reasons.append(f"rule silent: {rule.id} {rule.name} did not fire (it needs: {rule.reads})")
    if res.top:
        reasons.append("kb proposed instead: " + ", ".join(res.top[:3]))
    return reasons


def run_one(d: Path, meta: dict, findings, search=None) -> Result:
    from ingest.run import read_run
    from kb.diagnose import diagnose

    config = meta.get("config")
    if config:
        config = str(ROOT / config)
    ev = read_run(evidence_files(d), config=config, gpu=meta.get("gpu"), engine=meta.get("engine"))
    dx = diagnose(ev, findings, search=search)
    classes = [r.fix_class for r in dx.recommendations]
    label = meta["confirmed_fix_class"]
    res = Result(slug=d.name, label=label, engine=dx.engine, top=classes[:3],
                 all_classes=classes, signals=[s.id for s in dx.signals],
                 labels=meta.get("fix_classes") or [label],
                 files=[{"file": Path(f["path"]).name, "read": f.get("kind") or "skipped (not recognised)"}
                        for f in ev.files],
                 warnings=dx.warnings)
    if not res.hit3:
        res.reasons = why_missed(res, ev, d)
    return res


def table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", "--scenarios", dest="scenarios", type=Path, default=SCENARIOS,
                    help="scenario directory (default: tests/data/diagnosis; held-out: tests/data/diagnosis_heldout)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    args = ap.parse_args(argv)

    args.scenarios = args.scenarios.resolve()
    if not args.scenarios.is_dir():
        ap.error(f"--set {args.scenarios}: expected a directory of scenarios (one sub-directory per case)")
    scenarios = load_scenarios(args.scenarios)
    with tempfile.TemporaryDirectory(prefix="kb-dq-") as tmp:
        findings, search = findings_in_temp_home(Path(tmp) / "kbhome")
        results = [run_one(d, meta, findings, search) for d, meta in scenarios]

    n = len(results)
    h1 = sum(r.hit1 for r in results)
    h3 = sum(r.hit3 for r in results)
    h3_any = sum(r.hit3_any for r in results)
    empty = sum(r.empty for r in results)
    multi = any(len(r.labels) > 1 for r in results)
    if args.json:
        print(json.dumps({"scenarios": n, "hit@1": h1, "hit@3": h3, "hit@3 any labelled class": h3_any,
                          "recommended nothing": empty,
                          "results": [{**r.__dict__, "hit@1": r.hit1, "hit@3": r.hit3, "hit@3 any": r.hit3_any}
                                      for r in results]}, indent=2))
        return 0

    print(f"Diagnosis quality over {n} public scenarios "
          f"({args.scenarios.relative_to(ROOT) if args.scenarios.is_relative_to(ROOT) else args.scenarios})")
    print(f"  hit@1: {h1}/{n} ({h1 / n:.0%})   hit@3: {h3}/{n} ({h3 / n:.0%})" if n else "  no scenarios")
    if n:
        print(f"  recommended nothing: {empty}/{n} ({empty / n:.0%})")
    if n and multi:
        print(f"  hit@3, any labelled class: {h3_any}/{n} ({h3_any / n:.0%})")
    print()
    rows = [[r.slug, r.label, ", ".join(r.top) or "(none)", "hit@1" if r.hit1 else "hit@3" if r.hit3 else "miss"]
            for r in results]
    print(table(rows, ["scenario", "confirmed fix", "kb top 3", "result"]))

    by_class: dict[str, list[Result]] = {}
    for r in results:
        by_class.setdefault(r.label, []).append(r)
    print()
    print(table([[c, len(rs), sum(x.hit3 for x in rs)] for c, rs in sorted(by_class.items())],
                ["fix class", "scenarios", "hit@3"]))

    misses = [r for r in results if not r.hit3]
    causes: dict[str, int] = {}
    for r in misses:
        for kind in sorted({why.split(":", 1)[0] for why in r.reasons} - {"kb proposed instead"}):
            causes[kind] = causes.get(kind, 0) + 1
    print()
    print(table([[k, v] for k, v in sorted(causes.items(), key=lambda kv: -kv[1])],
                ["cause of miss (a miss can have several)", "scenarios"]))
    print()
    print(f"Misses ({len(misses)})")
    for r in misses:
        print(f"  {r.slug}  [{r.label}]")
        print(f"      signals: {', '.join(r.signals) or 'none'}")
        print("      files: " + "; ".join(f"{f['file']} -> {f['read']}" for f in r.files))
        for why in r.reasons:
            print(f"      why: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
