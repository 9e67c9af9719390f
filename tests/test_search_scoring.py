"""kb's flat BM25F scorer (kb.index._bm25f) gives whoosh's own scores and ranking for
kb's query (every analysed word OR-ed over every boosted field), on one segment and on
an index that grew by incremental updates (several segments, deleted documents)."""

import json

import pytest
from whoosh import query as Q
from whoosh.analysis import StemmingAnalyzer

from conftest import DATA
from ingest.detect import load_findings
from kb import index as kbindex
from kb.search import ask
from kb.store import Store
from kb.textnorm import understand_query

QUESTIONS = [q["q"] for q in json.loads((DATA / "ask_questions.json").read_text())]

NOTE = """# team notes

## {title}

- **ID:** {fid}
- **Symptoms:** {symptom}
- **Fix classes:** max-running-requests
- **Confidence:** medium
- **Sources:** https://example.org/{fid}
"""


def words(question):
    return list(dict.fromkeys(t.text for t in StemmingAnalyzer()(understand_query(question))))


def whoosh_ranking(s, ws, limit):
    q = Q.Or([Q.Term(field, w) for field in kbindex.BOOSTS for w in ws])
    return [(hit.docnum, hit.score) for hit in s.search(q, limit=None)][:limit]


def assert_same(s, question, limit=20):
    ws = words(question)
    ours, theirs = kbindex._bm25f(s, ws, limit), whoosh_ranking(s, ws, limit)
    assert [d for d, _ in ours] == [d for d, _ in theirs], question
    for (_, a), (_, b) in zip(ours, theirs):
        assert a == pytest.approx(b, rel=1e-12), question


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("kbhome"))
    store.sync(load_findings)
    return store


def test_same_scores_as_whoosh_on_one_segment(shipped):
    ix = kbindex._open(shipped.index_dir)
    with ix.searcher() as s:
        assert s.is_atomic()
        for q in QUESTIONS:
            assert_same(s, q)


def test_same_scores_as_whoosh_with_segments_and_deletions(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    monkeypatch.setenv("KB_FINDINGS", str(notes))
    store = Store(tmp_path / "home")
    store.sync(load_findings)
    for i in range(3):  # each sync adds a segment; rewriting a file deletes its old records
        (notes / f"n{i}.md").write_text(NOTE.format(title=f"Throughput plateau at 128 concurrency, case {i}",
                                                    fid=f"note-{i}", symptom="#running-req stuck at 48"))
        store.sync(load_findings)
    (notes / "n0.md").write_text(NOTE.format(title="Quuxbridge hangs over PCIe", fid="note-0", symptom="tp=2 hangs"))
    store.sync(load_findings)
    ix = kbindex._open(store.index_dir)
    with ix.searcher() as s:
        assert not s.is_atomic() and any(sub.reader().has_deletions() for sub, _ in s.subsearchers)
        for q in QUESTIONS + ["throughput plateau 128 concurrency running-req", "quuxbridge hang pcie tp=2"]:
            assert_same(s, q)
    # and through kb ask: the rewritten note is found by its new words, not its old ones
    assert ask(store.index_dir, "quuxbridge", limit=1)[0].finding.id == "note-0"
    assert "note-0" not in [a.finding.id for a in ask(store.index_dir, "plateau at 128 concurrency, case 0", limit=5)]
    assert {"note-1", "note-2"} <= {a.finding.id for a in ask(store.index_dir, "plateau at 128 concurrency, case", limit=5)}


def test_no_match_is_empty(shipped):
    assert kbindex.search_terms(shipped.index_dir, "zzzqqqxxy") == []


def test_a_searcher_kept_open_sees_a_changed_index(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    monkeypatch.setenv("KB_FINDINGS", str(notes))
    store = Store(tmp_path / "home")
    store.sync(load_findings)
    assert ask(store.index_dir, "frobnicator overheats", limit=1) == []
    (notes / "x.md").write_text(NOTE.format(title="Frobnicator overheats", fid="note-x", symptom="frobnicator hot"))
    store.sync(load_findings)
    assert ask(store.index_dir, "frobnicator overheats", limit=1)[0].finding.id == "note-x"
    store.reindex(load_findings)  # a rebuild renames a new index directory into place
    assert ask(store.index_dir, "frobnicator overheats", limit=1)[0].finding.id == "note-x"
