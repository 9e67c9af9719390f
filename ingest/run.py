"""A run's files → RunEvidence: recognise each file by its content, not its name.

JSON (whole document or one per line) goes to the JSON readers; anything else is
streamed once, line by line, through every line parser (both listed, in order, in
ingest/formats.py), so a terminal capture that
mixes a launch command, start-up lines, Decode batch lines and a benchmark block
yields each part. Directories are walked without following links; FIFOs, devices
and binaries are reported as skipped, never read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Iterable, Iterator

from ingest.bench_command import BenchCommandLines
from ingest.generic_results import KIND as GENERIC  # its tables get a column report
from ingest.jsonlog import as_text
from ingest.launch_command import LaunchCommand
from kb.engineversion import version_in
from kb.errors import InputError
from kb.evidence import BenchCommandText, RunEvidence, TextLine
from kb.records import BenchRun, Hardware, ModelProfile, ServerTrace
from kb.textfile import SNIFF_BYTES, lines

MAX_JSON_BYTES = 256 * 2**20  # a larger .json is read as JSON lines
MAX_FILES = 10_000
MAX_JSON_LINE = 64 * 2**20  # one JSON-lines document (vLLM --save-detailed lines are large)
MAX_RECORDS = 5_000  # runs from one JSON-lines file (a sweep has dozens; each holds its server_info)


def _line_parsers(path: str) -> list:
    """A fresh parser of every line format but prose (ingest.formats), in priority order."""
    from ingest.formats import TEXT, of_shape

    return [f.reader(path) for f in of_shape("lines") if f.kind != TEXT]


def _json_readers() -> list:
    from ingest.formats import of_shape

    return [f.reader() for f in of_shape("json")]


_README = re.compile(r"^readme(\.(md|markdown|txt|rst))?$", re.I)


def walk(paths: Iterable[Path]) -> Iterator[tuple[Path, str | None]]:
    """(file, None) for every regular file, or (path, why skipped)."""
    seen = 0
    for p in paths:
        if not os.path.lexists(p):
            raise InputError(p, "no such file or directory")
        if p.is_dir() and not p.is_symlink():
            for root, dirs, files in os.walk(p, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    seen += 1
                    if seen > MAX_FILES:
                        yield Path(root) / name, f"more than {MAX_FILES} files: the rest were not read"
                        return
                    if _README.match(name):  # describes the directory; named on its own it is read
                        yield Path(root) / name, ("a README in a directory: documentation, not evidence "
                                                  "(name the file to read it)")
                        continue
                    yield from _check(Path(root) / name)
        else:
            yield from _check(p)


def require_named(paths: Iterable[Path], files: list[dict]) -> None:
    """A file named on the command line that yields nothing is the user's mistake: an
    InputError naming it. Files met while walking a directory stay reported and skipped
    (a run directory holds READMEs and scripts too)."""
    named = {str(p) for p in paths if not (p.is_dir() and not p.is_symlink())}
    for f in files:
        if "skipped" in f and f["path"] in named:
            raise InputError(f["path"], f"{f['skipped']}; nothing was ingested")


def _check(p: Path) -> Iterator[tuple[Path, str | None]]:
    try:
        st = os.stat(p)  # follows a symlink to a file, but os.walk never descends linked dirs
    except OSError as e:
        yield p, f"cannot be read ({e.strerror})"
        return
    if stat.S_ISDIR(st.st_mode):
        yield p, "a directory behind a symbolic link: links are not followed (name the directory itself)"
    elif not stat.S_ISREG(st.st_mode):
        yield p, "not a regular file (FIFO, device or socket)"
    elif st.st_size == 0:
        yield p, "empty"
    else:
        yield p, None


def _describe(records: list) -> str:
    from kb.evidence import TextLine

    parts = []
    prose = [r for r in records if isinstance(r, TextLine) and r.kind == "prose"]
    if prose:
        parts.append(f"{len(prose)} lines of text evidence")
    bench = [r for r in records if isinstance(r, BenchRun)]
    if bench:
        levels = sorted({int(r.level()) for r in bench})
        parts.append(f"{len(bench)} benchmark run{'s' * (len(bench) != 1)} ({bench[0].tool}; load "
                     + ", ".join(map(str, levels[:8])) + ("…" if len(levels) > 8 else "") + ")")
    live = [t for t in records if isinstance(t, ServerTrace) and t.stats.get("origin") == "metrics"]
    if live:
        parts.append(f"{live[0].engine} /metrics: {sum(t.stats.get('samples', 0) for t in live)} samples over "
                     f"{len(live)} level{'s' * (len(live) != 1)}")
    for t in (r for r in records if isinstance(r, ServerTrace) and r.stats.get("origin") != "metrics"):
        ev = ", ".join(f"{n} {k}" for k, n in t.stats.get("events", {}).items())
        facts = ", ".join(list(t.startup)[:4])
        parts.append(f"{t.engine} log: {t.stats.get('samples', 0)} stats lines" + (f", events: {ev}" if ev else "")
                     + (f", start-up: {facts}" if facts else "")
                     + (f", {len(t.server_args)} server args" if t.server_args else ""))
    for m in (r for r in records if isinstance(r, ModelProfile)):
        parts.append(f"model config: {m.name or m.architecture}"
                     + (f" (MoE {m.experts}×top-{m.experts_per_token})" if m.is_moe else ""))
    for h in (r for r in records if isinstance(r, Hardware)):
        parts.append(f"GPU facts: {h.count}x {h.gpu}" + (f", {h.interconnect}" if h.interconnect else ""))
    launches = [r for r in records if type(r).__name__ == "LaunchCommand"]
    if launches:
        bench_cmd = next((c for c in launches if c.entry.startswith("bench:")), None)
        parts.append(f"benchmark command ({bench_cmd.entry[6:]}): {bench_cmd.engine} server arguments" if bench_cmd
                     else f"launch command ({launches[0].engine})")
    return "; ".join(parts)


def read_file(p: Path, warnings: list[str], since: int | None = None) -> tuple[list, list[str]]:
    """Records from one file and the kinds recognised in it; problems with parts of
    the file (a broken JSON line) are appended to `warnings` with file and line.
    `since` (a byte offset) keeps a text file's periodic stats lines from that
    point on only: a live server's log, read for the window of one sweep."""
    with open(p, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if b"\x00" in head:
        return [], []
    first = head.lstrip()[:1]
    # "[2025-09-02 14:19:42 TP0] ..." opens every sglang log and no JSON document: read as text
    # (trying it as JSON read a log of up to 256 MB whole into memory, then line by line again)
    if first in (b"{", b"[") and not _LOG_START.match(head):
        found = _read_json(p, warnings)
        if found is not None and (found[0] or found[1]):
            return found
        if found is not None:
            # JSON no reader knows (a service's JSON log lines, issue 13): any text is evidence,
            # so its messages are read as the log lines they are
            return _read_lines(p, since, as_text)
    return _read_lines(p, since)


_LOG_START = re.compile(rb"\s*\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _read_json(p: Path, warnings: list[str]) -> tuple[list, list[str]] | None:
    readers = _json_readers()
    shown = str(p)
    size = p.stat().st_size
    if size <= MAX_JSON_BYTES:
        try:
            doc = json.loads(p.read_bytes())
        except (ValueError, UnicodeDecodeError, RecursionError):
            doc = None
        if doc is not None:
            companion = None
            for r in readers:
                out = r.read(doc, shown, None)
                if out:
                    return out, [r.kind]
                if out is not None and companion is None:  # recognised, read with another file
                    companion = r.kind
            if companion:
                from ingest.formats import by_kind, reported_kind

                return [], [reported_kind(by_kind(companion)[0])]
    # JSON lines: one document per line (sglang bench_serving --output-file appends)
    records, kinds, any_json, broken = [], [], False, []
    with open(p, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(lines(fh, MAX_JSON_LINE), 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            if len(records) >= MAX_RECORDS:
                warnings.append(f"{p}:{n}: more than {MAX_RECORDS:,} records; the rest of the file was not read")
                break
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                broken.append(n)
                continue
            any_json = True
            for r in readers:
                out = r.read(doc, shown, n)
                if out:
                    records += out
                    if r.kind not in kinds:
                        kinds.append(r.kind)
                    break
    if records and broken:
        warnings.append(f"{p}:{broken[0]}: not valid JSON, line skipped"
                        + (f" (and {len(broken) - 1} more lines)" if len(broken) > 1 else ""))
    return (records, kinds) if records or any_json else None


# Periodic stats lines make up almost all of a long server log and belong to the log
# parsers alone: handing them only to those keeps a 1 GB log fast.
STATS_MARKERS = ("Decode batch", "Prefill batch", "Avg prompt throughput", "Avg generation throughput")


def _read_lines(p: Path, since: int | None = None, translate=None) -> tuple[list, list[str]]:
    from ingest.formats import prose, stats_kinds

    text = prose().reader(str(p))
    parsers = _line_parsers(str(p))
    logs = [x for x in parsers if x.kind in stats_kinds()]
    every = [*parsers, text]
    if since is not None and 0 < since <= p.stat().st_size:
        _feed_since(p, since, every, logs)
    elif translate:  # each line rewritten first (JSON log lines): the plain loop, not the scanner
        from kb.textfile import lines as bounded_lines  # `lines` is a local name below

        with open(p, "rb") as fh:
            for n, raw in enumerate(bounded_lines(fh), 1):
                line = translate(raw.decode("utf-8", errors="replace"))
                for parser in (logs if any(m in line for m in STATS_MARKERS) else every):
                    parser.feed(n, line)
    else:
        from ingest import logscan
        from kb.progress import file_progress

        def route(n: int, line: str) -> None:
            for parser in (logs if any(m in line for m in STATS_MARKERS) else every):
                parser.feed(n, line)

        with open(p, "rb") as fh, file_progress(p) as on_bytes:
            logscan.scan(fh, parsers, logs, route, on_bytes)  # as `route` on every line, at grep-like rates
    records, kinds = _results(parsers)
    # any text is evidence: a file no parser recognised is read as prose (a pasted issue,
    # notes), and a recognised one keeps its notable lines for findings' `log` conditions
    if kinds:
        lines = text.results("log")
        if not set(kinds) & set(stats_kinds()):
            # a pasted issue is prose around a command or a result block: its sentences stay
            # prose (for `text` conditions and similarity), the command and data lines do not
            lines = [t.model_copy(update={"kind": "prose"}) if _sentence(t.text) else t for t in lines]
        records += lines
    else:
        records = text.results("prose")
        kinds = ["text"] if records and any(_WORDS.search(t.text) for t in records) else []
        records = records if kinds else []
    if kinds:  # every benchmark command found, beside a result block, alone or in prose
        records += [c for x in parsers if isinstance(x, BenchCommandLines) for c in x.commands()]
    return records, kinds


# text, not data: three words of any alphabet, or a run of CJK characters (written without
# spaces: a Chinese issue's "单并发很快" is a sentence, and its flags and numbers are evidence too)
_WORDS = re.compile(r"[^\W\d_]{2,}[,.:;]?\s+[^\W\d_]{2,}[,.:;]?\s+[^\W\d_]{2,}"
                    r"|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{4,}")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+[,.:;!?)]?$")
_CODE = re.compile(r"`[^`]*`")  # an inline command in a sentence: "we ran `vllm serve … --tp 8` and …"
_FLAG_VALUE = re.compile(r"(?:^|\s)--?[A-Za-z][\w.-]*(?:[= ](?!-)\S+)?")


def _sentence(line: str) -> bool:
    """A line of prose beside a command or a result block: five or more words, mostly
    words, once inline code and flags with their values are set aside (a command line,
    `Mean TTFT (ms): 12.3` and a table row are not; "we launched with --tp 8 and decode
    is only 10 tok/s" is)."""
    tokens = _FLAG_VALUE.sub(" ", _CODE.sub(" ", line)).split()
    words = sum(1 for t in tokens if _WORD.match(t))
    return words >= 5 and words >= 0.6 * len(tokens)


def _results(parsers: list) -> tuple[list, list[str]]:
    from ingest.formats import leftover_kinds

    leftover = leftover_kinds("lines")
    records, kinds = [], []
    hw = []
    for parser in parsers:
        if parser.kind in leftover and any(isinstance(r, BenchRun) for r in records):
            continue  # benchmark output a specific reader recognised is never read again as a table
        found = parser.results()
        if not found:
            continue
        kinds.append(parser.kind)
        if found and isinstance(found[0], Hardware):
            hw += found
        else:
            records += found
    if hw:
        from ingest.nvidia_smi import merge_hardware

        records.append(merge_hardware(hw))
    return records, kinds


def _feed_since(p: Path, since: int, parsers: list, logs: list) -> None:
    """Every line to every parser, except stats lines before byte `since` (start-up
    facts and server arguments stay, earlier traffic does not). Line numbers are the file's."""
    end = 0
    with open(p, "rb") as fh:
        for n, raw in enumerate(lines(fh), 1):  # bounded lines, as _read_lines reads them
            start, end = end, fh.tell()
            line = raw.decode("utf-8", errors="replace")
            if any(m in line for m in STATS_MARKERS):
                if start < since:
                    continue
                for parser in logs:
                    parser.feed(n, line)
            else:
                for parser in parsers:
                    parser.feed(n, line)


def read_run(paths: list[Path], config: str | None = None, gpu: str | None = None, engine: str | None = None,
             launch: str | None = None, since: dict[str, int] | None = None) -> RunEvidence:
    """Everything the files (and options) say about one run. `since` maps a file
    path to a byte offset: that log's stats lines are read from there on only."""
    if any(str(p) == "-" for p in paths):
        return _with_stdin(paths, config, gpu, engine, launch, since)
    ev = RunEvidence()
    launches, hardware, models = [], [], []
    for p, skipped in walk(paths):
        if skipped:
            ev.files.append({"path": str(p), "skipped": skipped})
            continue
        try:
            records, kinds = read_file(p, ev.warnings, (since or {}).get(str(p)))
        except OSError as e:
            ev.files.append({"path": str(p), "skipped": f"cannot be read ({e.strerror or e})"})
            continue
        if not records and not kinds:
            from ingest.formats import unknown_file

            ev.files.append({"path": str(p), "skipped": unknown_file()})
            continue
        ev.files.append({"path": str(p), "kind": ", ".join(kinds),
                         "yielded": _describe(records) or "no values on its own"})
        if GENERIC in kinds:
            _generic_report(p, records, ev)
        for r in records:
            if isinstance(r, BenchRun):
                ev.bench.append(r)
            elif isinstance(r, ServerTrace):
                ev.traces.append(r)
            elif isinstance(r, ModelProfile):
                models.append(r)
            elif isinstance(r, Hardware):
                hardware.append(r)
            elif isinstance(r, TextLine):
                ev.text.append(r)
            elif isinstance(r, BenchCommandText):
                ev.bench_commands.append(r)
            elif isinstance(r, LaunchCommand):
                launches.append(r)
    if launch:
        from ingest.launch_command import parse_launch_command

        cmd = parse_launch_command(launch)
        if cmd is None:
            raise InputError("--launch", "expected a `python -m sglang.launch_server …` or `vllm serve …` command")
        launches.append(cmd)
    explicit_model = None
    if config:
        from ingest.hf_config import load_profile

        explicit_model = load_profile(config)
    if gpu:
        from ingest.nvidia_smi import hardware_from_string

        hw, warnings = hardware_from_string(gpu)
        ev.warnings += warnings
        hardware.insert(0, hw)
    _merge(ev, launches, hardware, models, explicit_model, engine)
    _from_prose(ev)
    return ev


def _generic_report(p: Path, records: list, ev: RunEvidence) -> None:
    """The column mapping of a table read by the generic reader, on the file's entry
    (`kb ingest --report` shows it), and one warning naming what was guessed."""
    bench = [r.server_args.get("bench", {}) for r in records if isinstance(r, BenchRun) and r.tool == GENERIC]
    mappings = list(dict.fromkeys(b.get("columns", "") for b in bench if b.get("columns")))
    ev.files[-1]["columns"] = " | ".join(mappings)
    guessed = list(dict.fromkeys(g for b in bench for g in b.get("guessed", [])))
    if guessed:
        ev.warnings.append(f"{p}: read as a generic results table; guessed: "
                           + "; ".join(g.replace("(guessed: ", "(") for g in guessed))
    for note in dict.fromkeys(n for b in bench for n in b.get("notes", [])):
        ev.warnings.append(f"{p}: {note}")


MAX_STDIN_BYTES = 16 * 2**20


def _with_stdin(paths: list[Path], config, gpu, engine, launch, since) -> RunEvidence:
    """`-` reads standard input (a pasted log or issue) as one more file; the copy is
    removed on every path out."""
    import sys
    import tempfile

    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise InputError("-", f"standard input is larger than {MAX_STDIN_BYTES // 2**20} MiB")
    with tempfile.TemporaryDirectory(prefix="kb-stdin-") as tmp:
        copy = Path(tmp) / "stdin"
        copy.write_bytes(data)
        ev = read_run([copy if str(p) == "-" else p for p in paths], config, gpu, engine, launch, since)
        shown = str(copy)
        for f in ev.files:
            if f.get("path") == shown:
                f["path"] = "-"
        for t in [*ev.text, *ev.bench_commands]:
            if t.where and t.where.path == shown:
                t.where.path = "-"
        return ev


def _from_prose(ev: RunEvidence) -> None:
    """What the text says fills only what no file or option stated: the engine (when one
    is named), its version, the GPUs (when their count is said too); model traits and the
    GPU name are kept apart for findings' conditions. Prose counts whole; of a log, only a
    short one (a pasted excerpt), since a long log names things in passing."""
    from ingest.textevidence import MAX_ALL_LINES, context_of, repo_ids_in

    lines = [t for t in ev.text if t.kind == "prose"]
    if len(ev.text) < MAX_ALL_LINES:
        lines = ev.text
    if not lines:
        return
    ctx = context_of(lines)
    if not ev.engine and ctx.get("engine") in ("sglang", "vllm"):
        ev.engine = ctx["engine"]
        ev.warnings.append(f"engine {ev.engine} taken from the text evidence")
    if not ev.engine_version and ctx.get("engine_version") and ctx.get("engine") == ev.engine:
        ev.engine_version = ctx["engine_version"]
    if not ev.model_path:  # the model named by its repo id, for the model lookup and rules that need the path
        named = repo_ids_in(lines)
        if named:
            ev.model_path = named[0]
            ev.warnings.append(f"model {named[0]} taken from the text evidence"
                               + (f" (it also names {', '.join(named[1:3])})" if len(named) > 1 else ""))
    count = ctx.get("gpu_count") or ev.tp_size() or _server_gpus(ev)
    if not ev.hardware and ctx.get("gpu") and count:
        from ingest.nvidia_smi import hardware_from_string

        hw, _ = hardware_from_string(f"{count}x {ctx['gpu']}")
        ev.hardware = hw.model_copy(update={"source": "text evidence", "interconnect": ctx.get("interconnect")})
    ev.text_context = {k: ctx[k] for k in ("model", "model_family", "quantization", "gpu") if ctx.get(k)}


def _server_gpus(ev: RunEvidence) -> int | None:
    """GPUs a launched server uses when its command sets no parallel size: one (TP, PP and
    DP default to 1 in both engines). None without a launch command: then nothing says."""
    if not ev.launch_argv:
        return None
    sizes = [ev.arg(*names) for names in (("pp_size", "pipeline_parallel_size", "pp"),
                                          ("dp_size", "data_parallel_size", "dp"))]
    return 1 if all(v in (None, "", 1, "1") for v in sizes) else None


def _norm(key: str) -> str:
    return key.lstrip("-").replace("-", "_")


def _merge(ev: RunEvidence, launches: list, hardware: list[Hardware], models: list[ModelProfile],
           explicit_model: ModelProfile | None, engine: str | None) -> None:
    """One picture from many files: explicit options first, then the launch command,
    then what the server and benchmark reported."""
    from ingest.nvidia_smi import merge_hardware

    # a server launch beats a flag list or a benchmark command (`bench:...`: an offline
    # benchmark that takes the server's arguments, never a command to relaunch)
    full = [c for c in launches if c.entry != "flags" and not c.entry.startswith("bench:")]
    cmd = (full or launches or [None])[-1]
    ev.engine = engine or (cmd.engine if cmd else None) or next((t.engine for t in ev.traces), None) \
        or _engine_from_bench(ev.bench)
    ev.engine_version = next((t.engine_version for t in ev.traces if t.engine_version), None) \
        or next((r.engine_version for r in ev.bench if r.engine_version), None) \
        or next((hit[1] for c in launches if ev.engine and (hit := version_in(c.raw, ev.engine))), None)
    args: dict = {}
    for t in ev.traces:
        args.update({_norm(k): v for k, v in t.server_args.items()})
        ev.server_args_source = ev.server_args_source or t.source
    for r in ev.bench:
        if r.server_args:  # "bench" holds the tool's own settings, not the server's
            args.update({_norm(k): v for k, v in r.server_args.items() if k != "bench"})
            ev.server_args_source = ev.server_args_source or (str(r.source) if r.source else None)
    if cmd:
        args.update({_norm(k): v for k, v in cmd.norm_args.items()})
        ev.server_args_source = str(cmd.source) if cmd.source else "launch command"
        ev.launch_argv = _argv(cmd) if any(cmd is c for c in full) else []
        ev.launch_env = dict(cmd.env)
    ev.server_args = args
    ev.server_args_complete = bool(cmd) or any(t.server_args for t in ev.traces) \
        or any(_all_args(r) for r in ev.bench)
    # a flag given without its value (`--model-path` alone) is True in args: not a path
    named = [cmd.model if cmd else None, args.get("model_path"), args.get("model"), *(r.model for r in ev.bench)]
    ev.model_path = next((m for m in named if isinstance(m, str) and m), None)
    if explicit_model:
        ev.model = explicit_model
    elif models:  # a config.json found among the files is named after the served model
        ev.model = models[0].model_copy(update={"name": ev.model_path}) if ev.model_path else models[0]
    explicit = [h for h in hardware if (h.source or "").startswith("--gpu")]
    found = [h for h in hardware if h not in explicit]
    if explicit:
        hw = explicit[0]
        seen = merge_hardware(found) if found else None
        if seen and seen.interconnect and "PCIe" not in (hw.source or "") and "NVLink" not in (hw.source or ""):
            hw = hw.model_copy(update={"interconnect": seen.interconnect, "numa_nodes": seen.numa_nodes,
                                       "links": seen.links})
        ev.hardware = hw
    elif found:
        ev.hardware = merge_hardware(found)


def _all_args(r: BenchRun) -> bool:
    """Whether a benchmark's server_info holds every launch argument: sglang's
    /server_info does; a kb sweep of vLLM holds only the few the probe read (vLLM
    publishes no endpoint with its arguments)."""
    args = {k: v for k, v in r.server_args.items() if k != "bench"}
    return bool(args) and not (r.tool == "kb-sweep" and args.get("engine") == "vllm")


def _engine_from_bench(runs: list[BenchRun]) -> str | None:
    for r in runs:
        b = (r.backend or "").lower()
        if "sglang" in b:
            return "sglang"
        if "vllm" in b:
            return "vllm"
    return None


def _argv(cmd) -> list[str]:
    """The launch command as argv (without its environment prefix)."""
    import shlex

    text = cmd.raw.replace("\\\n", " ")
    try:
        words = shlex.split(text, comments=False)
    except ValueError:
        return []
    for i, w in enumerate(words):
        if "=" in w and not w.startswith("-") and i < len(words) - 1 and w.split("=", 1)[0].isidentifier():
            continue
        return words[i:]
    return words
