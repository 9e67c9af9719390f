"""The Whoosh index: schema with field boosts, writing records, reading them back.

Each document is one Finding; the whole record is stored as JSON so `kb show` and
`kb ask` never go back to the markdown. Whoosh errors are mapped to IndexError_.
"""

from __future__ import annotations

import json
import os
import shutil
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
    for left in parent.glob(f".{index_dir.name}.*-*"):  # from a process killed mid-rebuild
        _remove(left)
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
    return _reading(index_dir, lambda s: [(record(hit), hit.score) for hit in s.search(q, limit=limit)])
