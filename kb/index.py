"""The Whoosh index: schema with field boosts, writing records, reading them back.

Each document is one Finding; the whole record is stored as JSON so `kb show` and
`kb ask` never go back to the markdown. Whoosh errors are mapped to IndexError_.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kb.errors import IndexError_
from kb.records import Finding
from kb.textnorm import expand

# field → boost. Title and symptoms say what a finding is about; commands and
# context help when the question names a flag, a GPU or a model.
BOOSTS = {
    "title": 3.0,
    "symptoms": 2.5,
    "fix": 1.8,
    "root_cause": 1.6,
    "fix_classes": 1.6,
    "commands": 1.0,
    "context": 1.2,
    # Free-form notes hold almost all their text in the body; at 0.6 a team's own notes
    # ranked below canonical findings as a class. Prose weighs like commands now.
    "body": 1.0,
}


def _schema():
    from whoosh.analysis import StemmingAnalyzer
    from whoosh.fields import ID, STORED, TEXT, Schema

    ana = StemmingAnalyzer()
    text = {name: TEXT(analyzer=ana, field_boost=b) for name, b in BOOSTS.items()}
    return Schema(id=ID(stored=True, unique=True), kind=ID(stored=True), source=ID(stored=True),
                  data=STORED(), **text)


def exists(index_dir: Path) -> bool:
    from whoosh import index

    if not index_dir.is_dir():
        return False
    try:
        return index.exists_in(str(index_dir))
    except Exception:  # noqa: BLE001 - there, but damaged: check() says how
        return True


def _doc(f: Finding, source: str) -> dict:
    c = f.context
    context = " ".join(str(v) for v in (c.engine, c.engine_version, c.gpu, c.arch(), c.interconnect, c.model,
                                        c.model_family, c.quantization, *(f.tags or [])) if v)
    return {
        "id": f.id,
        "kind": f.kind,
        "source": source,
        "data": f.model_dump_json(exclude_defaults=True),
        "title": expand(f.title),
        "symptoms": expand(" ; ".join(f.symptoms)),
        "fix": expand(f.fix or ""),
        "root_cause": expand(f.root_cause or ""),
        "fix_classes": " ".join(fc.replace("-", " ") for fc in f.fix_classes),
        "commands": expand("\n".join(f.commands)),
        "context": expand(context),
        "body": expand(f.body),
    }


def write(index_dir: Path, pending: list[tuple[str, dict, list[Finding]]], removed: list[str], rebuild: bool) -> None:
    """Replace the records of changed source files (or rebuild from `pending` alone).

    Callers hold store.kb_lock. An update is one Whoosh commit (segments first, then
    the table of contents renamed into place), so a process killed at any moment leaves
    the old index or the new one. A rebuild is built in a sibling directory and renamed
    into place: it never empties the index a reader is using."""
    # Under the lock, a sibling copy can only be a dead process's (a rebuild killed half
    # way): clear it at every write, not only at the next rebuild, so kills do not pile up.
    for left in index_dir.parent.glob(f".{index_dir.name}.*-*"):
        _remove(left)
    if rebuild or not exists(index_dir):
        _rebuild(index_dir, pending)
        return
    from whoosh import index
    from whoosh.writing import LockError

    try:
        ix = index.open_dir(str(index_dir))
        writer = ix.writer(timeout=30.0)
    except LockError:
        raise IndexError_(f"the index at {index_dir} is locked by another kb process; try again") from None
    except Exception as e:  # whoosh raises a variety of errors on a damaged index
        raise IndexError_(f"cannot open the index at {index_dir}: {e}") from None
    try:
        for key in removed:
            writer.delete_by_term("source", key)
        for key, _entry, records in pending:
            writer.delete_by_term("source", key)
            for f in records:
                writer.add_document(**_doc(f, key))
        writer.commit()
    except BaseException:
        writer.cancel()
        raise


def _rebuild(index_dir: Path, pending: list[tuple[str, dict, list[Finding]]]) -> None:
    from whoosh import index

    parent = index_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{index_dir.name}.new-"))
    old = parent / f".{index_dir.name}.old-{os.getpid()}"
    try:
        ix = index.create_in(str(tmp), _schema())
        writer = ix.writer()
        for key, _entry, records in pending:
            for f in records:
                writer.add_document(**_doc(f, key))
        writer.commit(optimize=True)
        ix.close()
        if index_dir.exists() or index_dir.is_symlink():
            os.rename(index_dir, old)
        os.rename(tmp, index_dir)
    except OSError as e:
        raise IndexError_(f"cannot write the index at {index_dir}: {e.strerror or e}") from None
    finally:
        _remove(tmp)
        if index_dir.exists():
            _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def check(index_dir: Path, expected_docs: int) -> str | None:
    """None when the index opens, can be searched and holds `expected_docs` records;
    else what is wrong with it, in words."""
    if not exists(index_dir):
        return f"no index at {index_dir}"
    try:
        ix = _open(index_dir)
        with ix.searcher() as s:
            n = s.doc_count()
            for field in ("title", "body"):  # reads the term files
                next(iter(s.lexicon(field)), None)
    except Exception as e:  # noqa: BLE001 - any failure here means: rebuild it
        return f"the index at {index_dir} is damaged ({type(e).__name__}: {str(e)[:120]})"
    if n != expected_docs:
        return f"the index at {index_dir} holds {n} records where its sources have {expected_docs}"
    return None


def _open(index_dir: Path):
    from whoosh import index

    return index.open_dir(str(index_dir))


def open_index(index_dir: Path, attempts: int = 5):
    """The index, for reading. A rebuild renames a new index into place; one opened in
    that instant is tried again."""
    for i in range(attempts):
        try:
            return _open(index_dir)
        except Exception as e:  # noqa: BLE001
            if i == attempts - 1:
                raise IndexError_(f"cannot open the index at {index_dir}: {e} (run `kb reindex`)") from None
            time.sleep(0.1 * (i + 1))


class IndexDamaged(IndexError_):
    """The index opened but failed while being read (Whoosh has no checksums: a damaged
    segment shows only when a search reaches it)."""

    def __init__(self, index_dir: Path, error: Exception):
        self.reason = f"the index at {index_dir} is damaged ({type(error).__name__}: {str(error)[:120]})"
        super().__init__(f"{self.reason}; `kb reindex` rebuilds it from the sources")


def _reading(index_dir: Path, fn):
    """fn(searcher), tried again when the index changed under it (a concurrent rebuild
    removed files it was about to read); IndexDamaged when it keeps failing."""
    for i in range(3):
        ix = open_index(index_dir)
        try:
            with ix.searcher() as s:
                return fn(s)
        except Exception as e:  # noqa: BLE001 - struct.error, zlib.error, EOFError... from damaged files
            if i == 2:
                raise IndexDamaged(index_dir, e) from None
            time.sleep(0.1 * (i + 1))


def record(stored: dict) -> Finding:
    return Finding.model_validate(json.loads(stored["data"]))


def get(index_dir: Path, fid: str) -> Finding | None:
    doc = _reading(index_dir, lambda s: s.document(id=fid))
    return record(doc) if doc else None


def all_records(index_dir: Path) -> list[Finding]:
    return [record(d) for d in _reading(index_dir, lambda s: list(s.all_stored_fields()))]


# The words a question is asked with, which say nothing of its subject. Whoosh's stop list
# (documents and questions) leaves them in; with one idf per word a rare "why" or "does"
# in a finding's prose would weigh like a subject word, so questions drop them.
QUESTION_WORDS = ("why what which who whom whose where how does do did doing should would could shall "
                  "much many each any anything some vs versus than about i me my our")


def search_terms(index_dir: Path, text: str, limit: int = 50) -> list[tuple[Finding, float]]:
    """BM25F over all text fields for the analysed words of `text` (OR, field boosts)."""
    from whoosh.analysis import StemmingAnalyzer

    ana = StemmingAnalyzer()
    asking = {t.text for t in ana(QUESTION_WORDS)}
    words = []
    for tok in ana(text):
        if tok.text not in words and tok.text not in asking:
            words.append(tok.text)
    if not words:
        return []
    return _searching(index_dir,
                      lambda s: [(record(s.stored_fields(d)), score) for d, score in _bm25f(s, words, limit)])


_SEARCHERS: dict[str, tuple] = {}  # index dir → (signature, searcher), the last two used


def _signature(index_dir: Path) -> tuple:
    """What changes when the index does: a commit writes a new table of contents, a
    rebuild renames a new directory into place."""
    st = os.stat(index_dir)
    tocs = []
    for e in os.scandir(index_dir):
        if e.name.endswith(".toc"):
            est = e.stat()
            tocs.append((e.name, est.st_size, est.st_mtime_ns))
    return st.st_dev, st.st_ino, tuple(sorted(tocs))


def _searching(index_dir: Path, fn):
    """fn(searcher) on a searcher kept open between queries while the index stays the
    same (a process asking many questions opens it once); when anything fails, the
    searcher is dropped and the query goes through _reading (retries, IndexDamaged)."""
    key = str(index_dir)
    try:
        sig = _signature(index_dir)
        cached = _SEARCHERS.get(key)
        if cached is None or cached[0] != sig:
            _drop(key)
            while len(_SEARCHERS) >= 2:
                _drop(next(iter(_SEARCHERS)))
            _SEARCHERS[key] = (sig, _open(index_dir).searcher())
        return fn(_SEARCHERS[key][1])
    except Exception:  # noqa: BLE001 - _reading retries, and says the index is damaged if it is
        _drop(key)
        return _reading(index_dir, fn)


def _drop(key: str) -> None:
    cached = _SEARCHERS.pop(key, None)
    if cached:
        try:
            cached[1].close()
        except Exception:  # noqa: BLE001
            pass


def _bm25f(s, words: list[str], limit: int) -> list[tuple[int, float]]:
    """The `limit` best (docnum, score) for OR-ed words over the BOOSTS fields, scored by
    BM25F (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    2009, eq. 3.18-3.19): a word's boosted, length-normalised frequencies are summed over
    the fields first and saturated once, and weighted by one idf over whole documents.

    Whoosh's `Or([Term(field, word) ...])` (what kb used before) saturates and weights
    each field apart, with an idf per field: a common word ("long", "context", "decode")
    found in five fields of a long finding counted about five times, and outranked a rare
    word (a patch name, "LMCacheConnectorV1", "Q4_K_M") found once in a team's notes. Here
    each word counts at most idf * (k1 + 1) per document, so rare words decide.
    Summed in one flat pass over each term's postings (whoosh's tree of union matchers
    cost ~97% of a query's time at 10k findings); ties go to the lower docnum."""
    import heapq
    import math

    weighting = s.weighting
    b_default, k1 = weighting.B, weighting.K1
    k1p = k1 + 1
    field_b = {**getattr(weighting, "_field_B", {}), **FIELD_B}
    subs = [(s, 0)] if s.is_atomic() else list(s.subsearchers)
    whole = s.reader()
    n_docs = max(s.doc_count(), 1)
    acc = [0.0] * s.doc_count_all()
    have = [0.0] * len(acc)  # idf of the question's words each document contains
    total = 0.0
    for word in words:
        tf: dict[int, float] = {}  # docnum -> sum over fields of boost * tf / length norm
        for field in BOOSTS:
            if (field, word) not in whole:
                continue
            b = field_b.get(field, b_default)
            avgfl = s.avg_field_length(field) or 1
            for sub, offset in subs:
                r = sub.reader()
                if (field, word) not in r:
                    continue
                norms = _norms(r, field, b, k1, avgfl)  # k1 * ((1 - b) + b * fl / avgfl) per document
                for ids, weights in _blocks(r.postings(field, word)):
                    for d, w in zip(ids, weights, strict=True):
                        key = d + offset
                        tf[key] = tf.get(key, 0.0) + w * k1 / norms[d]
        if not tf:
            continue
        df = len(tf)
        idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        total += idf
        for d, t in tf.items():
            acc[d] += idf * (t * k1p) / (t + k1)
            have[d] += idf
    if total > 0:
        acc = [a * (h / total) ** COVERAGE for a, h in zip(acc, have, strict=True)]
    top = heapq.nlargest(limit, acc)  # plain floats: compared in C
    if not top or top[0] <= 0.0:
        return []
    floor = max(top[-1], sys.float_info.min)
    best = sorted((d for d, score in enumerate(acc) if score >= floor), key=lambda d: (-acc[d], d))
    return [(d, acc[d]) for d in best[:limit]]


COVERAGE = 1.0
# Length normalisation per field (BM25's b; whoosh's default 0.75 elsewhere). A section of
# free-form notes keeps nearly all its words in the body, and a long one (a results table,
# a config block) was normalised away: at 0.5 the one line that names a patch still counts.
FIELD_B = {"body": 0.5}


_NORMS: dict[tuple, list[float]] = {}


def _norms(r, field: str, b: float, k1: float, avgfl: float) -> list[float]:
    """BM25's length normalisation, k1 * ((1 - b) + b * length / avgfl), of every document
    of one segment for `field`; the lengths as r.doc_field_length(d, field, 1) gives them.
    Kept per segment (segments never change once written) and average length."""
    try:
        key = (r.segment().segment_id(), field, b, k1, avgfl)
    except Exception:  # noqa: BLE001 - not a plain segment reader: nothing to key a cache on
        key = None
    if key is None or key not in _NORMS:
        if len(_NORMS) > 256:
            _NORMS.clear()
        try:
            from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
            from whoosh.util.numeric import byte_to_length

            col = r._perdoc._cached_reader(_lenfield(field), LENGTHS_COLUMN)
            # (0 = an empty field, which has no postings to score)
            lengths = [1] * r.doc_count_all() if col is None else [byte_to_length(v) if v else 0 for v in col]
        except Exception:  # noqa: BLE001 - another codec: the public, slower way
            lengths = [r.doc_field_length(d, field, 1) for d in range(r.doc_count_all())]
        norms = [k1 * ((1 - b) + b * fl / avgfl) for fl in lengths]
        if key is None:
            return norms
        _NORMS[key] = norms
    return _NORMS[key]


def _blocks(m):
    """A term matcher's postings as (docnums, weights) runs: a block at a time from a
    whoosh3 leaf matcher, else one posting at a time through the public matcher API (the
    reader wraps a segment with deletions in a filter, so deleted documents never come)."""
    if type(m).__name__ == "W3LeafMatcher":
        try:
            while m.is_active():
                if m._ids is None:
                    m._read_ids()
                if m._weights is None:
                    m._read_weights()
                i = m._i
                yield (m._ids[i:], m._weights[i:]) if i else (m._ids, m._weights)
                m._next_block()
            return
        except AttributeError:  # a whoosh release with other internals
            pass
    while m.is_active():
        yield (m.id(),), (m.weight(),)
        m.next()
