"""The diagnosis text path on prose alone: does `kb diagnose` propose the right class
when the evidence is a sentence or a paragraph?

    python benchmarks/diagnose_text_path.py [--verbose]

Two checks, neither on a diagnosis scenario set:
- questions: each `kb ask` dev question (tests/data/ask_questions.json and
  ask_dev_extra.json) written to a notes file and diagnosed; a hit is the fix class of
  one of the question's first two expected findings among the top 1 / top 3 proposals.
- symptoms: each shipped finding's own Symptoms lines as a notes file. The index ranks
  that finding first, so a miss here is the matcher's doing: a condition the prose's facts
  fail, a selection rule, or the order of proposals.
Prints hit@1, hit@3 and "recommended nothing" for each; exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _diagnose(tmp: Path, name: str, text: str, findings, search) -> list[str]:
    from ingest.run import read_run
    from kb.diagnose import diagnose

    p = tmp / name
    p.write_text(text + "\n")
    dx = diagnose(read_run([p]), findings, search=search)
    return [r.fix_class for r in dx.recommendations[:3]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--verbose", action="store_true", help="print every miss")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from diagnose_quality import findings_in_temp_home

    data = ROOT / "tests" / "data"
    questions = json.loads((data / "ask_questions.json").read_text()) + json.loads(
        (data / "ask_dev_extra.json").read_text())
    with tempfile.TemporaryDirectory(prefix="kb-dtp-") as tmp:
        tmp = Path(tmp)
        findings, search = findings_in_temp_home(tmp / "kbhome")
        by_id = {f.id: f for f in findings}
        cases = []
        for i, q in enumerate(questions):
            expected = [by_id[e] for e in q["expect"] if e in by_id and by_id[e].fix_classes][:2]
            if expected:
                cases.append(("questions", f"q{i}.txt", q["q"], {f.fix_classes[0] for f in expected}))
        for i, f in enumerate(f for f in findings if f.kind == "finding" and f.fix_classes and f.symptoms
                              and (f.fix or f.commands)):
            cases.append(("symptoms", f"s{i}.txt", "\n".join(f.symptoms), {f.fix_classes[0]}))
        totals: dict[str, list[int]] = {}
        for kind, name, text, want in cases:
            top = _diagnose(tmp, name, text, findings, search)
            t = totals.setdefault(kind, [0, 0, 0, 0])
            t[0] += 1
            t[1] += bool(top) and top[0] in want
            t[2] += bool(want & set(top))
            t[3] += not top
            if args.verbose and not want & set(top):
                print(f"miss [{kind}] {text[:100]!r}: want {sorted(want)}, got {top}")
    for kind, (n, h1, h3, empty) in totals.items():
        print(f"{kind:9}  n={n:3}  hit@1 {h1} ({h1 / n:.0%})  hit@3 {h3} ({h3 / n:.0%})  "
              f"recommended nothing {empty} ({empty / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
