"""The shipped findings' knowledge base for tests that only read it: built once per test
process by the session fixtures in tests/conftest.py (shipped_store, shipped_records),
and a fingerprint that shows whether any test wrote to it."""

from __future__ import annotations

import hashlib

from ingest.detect import load_findings
from kb import index as kbindex
from kb.search import searcher
from kb.store import Store


def build(store: Store) -> None:
    store.sync(load_findings)


def records(store: Store) -> tuple:
    """(findings, searcher): the findings as a list, as `kb diagnose` takes them."""
    return kbindex.all_records(store.index_dir), searcher(store.index_dir)


def fingerprint(store: Store) -> str:
    """Every file under the store's home: path, size, mtime and bytes."""
    h = hashlib.sha256()
    for p in sorted(store.home.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(store.home)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def records_fingerprint(findings: list) -> str:
    """The findings objects as they are now (a test that edits a shared one changes it)."""
    return hashlib.sha256("\n".join(map(repr, findings)).encode()).hexdigest()
