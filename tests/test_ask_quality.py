"""Ranking is measured: a labelled question set (tests/data/ask_questions.json,
labelled from the findings' titles before any tuning) and its MRR."""

import json

import pytest

from conftest import DATA
from ingest.detect import load_findings
from kb.search import ask
from kb.store import Store

QUESTIONS = json.loads((DATA / "ask_questions.json").read_text())


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("kbhome"))
    store.sync(load_findings)
    return store.index_dir


def reciprocal_rank(index_dir, q):
    ids = [a.finding.id for a in ask(index_dir, q["q"], limit=10)]
    return next((1 / i for i, fid in enumerate(ids, 1) if fid in q["expect"]), 0.0)


def test_labels_name_shipped_findings(index_dir):
    from kb import index as kbindex

    known = {f.id for f in kbindex.all_records(index_dir)}
    for q in QUESTIONS:
        assert set(q["expect"]) <= known, q


def test_mean_reciprocal_rank(index_dir):
    rr = [reciprocal_rank(index_dir, q) for q in QUESTIONS]
    mrr = sum(rr) / len(rr)
    hit3 = sum(r >= 1 / 3 for r in rr) / len(rr)
    print(f"\nask quality on {len(rr)} questions: MRR {mrr:.3f}, hit@1 {sum(r == 1 for r in rr) / len(rr):.2f}, hit@3 {hit3:.2f}")
    assert mrr >= 0.6 and hit3 >= 0.7
