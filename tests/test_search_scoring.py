"""kb's flat BM25F scorer (kb.index._bm25f) gives the scores and ranking of BM25F as
defined (a word's boosted, length-normalised frequencies summed over the fields and
saturated once, one idf over whole documents, times the share of the question's idf the
document holds), written plainly below over whoosh's public reader API, on one segment
and on an index that grew by incremental updates (several segments, deleted documents)."""

import json
import math

import pytest
from conftest import DATA
from whoosh import query as Q
from whoosh.analysis import StemmingAnalyzer

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


def reference_ranking(s, ws, limit):
    """BM25F, document by document, through the public reader API (slow, plain)."""
    r = s.reader()
    w = s.weighting
    k1, n = w.K1, s.doc_count()
    score, have, total = {}, {}, 0.0
    for word in ws:
        tf = {}
        for field in kbindex.BOOSTS:
            if (field, word) not in r:
                continue
            b = kbindex.FIELD_B.get(field, getattr(w, "_field_B", {}).get(field, w.B))
            avgfl = s.avg_field_length(field) or 1
            m = r.postings(field, word)  # the field boost is already in the weight
            while m.is_active():
                d = m.id()
                tf[d] = tf.get(d, 0.0) + m.weight() / ((1 - b) + b * r.doc_field_length(d, field, 1) / avgfl)
                m.next()
        if not tf:
            continue
        idf = math.log(1 + (n - len(tf) + 0.5) / (len(tf) + 0.5))
        total += idf
        for d, t in tf.items():
            score[d] = score.get(d, 0.0) + idf * t * (k1 + 1) / (t + k1)
            have[d] = have.get(d, 0.0) + idf
    final = {d: v * (have[d] / total) ** kbindex.COVERAGE for d, v in score.items()}
    return sorted(final.items(), key=lambda x: (-x[1], x[0]))[:limit]


def whoosh_per_field_ranking(s, ws, limit):
    """What kb ranked by before: whoosh's Or over (field, word) terms, each saturated alone."""
    q = Q.Or([Q.Term(field, w) for field in kbindex.BOOSTS for w in ws])
    return [(hit.docnum, hit.score) for hit in s.search(q, limit=None)][:limit]


def assert_same(s, question, limit=20):
    ws = words(question)
    ours, theirs = kbindex._bm25f(s, ws, limit), reference_ranking(s, ws, limit)
    assert [d for d, _ in ours] == [d for d, _ in theirs], question
    for (_, a), (_, b) in zip(ours, theirs, strict=True):
        assert a == pytest.approx(b, rel=1e-9), question


@pytest.fixture
def shipped(shipped_store):
    return shipped_store  # built by one sync (one segment), read-only, one per test process (tests/conftest.py)


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
    assert {"note-1",
            "note-2"} <= {a.finding.id for a in ask(store.index_dir, "plateau at 128 concurrency, case", limit=5)}


def test_a_word_counts_once_however_many_fields_hold_it(shipped):
    """A rare word found once outweighs a common word repeated across five fields (the
    per-field sum did the opposite: each field's copy of a common word scored again)."""
    ix = kbindex._open(shipped.index_dir)
    with ix.searcher() as s:
        common = max(("throughput", "concurr", "decod"), key=lambda w: s.doc_frequency("body", w))
        per_field = {d: sc for d, sc in whoosh_per_field_ranking(s, [common], None)}
        ours = dict(kbindex._bm25f(s, [common], 10_000))
        # per field, the best document's score grows with the fields holding the word;
        # in BM25F it is bounded by one word's ceiling, idf * (k1 + 1)
        n, df = s.doc_count(), len(ours)
        ceiling = math.log(1 + (n - df + 0.5) / (df + 0.5)) * (s.weighting.K1 + 1)
        assert max(ours.values()) <= ceiling + 1e-9
        assert max(per_field.values()) > ceiling


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
