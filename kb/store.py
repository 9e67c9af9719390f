"""The knowledge base on disk: where it lives, which source files it was built from,
and keeping the Whoosh index in step with them.

Sources (markdown files) are the truth; the index and manifest are a cache that
`reindex` can always rebuild. Sync is incremental: a file whose size, mtime or
content hash is unchanged costs nothing; a changed file replaces exactly its own
records; every file is parsed before anything is written, so a bad file leaves
the index untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from kb import index as kbindex
from kb.errors import IndexError_, InputError
from kb.index import IndexDamaged
from kb.records import Finding
from kb.textfile import MAX_FINDINGS_BYTES, read_bytes

MANIFEST_VERSION = 2  # 2: findings carry "Applies when" conditions; older indexes are re-read
T = TypeVar("T")
Loader = Callable[[Path, str], list[Finding]]


def default_home() -> Path:
    if os.environ.get("KB_HOME"):
        return Path(os.environ["KB_HOME"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kb"


def shipped_findings_dir() -> Path | None:
    """The findings shipped with kb: inside the wheel, or beside the package in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "shipped_findings", here.parent / "findings"):
        if candidate.is_dir():
            return candidate
    return None


# Source documents the shipped findings cite (retold stories), kept beside the findings
# so they ship in the wheel; they are read by people, never as findings.
STORIES_DIR = "stories"


def shipped_source_file(path: str) -> Path | None:
    """The file a shipped finding cites as `findings/...`, wherever kb is installed
    (a checkout's findings/ or the wheel's kb/shipped_findings/), or None."""
    shipped = shipped_findings_dir()
    if not shipped or not path.startswith("findings/"):
        return None
    p = shipped / path[len("findings/"):]
    return p if p.is_file() else None


def is_story(p: Path) -> bool:
    shipped = shipped_findings_dir()
    return bool(shipped) and p.resolve().parent == (shipped / STORIES_DIR).resolve()


def not_findings(p: Path) -> str | None:
    """Why a file among the findings is not one to index (ingest.detect.split_paths' `exclude`)."""
    return "a source document the shipped findings cite, not findings" if is_story(p) else None


def findings_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.md") if p.name not in ("FORMAT.md", "README.md"))


def display_path(p: Path) -> str:
    """How a source file is cited: relative to the working directory or the shipped
    findings' parent when it lies below them, else absolute."""
    p = p.resolve()
    roots = [Path.cwd()]
    shipped = shipped_findings_dir()
    if shipped:
        roots.insert(0, shipped.parent)
    for root in roots:
        try:
            rel = p.relative_to(root.resolve())
            return str(rel) if not str(rel).startswith("shipped_findings") else "findings" + str(rel)[16:]
        except ValueError:
            continue
    return str(p)


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def atomic_write(path: Path, text: str) -> None:
    """Readers (and a crash) see the old file or the new one, never half of it: write a
    temp file beside it, fsync, rename over. Callers doing read-modify-write hold `file_lock`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive lock for a read-modify-write of `path`, held on a sibling `.NAME.lock`
    (not on `path` itself, which atomic_write replaces by another inode)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


LOCK_NAME = ".kb.lock"
LOCK_TIMEOUT = 300.0  # seconds a writer waits for another (a large ingest, a rebuild)


@contextmanager
def kb_lock(home: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """The knowledge base's write lock (index + manifest), held across read, parse and write.

    An flock: the kernel releases it when its holder exits or is killed (SIGKILL
    included), so a lock file left behind by a dead process never blocks anyone and
    needs no clearing. The holder writes its pid into the file, for the message a
    waiter gives up with."""
    import fcntl

    path = home / LOCK_NAME
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise IndexError_(f"cannot write the knowledge base at {home}: {e.strerror or e}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise IndexError_(f"{home} is being written by another kb process ({_holder(path)}) "
                                      f"for more than {timeout:g} s; try again later") from None
                time.sleep(0.05)
            except OSError as e:  # a file system without locks (some network mounts): go on unlocked
                _notice(f"cannot lock {path} ({e.strerror or e}); writing without a lock")
                break
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(path: Path) -> str:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return "pid unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"pid {pid}, no longer running"
    except PermissionError:
        pass
    return f"pid {pid}"


def _expected_docs(known: dict) -> int:
    return sum(len(e.get("ids", [])) for e in known.values())


def _notice(message: str) -> None:
    """A line on stderr: what kb did on its own (a rebuild) that the user should know."""
    print(f"kb: {message}", file=sys.stderr, flush=True)


@dataclass
class FileResult:
    path: str
    status: str  # "unchanged", "added", "updated", "removed"
    records: list[Finding] = field(default_factory=list)


@dataclass
class SyncReport:
    files: list[FileResult] = field(default_factory=list)

    def changed(self) -> list[FileResult]:
        return [f for f in self.files if f.status != "unchanged"]


class Store:
    """One knowledge base directory: `index/` (Whoosh) and `manifest.json`."""

    def __init__(self, home: Path | None = None):
        self.home = Path(home) if home else default_home()
        self.index_dir = self.home / "index"
        self.manifest_path = self.home / "manifest.json"
        self.user_findings_dir = self.home / "findings"

    # ------------------------------------------------------------ manifest
    def manifest(self) -> dict:
        try:
            data = json.loads(self.manifest_path.read_text())
            if data.get("version") == MANIFEST_VERSION:
                return data
        except (OSError, ValueError):
            pass
        return {"version": MANIFEST_VERSION, "sources": {}}

    def _save_manifest(self, data: dict) -> None:
        # Callers hold kb_lock, so a temp file of the manifest's is a killed process's: clear it.
        for left in self.home.glob(f".{self.manifest_path.name}.*.tmp"):
            left.unlink(missing_ok=True)
        atomic_write(self.manifest_path, json.dumps(data, indent=1, sort_keys=True))

    # ------------------------------------------------------------ sources
    def auto_sources(self) -> list[Path]:
        """Markdown files indexed without being asked: shipped findings, the user's
        attached findings, and any KB_FINDINGS paths (os.pathsep-separated)."""
        dirs = [d for d in (shipped_findings_dir(), self.user_findings_dir) if d and d.is_dir()]
        files = [f for d in dirs for f in findings_files(d)]
        for extra in filter(None, os.environ.get("KB_FINDINGS", "").split(os.pathsep)):
            p = Path(extra).expanduser()
            files.extend(findings_files(p) if p.is_dir() else [p] if p.is_file() else [])
        return files

    # ------------------------------------------------------------ sync
    def sync(self, load: Loader, paths: Iterable[Path] = (), force: bool = False) -> SyncReport:
        """Bring the index in step with the auto sources, the pinned ones, and `paths`
        (which become pinned). Parses every changed file first; writes only if all parse.

        When nothing changed and the index is sound, nothing is locked or written (every
        `kb ask` starts here). Otherwise the work is done under the knowledge base's lock,
        so concurrent `kb ingest`/`kb attach`/`kb ask` lose no finding; a missing or
        damaged index (a killed process, a disk problem) is rebuilt from the sources,
        and that is announced on stderr."""
        report = None if force else self._unchanged(paths)
        if report is not None:
            return report
        with kb_lock(self.home):
            return self._sync(load, paths, force)

    def _wanted(self, known: dict, paths: Iterable[Path]) -> tuple[set[str], set[str]]:
        new_paths = {str(Path(p).resolve()) for p in paths}
        wanted = {str(p.resolve()) for p in self.auto_sources()} | new_paths
        wanted |= {p for p, e in known.items() if e.get("pinned") and Path(p).exists()}
        return wanted, new_paths

    def _unchanged(self, paths: Iterable[Path]) -> SyncReport | None:
        """The report of a sync with nothing to do, or None when there is work (or doubt)."""
        known = self.manifest()["sources"]
        wanted, new_paths = self._wanted(known, paths)
        if set(known) - wanted or any(not known.get(k, {}).get("pinned") for k in new_paths):
            return None
        report = SyncReport()
        for key in sorted(wanted):
            entry = known.get(key)
            try:
                st = os.stat(key)
            except OSError:
                if key in new_paths:
                    return None
                continue
            if not stat.S_ISREG(st.st_mode) and key not in new_paths:
                continue
            if not entry or entry["size"] != st.st_size or entry["mtime_ns"] != st.st_mtime_ns:
                return None
            report.files.append(FileResult(entry.get("display", key), "unchanged"))
        if kbindex.check(self.index_dir, _expected_docs(known)) is not None:
            return None
        return report

    def _sync(self, load: Loader, paths: Iterable[Path], force: bool) -> SyncReport:
        manifest = self.manifest()
        known = manifest["sources"]
        wanted, new_paths = self._wanted(known, paths)
        problem = kbindex.check(self.index_dir, _expected_docs(known))
        if problem is not None:
            if known and not force:  # the index was there: say why it is being rebuilt
                _notice(f"{problem}; rebuilding it from {len(wanted)} source files")
            force = True
        report = SyncReport()
        pending: list[tuple[str, dict, list[Finding]]] = []
        for key in sorted(wanted):
            p = Path(key)
            entry = known.get(key)
            try:
                st = p.stat()
            except OSError:
                if key in new_paths:
                    raise InputError(p, "no such file") from None
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device named *.md is never opened
                if key in new_paths:
                    raise InputError(p, "not a regular file (FIFO, device or socket)")
                continue
            if not force and entry and entry["size"] == st.st_size and entry["mtime_ns"] == st.st_mtime_ns:
                report.files.append(FileResult(entry.get("display", key), "unchanged"))
                continue
            data = read_bytes(p, MAX_FINDINGS_BYTES)
            digest = file_hash(data)
            shown = display_path(p)
            new_entry = {"hash": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "display": shown,
                         "pinned": bool(key in new_paths or (entry or {}).get("pinned"))}
            if not force and entry and entry["hash"] == digest:
                known[key] = {**entry, **new_entry}  # touched, not changed
                report.files.append(FileResult(shown, "unchanged"))
                continue
            records = load(p, shown)
            pending.append((key, new_entry, records))
            report.files.append(FileResult(shown, "updated" if entry else "added", records))
        removed = [k for k in known if k not in wanted]
        for key in removed:
            report.files.append(FileResult(known[key].get("display", key), "removed"))
        self._check_unique_ids(known, pending, removed)
        if pending or removed or force:
            # The manifest first says what the index is about to hold, with the changed
            # sources marked unread (size -1, no hash): a process killed before the index
            # commit leaves them to be read again, and a doc count the index does not have.
            for key in removed:
                known.pop(key, None)
            for key, entry, records in pending:
                known[key] = {**entry, "size": -1, "hash": "", "ids": [r.id for r in records]}
            self._save_manifest(manifest)
            kbindex.write(self.index_dir, pending, removed, rebuild=force)
            for key, entry, records in pending:
                known[key] = {**entry, "ids": [r.id for r in records]}
        self._save_manifest(manifest)
        return report

    def read(self, load: Loader, fn: Callable[[Path], "T"]) -> "T":
        """fn(index_dir) after a sync; an index found damaged while being read (a segment
        the cheap check did not reach) is rebuilt from the sources, announced, and fn
        tried once more."""
        self.sync(load)
        try:
            return fn(self.index_dir)
        except IndexDamaged as e:
            with kb_lock(self.home):
                _notice(f"{e.reason}; rebuilding it from the sources")
                self._sync(load, (), force=True)
            return fn(self.index_dir)

    def _check_unique_ids(self, known: dict, pending: list, removed: list[str]) -> None:
        owner: dict[str, str] = {}
        replaced = {k for k, _, _ in pending} | set(removed)
        for key, entry in known.items():
            if key not in replaced:
                for fid in entry.get("ids", []):
                    owner[fid] = entry.get("display", key)
        for _key, entry, records in pending:
            for r in records:
                if r.id in owner and owner[r.id] != entry["display"]:
                    raise InputError(entry["display"], f"finding id {r.id!r} is already used in {owner[r.id]}")
                owner[r.id] = entry["display"]

    def reindex(self, load: Loader) -> SyncReport:
        return self.sync(load, force=True)
