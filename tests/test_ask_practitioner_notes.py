"""A team's own notes, ingested next to the shipped findings, must answer questions
about what only they say. Seven public practitioner documents (tests/data/
practitioner_notes, SOURCES.md names each URL) and 40 questions labelled with the
section that answers them, written before any ranking change was made for them."""

import json
from pathlib import Path

import pytest
from conftest import DATA

from ingest.detect import load_findings
from kb.search import ask
from kb.store import Store

NOTES = DATA / "practitioner_notes"
QUESTIONS = json.loads((NOTES / "questions.json").read_text())


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("kbhome"))
    store.sync(load_findings, sorted(NOTES.glob("*.md")))  # the shipped findings come with every sync
    return store.index_dir


def answers(f, q) -> bool:
    """True when finding `f` is a labelled section of the question's document."""
    wanted = [(q["doc"], s) for s in q["sections"]] + [tuple(x) for x in q.get("also", [])]
    path = Path(f.sources[0].path).name if f.sources and f.sources[0].path else ""
    return any(path == doc and f.title.endswith(section) for doc, section in wanted)


def ranks(index_dir) -> list[int | None]:
    out = []
    for q in QUESTIONS:
        found = [a.finding for a in ask(index_dir, q["q"], limit=10)]
        out.append(next((i for i, f in enumerate(found, 1) if answers(f, q)), None))
    return out


def test_labels_name_sections_that_exist(index_dir):
    from kb import index as kbindex

    records = [f for f in kbindex.all_records(index_dir) if f.sources and f.sources[0].path]
    for q in QUESTIONS:
        for doc, section in [(q["doc"], s) for s in q["sections"]] + [tuple(x) for x in q.get("also", [])]:
            assert any(Path(f.sources[0].path).name == doc and f.title.endswith(section) for f in records), (doc,
                                                                                                             section)


def test_own_notes_answer_within_the_top_three(index_dir):
    r = ranks(index_dir)
    n = len(r)
    hit1 = sum(x == 1 for x in r) / n
    hit3 = sum(x is not None and x <= 3 for x in r) / n
    hit5 = sum(x is not None and x <= 5 for x in r) / n
    mrr = sum(1 / x for x in r if x) / n
    print(f"\npractitioner notes ({n} questions): hit@1 {hit1:.2f}, hit@3 {hit3:.2f}, hit@5 {hit5:.2f}, MRR {mrr:.3f}")
    for q, x in zip(QUESTIONS, r, strict=True):
        if x is None or x > 3:
            print(f"  rank {x}: {q['q']}")
    assert n >= 30
    assert hit3 >= 0.9 and hit5 >= 0.95
