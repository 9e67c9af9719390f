import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def kb_home(tmp_path, monkeypatch):
    home = tmp_path / "kbhome"
    monkeypatch.setenv("KB_HOME", str(home))
    monkeypatch.delenv("KB_FINDINGS", raising=False)
    return home


@pytest.fixture
def kb(kb_home):
    """Run the real `kb` command line in a subprocess; returns CompletedProcess."""

    def run(*args, check_json=False, env=None, cwd=None):
        e = {**os.environ, "KB_HOME": str(kb_home), **(env or {})}
        proc = subprocess.run([sys.executable, "-m", "kb", *map(str, args)], capture_output=True,
                              text=True, env=e, cwd=cwd or ROOT, timeout=120)
        if check_json:
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout)
        return proc

    return run


def pytest_collection_modifyitems(items):
    """The live tests (tests/live) run last. Their vLLM server with --max-num-seqs 8 is
    session-scoped (shared by several modules), and an idle vLLM CPU server still takes about
    a third of a core; run first, it stayed up through the ~1,700 offline tests and slowed
    them. Run last, it stops when they end. The order within each part is kept."""
    items.sort(key=lambda item: "live" in item.path.relative_to(Path(__file__).parent).parts[:1])


@pytest.fixture(scope="session")
def shipped_store(tmp_path_factory):
    """The shipped findings indexed once per test process (each xdist worker builds its
    own; a build is about 3 s of CPU), shared read-only by the modules that only query
    them. A test that writes to a knowledge base builds its own. At the end of the session
    the store's files and records must be as built: a test that changed them fails here."""
    from shipped import build, fingerprint

    from kb.store import Store

    store = Store(tmp_path_factory.mktemp("shipped-kbhome"))
    build(store)
    before = fingerprint(store)
    yield store
    assert fingerprint(store) == before, "a test changed the shared shipped-findings store; give it its own"


@pytest.fixture(scope="session")
def shipped_records(shipped_store):
    """(findings, searcher) of the shared shipped-findings store, as `kb diagnose` takes
    them; shared read-only like the store (checked at the end of the session)."""
    from shipped import records, records_fingerprint

    findings, search = records(shipped_store)
    before = (len(findings), records_fingerprint(findings))
    yield findings, search
    assert (len(findings), records_fingerprint(findings)) == before, \
        "a test changed the shared shipped findings; give it its own copy"


@pytest.fixture
def shipped(shipped_records):
    """(findings, search) of the shipped knowledge, as the thin-evidence test files name it."""
    return shipped_records


@pytest.fixture
def shipped_home(kb_home, shipped_store):
    """kb_home starting as a copy of the shared shipped-findings store (its index and
    manifest), so the test's first `kb diagnose` finds it in step instead of spending about
    3 s of CPU indexing the shipped findings again. For modules that read the knowledge
    base and do not test how an empty home is first built (tests/test_store.py does)."""
    import shutil

    shutil.copytree(shipped_store.home, kb_home, ignore=shutil.ignore_patterns(".*lock"))
    return kb_home
