"""The index survives: SIGKILL at random moments, damaged index files, lock files left
by dead processes, and several kb processes writing at once. Sources are the truth:
whatever happens to the index, the next command works on the old index or rebuilds it
from the sources and says so on stderr, and no finding is lost."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT

from ingest.detect import load_findings
from kb import index as kbindex
from kb.errors import IndexError_
from kb.store import LOCK_NAME, Store, kb_lock

_spec = importlib.util.spec_from_file_location("kb_kill", ROOT / "benchmarks" / "kill.py")
killbench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(killbench)

QUESTION = "throughput plateaus at high concurrency"


def _notes(d: Path, n: int, prefix: str = "rel") -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = d / f"{prefix}{i}.md"
        p.write_text(killbench.note(i, 0).replace("kill-note-", f"{prefix}-"))
        out.append(p)
    return out


def _ask_in_process(home: Path, capsys) -> tuple[list, str]:
    from kb.search import ask

    store = Store(home)
    store.sync(load_findings)
    answers = ask(store.index_dir, QUESTION, 5)
    return answers, capsys.readouterr().err


@pytest.fixture
def built(kb_home, tmp_path):
    """A knowledge base with the shipped findings and two pinned notes files."""
    files = _notes(tmp_path / "notes", 2)
    Store(kb_home).sync(load_findings, files)
    return kb_home, files


# ---------------------------------------------------------------- SIGKILL


def test_sigkill_at_random_moments(tmp_path):
    """10 kills of `kb ingest` / `kb reindex` (benchmarks/kill.py runs 200): after each,
    the next ask answers (every 5th through the real `kb ask`), every finding ingested
    before is there, current, and nothing the killed process left is still there."""
    stats = killbench.run(kills=10, seed=1, cli_every=5, work=tmp_path)
    assert stats["failures"] == []
    assert stats["kills"] >= 8  # attempts that ended before their kill are retried (at most 30)


def test_what_a_killed_writer_left_is_cleared(built):
    """A rebuild killed half way leaves its sibling copy of the index, a kill inside
    atomic_write a temp manifest: the next write (under the lock, so they cannot be a
    live process's) removes both, instead of letting them pile up kill after kill."""
    home, files = built
    (home / ".index.new-deadbeef").mkdir()
    (home / ".index.new-deadbeef" / "MAIN_x.seg").write_bytes(b"x" * 1000)
    (home / ".index.old-12345").mkdir()
    (home / ".manifest.json.abc123.tmp").write_text("{half")
    files[0].write_text(files[0].read_text().replace("version 0", "version 1"))
    rep = Store(home).sync(load_findings, files)
    assert [f.status for f in rep.files if f.path.endswith("rel0.md")] == ["updated"]
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".") and p.name != LOCK_NAME) == []
    assert "version 1" in kbindex.get(Store(home).index_dir, "rel-0-0").root_cause


# ---------------------------------------------------------------- damaged index


def _toc(index_dir: Path) -> Path:
    return max(index_dir.glob("_MAIN_*.toc"), key=lambda p: int(p.stem.split("_")[-1]))


@pytest.mark.parametrize("damage", ["garbage toc", "truncated toc", "no toc", "truncated segments",
                                    "empty dir", "no index dir", "index is a file"])
def test_damaged_index_is_rebuilt_and_announced(built, damage, capsys):
    home, _ = built
    ix = Store(home).index_dir
    n = len(kbindex.all_records(ix))
    if damage == "garbage toc":
        _toc(ix).write_bytes(os.urandom(300))
    elif damage == "truncated toc":
        toc = _toc(ix)
        toc.write_bytes(toc.read_bytes()[:40])
    elif damage == "no toc":
        _toc(ix).unlink()
    elif damage == "truncated segments":
        for f in ix.iterdir():
            if not f.name.startswith("_") and f.suffix not in (".toc",) and "LOCK" not in f.name:
                f.write_bytes(f.read_bytes()[:16])
    elif damage == "empty dir":
        for f in ix.iterdir():
            f.unlink()
    elif damage == "no index dir":
        for f in ix.iterdir():
            f.unlink()
        ix.rmdir()
    elif damage == "index is a file":
        for f in ix.iterdir():
            f.unlink()
        ix.rmdir()
        ix.write_text("not an index")
    answers, err = _ask_in_process(home, capsys)
    assert answers
    assert "rebuilding it from" in err and str(ix) in err, err
    assert len(kbindex.all_records(ix)) == n
    _, err = _ask_in_process(home, capsys)
    assert err == ""  # rebuilt once, then quiet


def test_index_missing_records_is_rebuilt(built, capsys):
    """An index that opens but lacks records its sources have (e.g. emptied by a killed
    rebuild in older kb versions) is caught by the record count."""
    home, files = built
    from whoosh import index

    ix = index.open_dir(str(Store(home).index_dir))
    with ix.writer() as w:
        w.delete_by_term("source", str(files[0].resolve()))
    answers, err = _ask_in_process(home, capsys)
    assert "holds" in err and "rebuilding" in err
    assert {"rel-0-0", "rel-0-1", "rel-0-2"} <= {f.id for f in kbindex.all_records(Store(home).index_dir)}


def test_cli_announces_the_rebuild_on_stderr(built, kb):
    home, _ = built
    _toc(Store(home).index_dir).write_bytes(b"\x00" * 64)
    proc = kb("ask", QUESTION, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answers"]
    assert proc.stderr.startswith("kb: the index at ") and "rebuilding it from" in proc.stderr


def test_a_failed_rebuild_keeps_the_old_index(built, monkeypatch):
    """`kb reindex` builds beside the index and renames it into place: an error (or a
    kill) half-way leaves the index readers use untouched."""
    home, _ = built
    store = Store(home)
    before = {f.id for f in kbindex.all_records(store.index_dir)}
    calls = {"n": 0}
    real = kbindex._doc

    def failing(f, source):
        calls["n"] += 1
        if calls["n"] > 10:
            raise RuntimeError("disk on fire")
        return real(f, source)

    monkeypatch.setattr(kbindex, "_doc", failing)
    with pytest.raises(RuntimeError):
        store.reindex(load_findings)
    monkeypatch.undo()
    assert {f.id for f in kbindex.all_records(store.index_dir)} == before
    assert not list(store.home.glob(".index.*"))  # the half-built copy was removed


# ---------------------------------------------------------------- locks


def test_lock_files_of_dead_processes_do_not_block(built):
    """Both locks are flocks, released by the kernel when the holder dies: files left
    behind (ours with a dead pid in it, Whoosh's WRITELOCK) are not stale locks."""
    home, files = built
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (home / LOCK_NAME).write_text(f"{dead}\n")
    (Store(home).index_dir / "MAIN_WRITELOCK").write_text("")
    files[0].write_text(files[0].read_text().replace("version 0", "version 1"))
    t = time.perf_counter()
    rep = Store(home).sync(load_findings, files)
    assert time.perf_counter() - t < 10
    assert [f.status for f in rep.files if f.path.endswith("rel0.md")] == ["updated"]


def test_a_held_lock_names_its_holder_after_the_timeout(tmp_path):
    held, release = threading.Event(), threading.Event()

    def holder():
        with kb_lock(tmp_path):
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    try:
        with pytest.raises(IndexError_, match=rf"being written by another kb process \(pid {os.getpid()}\)"):
            with kb_lock(tmp_path, timeout=0.3):
                pass
    finally:
        release.set()
        t.join()
    with kb_lock(tmp_path, timeout=1):  # free again
        pass


def test_a_lock_held_by_a_process_that_is_killed_is_released(tmp_path):
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from kb.store import kb_lock\nfrom pathlib import Path\n"
            "with kb_lock(Path(%r)):\n    print('held', flush=True)\n    time.sleep(60)\n") % (str(ROOT), str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(IndexError_, match=f"pid {proc.pid}"):
            with kb_lock(tmp_path, timeout=0.2):
                pass
        proc.kill()
        proc.wait()
        with kb_lock(tmp_path, timeout=2):
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- concurrent writers


def test_concurrent_ingest_attach_and_ask_lose_nothing(kb_home, tmp_path):
    """4 `kb ingest` (different files), 2 `kb attach` and 3 `kb ask` at once on an empty
    KB_HOME, then again on the filled one: every command succeeds with nothing on stderr,
    every finding is indexed, the index holds what the manifest says, and the ingested
    files stay pinned (benchmarks/kill.py --rounds runs more, wider)."""
    stats = killbench.concurrent(kb_home, tmp_path, rounds=2, ingests=4, attaches=2, asks=3)
    assert stats["failures"] == []
    assert stats["processes"] == 18 and stats["findings"] == 2 * (4 * 2 * 3 + 2)
    known = Store(kb_home).manifest()["sources"]
    pinned = [k for k, e in known.items() if e["pinned"]]
    assert len(pinned) == 2 * 4 * 2 and all("round" in k for k in pinned)


def test_a_read_only_knowledge_base_still_answers(built, monkeypatch, capsys):
    """Nothing changed: `kb ask` neither locks nor writes (the manifest is not rewritten)."""
    home, _ = built
    writes = []
    monkeypatch.setattr("kb.store.atomic_write", lambda *a, **k: writes.append(a))
    monkeypatch.setattr("kb.store.kb_lock", lambda *a, **k: (_ for _ in ()).throw(AssertionError("locked")))
    answers, err = _ask_in_process(home, capsys)
    assert answers and writes == [] and err == ""


def test_damage_found_only_by_a_search_is_rebuilt_and_announced(built, kb):
    """Whoosh has no checksums: bytes changed inside a segment pass the open-and-count
    check and fail in the search that reaches them (struct.error, zlib.error...).
    `kb ask` then rebuilds from the sources, says so, and answers."""
    import random

    home, _ = built
    ix = Store(home).index_dir
    seg = max((p for p in ix.iterdir() if p.suffix == ".seg"), key=lambda p: p.stat().st_size)
    good = seg.read_bytes()
    rnd = random.Random(1)
    for _ in range(20):  # find a damage the cheap check misses but a search trips on
        data = bytearray(good)
        for _ in range(50):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        seg.write_bytes(bytes(data))
        n = sum(len(e["ids"]) for e in Store(home).manifest()["sources"].values())
        if kbindex.check(ix, n) is None:
            try:
                kbindex.search_terms(ix, QUESTION)
            except kbindex.IndexDamaged:
                break
    else:
        pytest.fail("seeded damage no longer produces a segment that opens but fails in a search; pick another seed")
    proc = kb("ask", QUESTION, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answers"]
    assert "is damaged" in proc.stderr and "rebuilding it from the sources" in proc.stderr
