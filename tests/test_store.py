"""The index is a cache of the sources: incremental, rebuildable, untouched by bad input."""

import os

import pytest

from ingest.detect import load_findings
from kb import index as kbindex
from kb.errors import InputError
from kb.store import Store

FINDING = """# notes

## {title}

- **ID:** {fid}
- **Symptoms:** {symptom}
- **Fix classes:** max-running-requests
- **Confidence:** medium
- **Sources:** https://example.org/{fid}
"""


def write(path, fid, title="A title", symptom="throughput flat"):
    path.write_text(FINDING.format(fid=fid, title=title, symptom=symptom))
    return path


@pytest.fixture
def store(kb_home):
    return Store(kb_home)


def ids(store):
    return {f.id for f in kbindex.all_records(store.index_dir)}


def test_shipped_findings_are_indexed_on_first_use(store):
    store.sync(load_findings)
    assert len(ids(store)) >= 60


def test_unchanged_files_do_no_work(store, tmp_path):
    f = write(tmp_path / "a.md", "user-a")
    store.sync(load_findings, [f])
    rep = store.sync(load_findings, [f])
    assert rep.changed() == []
    os.utime(f)  # touched, same content: hash says unchanged
    assert store.sync(load_findings).changed() == []


def test_changed_file_replaces_exactly_its_own_records(store, tmp_path):
    a = write(tmp_path / "a.md", "user-a")
    b = write(tmp_path / "b.md", "user-b")
    store.sync(load_findings, [a, b])
    before = ids(store)
    write(a, "user-a2", symptom="new words here")
    rep = store.sync(load_findings)
    assert [fr.status for fr in rep.changed()] == ["updated"]
    assert ids(store) == (before - {"user-a"}) | {"user-a2"}


def test_removed_source_drops_its_records(store, tmp_path):
    a = write(tmp_path / "a.md", "user-a")
    store.sync(load_findings, [a])
    a.unlink()
    store.sync(load_findings)
    assert "user-a" not in ids(store)


def test_reindex_rebuilds_from_sources(store, tmp_path):
    a = write(tmp_path / "a.md", "user-a")
    store.sync(load_findings, [a])
    before = ids(store)
    import shutil

    shutil.rmtree(store.index_dir)
    store.reindex(load_findings)
    assert ids(store) == before


def test_bad_file_leaves_index_untouched(store, tmp_path):
    a = write(tmp_path / "a.md", "user-a")
    store.sync(load_findings, [a])
    before = ids(store)
    bad = tmp_path / "bad.md"
    bad.write_text(FINDING.format(fid="user-bad", title="t", symptom="s").replace("medium", "sure"))
    good2 = write(tmp_path / "c.md", "user-c")
    with pytest.raises(InputError) as e:
        store.sync(load_findings, [good2, bad])
    assert "bad.md" in str(e.value) and e.value.line
    assert ids(store) == before


def test_same_id_in_two_files_is_refused(store, tmp_path):
    a = write(tmp_path / "a.md", "user-a")
    b = write(tmp_path / "b.md", "user-a")
    with pytest.raises(InputError, match="already used"):
        store.sync(load_findings, [a, b])


def test_kb_findings_env_adds_sources(store, tmp_path, monkeypatch):
    d = tmp_path / "team"
    d.mkdir()
    write(d / "x.md", "team-x")
    monkeypatch.setenv("KB_FINDINGS", str(d))
    store.sync(load_findings)
    assert "team-x" in ids(store)
