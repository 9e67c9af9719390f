"""Writing a finding: appended to a findings file (or merged into the finding it
updates) under a lock with an atomic write, checked to read back as written, and
indexed at once; a near-duplicate in the same context is reported, not written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.detect import load_findings
from ingest.markdown import finding_spans, parse_findings, render, slug
from kb import index as kbindex
from kb.attach.finding import UNCLASSIFIED, build
from kb.attach.gains import CONFIDENCE_ORDER
from kb.attach.request import Request
from kb.errors import KbError, NotFoundError
from kb.records import Finding
from kb.render import finding_json
from kb.store import Store, atomic_write, file_lock, shipped_findings_dir

HEADER = "# Attached findings\n\nFindings recorded with `kb attach` (format: findings/FORMAT.md).\n"


@dataclass
class AttachResult:
    action: str  # written | updated | duplicate
    id: str
    path: str | None  # the findings file written, or the one holding the duplicate
    finding: Finding  # as written (merged, for an update); for a duplicate, the existing finding
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "path": self.path, "action": self.action,
                "finding": finding_json(self.finding), "warnings": self.warnings}


def _same_context_key(f: Finding) -> tuple:
    c = f.context
    low = lambda v: str(v).lower() if v is not None else None  # noqa: E731
    return frozenset(f.fix_classes), low(c.engine), low(c.arch()), low(c.model_family), low(c.quantization)


def near_duplicate(f: Finding, existing: list[Finding]) -> Finding | None:
    """A finding of the same fix classes measured in the same engine, GPU architecture,
    model family and quantization. Unclassified findings share no class, only a label:
    two of them in one context are not duplicates; nor are two whose GPU architecture and
    model family are both unknown (a general launch check is not the same measurement)."""
    if UNCLASSIFIED in f.fix_classes:
        return None
    key = _same_context_key(f)
    if key[2] is None and key[3] is None:
        return None
    return next((e for e in existing if e.kind == "finding" and _same_context_key(e) == key), None)


def _id_base(title: str, limit: int = 48) -> str:
    """The title's slug, cut at a word boundary."""
    s = slug(title, 200)
    return s if len(s) <= limit else s[:limit + 1].rsplit("-", 1)[0]


def _unique_id(base: str, taken: set[str]) -> str:
    fid, n = base, 2
    while fid in taken:
        fid, n = f"{base}-{n}", n + 1
    return fid


def _file_of(store: Store, fid: str) -> Path | None:
    for key, entry in store.manifest()["sources"].items():
        if fid in entry.get("ids", []):
            return Path(key)
    return None


def _read_file(path: Path) -> tuple[str, list[Finding]]:
    if not path.exists():
        return "", []
    text = path.read_text(encoding="utf-8")
    return text, parse_findings(text, str(path))


def _checked_write(path: Path, text: str, f: Finding) -> None:
    """Write only text that reads back to exactly this finding."""
    back = {x.id: x for x in parse_findings(text, str(path))}.get(f.id)
    if back != f:
        raise KbError(f"{path}: the finding would not read back as written; nothing was written")
    atomic_write(path, text)


def _append(path: Path, f: Finding, taken: set[str]) -> Finding:
    text, records = _read_file(path)
    f = f.model_copy(update={"id": _unique_id(_id_base(f.title), taken | {r.id for r in records})})
    _checked_write(path, (text.rstrip("\n") + "\n\n" if text.strip() else HEADER + "\n") + render(f), f)
    return f


def merge(old: Finding, new: Finding) -> Finding:
    """`old` with the new measurement: its gains, sources and commands added, context gaps filled."""
    ctx = old.context.model_copy(update={k: v for k, v in new.context.model_dump().items()
                                         if getattr(old.context, k) is None and v is not None})
    body = [old.body] if old.body else []
    body.append(f"Update by kb attach: {new.fix}")
    body += [p for p in new.body.split("\n") if p]
    return old.model_copy(update={
        "context": ctx,
        "gains": old.gains + [g for g in new.gains if g not in old.gains],
        "sources": old.sources + [s for s in new.sources if s not in old.sources],
        "commands": old.commands + [c for c in new.commands if c not in old.commands],
        "confidence": max(old.confidence, new.confidence, key=CONFIDENCE_ORDER.get),
        "body": "\n".join(body),
    })


def _update(path: Path, fid: str, new: Finding) -> Finding:
    text, records = _read_file(path)
    old = next((r for r in records if r.id == fid), None)
    if old is None:
        raise NotFoundError(f"no finding with id {fid!r} in {path}")
    span = finding_spans(text).get(fid)
    if span is None:
        raise KbError(f"{path}: {fid} is not written in the canonical format (findings/FORMAT.md), "
                      "so it cannot be updated in place")
    merged = merge(old, new)
    start, end = span
    lines = text.splitlines(keepends=True)
    _checked_write(path, "".join(lines[:start - 1]) + render(merged) + "".join(lines[end:]), merged)
    return merged


def _is_shipped(path: Path) -> bool:
    shipped = shipped_findings_dir()
    return bool(shipped) and path.resolve().is_relative_to(shipped.resolve())


def _locate(store: Store, fid: str, target: Path, load) -> Path:
    """The findings file that holds `fid`: the target, else wherever the index found it."""
    if any(r.id == fid for r in _read_file(target)[1]):
        return target
    found = _file_of(store, fid)
    if found is None:
        with file_lock(target):
            store.sync(load)
        found = _file_of(store, fid)
    if found is None:
        raise NotFoundError(f"no finding with id {fid!r} to update (try `kb ask` or `kb show`)")
    if _is_shipped(found):
        raise KbError(f"{fid} is shipped with kb ({found}) and is not edited: attach it as a new finding instead "
                      "(force_new)")
    return found


def attach(req: Request, store: Store | None = None) -> AttachResult:
    """Build the finding from the runs and options, then write it (or report a near-duplicate)."""
    store = store or Store()
    finding, warnings = build(req)
    target = Path(req.to).expanduser() if req.to else store.user_findings_dir / "attached.md"
    if req.update:
        target = _locate(store, req.update, target, load_findings)
    target = target.resolve()
    try:
        # One lock across read, check, write and re-index: concurrent attaches queue, none is lost.
        with file_lock(target):
            return _write(store, target, req, finding, warnings, load_findings)
    except OSError as e:
        raise KbError(f"{target}: cannot write ({e.strerror or e})") from e


def _write(store: Store, target: Path, req: Request, finding: Finding, warnings: list[str], load) -> AttachResult:
    store.sync(load)
    indexed = kbindex.all_records(store.index_dir)
    if req.update:
        written, action = _update(target, req.update, finding), "updated"
    else:
        dup = None if req.force_new else near_duplicate(finding, _read_file(target)[1] + indexed)
        if dup:
            warnings.append(f"{dup.id} already records {', '.join(dup.fix_classes)} in this context: nothing "
                            f"written (update={dup.id} adds this measurement to it, force_new writes a "
                            "separate finding)")
            return AttachResult("duplicate", dup.id, str(_file_of(store, dup.id) or target), dup, warnings)
        written, action = _append(target, finding, {r.id for r in indexed}), "written"
    auto = {p.resolve() for p in store.auto_sources()}
    store.sync(load, [] if target in auto else [target])  # a file elsewhere is pinned, so reindex keeps it
    return AttachResult(action, written.id, str(target), written, warnings)
