"""Answer quality of `kb ask` on a held-out question set, against two baselines
over the same shipped findings, in the same run:

- BM25: Whoosh with the default StandardAnalyzer over one field (each finding's
  raw markdown section), the question's terms OR-ed, no query understanding;
- grep: for each question word (lowercased, stop words removed) `grep -il WORD`
  over one file per finding; findings ranked by how many words they contain
  (ties keep the findings' file order).

    python benchmarks/ask_quality.py [--quick] [--questions FILE] [--misses]
    python benchmarks/ask_quality.py --practitioner [--misses]

The questions (benchmarks/data/ask_heldout.json) were labelled from the findings
before any ranking was run; they measure kb and are never used to tune it.
benchmarks/data/ask_heldout_2026.json (--questions) holds questions on the 2026 topics,
written from public threads before the findings for those topics existed, so they are
labelled by fix class ("expect_classes") rather than by finding id: a returned finding
is a hit when it carries one of the question's fix classes.
--practitioner measures the other case: seven public practitioner documents
(tests/data/practitioner_notes, SOURCES.md) ingested next to the shipped findings, and
their 40 questions labelled with the document section that answers each (a hit = a
returned record of that document whose title ends with a labelled section).
Prints a table; exits 0. Everything is built under a temp dir and removed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest.detect import load_findings  # noqa: E402
from ingest.markdown import finding_spans  # noqa: E402
from kb.search import ask  # noqa: E402
from kb.store import Store, findings_files, shipped_findings_dir  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "data" / "ask_heldout.json"
QUESTIONS_2026 = ROOT / "benchmarks" / "data" / "ask_heldout_2026.json"
HELD_OUT = (QUESTIONS, QUESTIONS_2026)
DEPTH = 10  # ranks looked at for MRR
QUICK_QUESTIONS = 12
NOTES = ROOT / "tests" / "data" / "practitioner_notes"


def finding_sections() -> dict[str, str]:
    """Finding id → its raw markdown section, in file order."""
    out = {}
    for path in findings_files(shipped_findings_dir()):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for fid, (start, end) in finding_spans(text).items():
            out[fid] = "\n".join(lines[start - 1:end])
    return out


# ------------------------------------------------------------------ rankers


def kb_ranker(tmp: Path):
    """`kb ask` on an index built from the shipped findings in a fresh KB home."""
    store = Store(tmp / "kbhome")
    store.sync(load_findings)
    return lambda q: [a.finding.id for a in ask(store.index_dir, q, limit=DEPTH)]


def bm25_ranker(tmp: Path, sections: dict[str, str]):
    """Plain BM25 over one field with Whoosh's StandardAnalyzer."""
    from whoosh import index, query as Q
    from whoosh.analysis import StandardAnalyzer
    from whoosh.fields import ID, TEXT, Schema

    analyzer = StandardAnalyzer()
    (tmp / "bm25").mkdir()
    ix = index.create_in(str(tmp / "bm25"), Schema(id=ID(stored=True), body=TEXT(analyzer=analyzer)))
    with ix.writer() as w:
        for fid, text in sections.items():
            w.add_document(id=fid, body=text)

    def rank(q: str) -> list[str]:
        terms = dict.fromkeys(t.text for t in analyzer(q))
        if not terms:
            return []
        with ix.searcher() as s:
            return [hit["id"] for hit in s.search(Q.Or([Q.Term("body", t) for t in terms]), limit=DEPTH)]

    return rank


def question_words(q: str) -> list[str]:
    from whoosh.analysis import STOP_WORDS

    words = (re.sub(r"^\W+|\W+$", "", w) for w in q.lower().split())
    return [w for w in dict.fromkeys(words) if w and w not in STOP_WORDS]


def grep_ranker(tmp: Path, sections: dict[str, str]):
    """Count, per finding file, how many question words `grep -il` finds in it."""
    folder = tmp / "grep"
    folder.mkdir()
    order = {}
    for i, (fid, text) in enumerate(sections.items()):
        (folder / f"{fid}.md").write_text(text, encoding="utf-8")
        order[fid] = i
    files = sorted(str(p) for p in folder.iterdir())

    def rank(q: str) -> list[str]:
        hits: Counter[str] = Counter()
        for word in question_words(q):
            # -F: a word is matched literally ("0.35", "c=256"), as a person grepping means it
            out = subprocess.run(["grep", "-ilF", "-e", word, *files], capture_output=True, text=True).stdout
            hits.update(Path(line).stem for line in out.splitlines())
        return sorted(hits, key=lambda fid: (-hits[fid], order[fid]))[:DEPTH]

    return rank


# ------------------------------------------------------------------ scoring


def finding_classes() -> dict[str, set[str]]:
    """Finding id → its fix classes (for questions labelled by class)."""
    return {f.id: set(f.fix_classes) for path in findings_files(shipped_findings_dir())
            for f in load_findings(path, str(path))}


def is_hit(fid: str, q: dict, classes: dict[str, set[str]]) -> bool:
    """A question names either the findings that answer it ("expect") or the fix
    classes an answer must carry ("expect_classes")."""
    if "expect_classes" in q:
        return bool(classes.get(fid, set()) & set(q["expect_classes"]))
    return fid in q["expect"]


def reciprocal_rank(ranked: list[str], q: dict, classes: dict[str, set[str]]) -> float:
    return next((1 / i for i, fid in enumerate(ranked[:DEPTH], 1) if is_hit(fid, q, classes)), 0.0)


def score(rank, questions: list[dict], classes: dict[str, set[str]]) -> dict:
    t = time.perf_counter()
    rr = [reciprocal_rank(rank(q["q"]), q, classes) for q in questions]
    n = len(rr)
    return {"hit@1": sum(r == 1 for r in rr) / n, "hit@3": sum(r >= 1 / 3 for r in rr) / n,
            "mrr": sum(rr) / n, "seconds": time.perf_counter() - t, "rr": rr}


def print_table(results: dict[str, dict], n: int, source: Path = QUESTIONS, by_class: bool = False) -> None:
    held = any(source.resolve() == h.resolve() for h in HELD_OUT)
    kind = f"held-out questions ({source.name})" if held else f"questions of {source.name} (not held out)"
    label = "; a hit = a finding carrying a labelled fix class" if by_class else ""
    print(f"{kind}: {n}; findings: shipped; MRR over the top {DEPTH}{label}")
    print(f"{'ranker':<34}{'hit@1':>8}{'hit@3':>8}{'MRR':>8}{'seconds':>10}")
    for name, r in results.items():
        print(f"{name:<34}{r['hit@1']:>8.2f}{r['hit@3']:>8.2f}{r['mrr']:>8.3f}{r['seconds']:>10.1f}")


def print_misses(questions: list[dict], results: dict[str, dict]) -> None:
    kb = next(iter(results.values()))
    for q, r in zip(questions, kb["rr"], strict=True):
        if r < 1:
            print(f"  rr {r:.2f}  {q['q']}")


def practitioner(misses: bool) -> int:
    """kb ask with the practitioner documents ingested next to the shipped findings."""
    questions = json.loads((NOTES / "questions.json").read_text())

    def hit(f, q) -> bool:
        wanted = [(q["doc"], s) for s in q["sections"]] + [tuple(x) for x in q.get("also", [])]
        path = Path(f.sources[0].path).name if f.sources and f.sources[0].path else ""
        return any(path == doc and f.title.endswith(section) for doc, section in wanted)

    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "kbhome")
        store.sync(load_findings, sorted(NOTES.glob("*.md")))
        t = time.perf_counter()
        ranks = []
        for q in questions:
            found = [a.finding for a in ask(store.index_dir, q["q"], limit=DEPTH)]
            ranks.append(next((i for i, f in enumerate(found, 1) if hit(f, q)), None))
        seconds = time.perf_counter() - t
    n = len(ranks)
    print(f"practitioner notes ({NOTES.relative_to(ROOT)}): {n} questions; shipped findings + 7 documents; "
          f"MRR over the top {DEPTH}")
    print(f"{'ranker':<34}{'hit@1':>8}{'hit@3':>8}{'hit@5':>8}{'MRR':>8}{'seconds':>10}")
    print(f"{'kb ask':<34}{sum(r == 1 for r in ranks if r) / n:>8.2f}"
          f"{sum(1 for r in ranks if r and r <= 3) / n:>8.2f}"
          f"{sum(1 for r in ranks if r and r <= 5) / n:>8.2f}{sum(1 / r for r in ranks if r) / n:>8.3f}"
          f"{seconds:>10.1f}")
    if misses:
        for q, r in zip(questions, ranks, strict=True):
            if r != 1:
                print(f"  rank {r}  {q['q']}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--quick", action="store_true", help=f"only the first {QUICK_QUESTIONS} questions")
    ap.add_argument("--misses", action="store_true", help="list the questions kb does not answer first")
    ap.add_argument("--practitioner", action="store_true",
                    help="the practitioner documents and their labelled questions, ingested next to the shipped "
                         "findings")
    args = ap.parse_args()
    if args.practitioner:
        return practitioner(args.misses)
    questions = json.loads(args.questions.read_text())
    if args.quick:
        questions = questions[:QUICK_QUESTIONS]
    sections = finding_sections()
    classes = finding_classes()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rankers = {"kb ask": kb_ranker(tmp),
                   "BM25 (Whoosh, StandardAnalyzer)": bm25_ranker(tmp, sections),
                   "grep -il word count": grep_ranker(tmp, sections)}
        results = {name: score(rank, questions, classes) for name, rank in rankers.items()}
    print_table(results, len(questions), args.questions, by_class=any("expect_classes" in q for q in questions))
    if args.misses:
        print("kb ask, questions whose first answer is not labelled:")
        print_misses(questions, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
