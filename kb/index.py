"""The Whoosh index: schema with field boosts, writing records, reading them back.

Each document is one Finding; the whole record is stored as JSON so `kb show` and
`kb ask` never go back to the markdown. Whoosh errors are mapped to IndexError_.
"""

from __future__ import annotations

import json
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
    "body": 0.6,
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

    return index_dir.is_dir() and index.exists_in(str(index_dir))


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
    """Replace the records of changed source files (or rebuild from `pending` alone)."""
    from whoosh import index
    from whoosh.writing import LockError

    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        if rebuild or not index.exists_in(str(index_dir)):
            ix = index.create_in(str(index_dir), _schema())
        else:
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
            if not rebuild:
                writer.delete_by_term("source", key)
            for f in records:
                writer.add_document(**_doc(f, key))
        writer.commit(optimize=rebuild)
    except BaseException:
        writer.cancel()
        raise


def open_index(index_dir: Path):
    from whoosh import index

    try:
        return index.open_dir(str(index_dir))
    except Exception as e:
        raise IndexError_(f"cannot open the index at {index_dir}: {e} (run `kb reindex`)") from None


def record(stored: dict) -> Finding:
    return Finding.model_validate(json.loads(stored["data"]))


def get(index_dir: Path, fid: str) -> Finding | None:
    ix = open_index(index_dir)
    with ix.searcher() as s:
        doc = s.document(id=fid)
        return record(doc) if doc else None


def all_records(index_dir: Path) -> list[Finding]:
    ix = open_index(index_dir)
    with ix.searcher() as s:
        return [record(d) for d in s.all_stored_fields()]


def search_terms(index_dir: Path, text: str, limit: int = 50) -> list[tuple[Finding, float]]:
    """BM25F over all text fields for the analysed words of `text` (OR, field boosts)."""
    from whoosh import query as Q
    from whoosh.analysis import StemmingAnalyzer

    words = []
    for tok in StemmingAnalyzer()(text):
        if tok.text not in words:
            words.append(tok.text)
    if not words:
        return []
    q = Q.Or([Q.Term(field, w) for field in BOOSTS for w in words])
    ix = open_index(index_dir)
    with ix.searcher() as s:
        return [(record(hit), hit.score) for hit in s.search(q, limit=limit)]
