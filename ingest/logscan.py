"""A long server log read at grep-like rates, with the results of the line-by-line reader.

The file is read in binary chunks of complete lines. One compiled pattern turns a chunk
into rows, one per line, in C: a row is either one of the dominant periodic stats lines
in a shape read here field by field (sglang Decode/Prefill batch, vLLM V1/V0 stats), a
uvicorn access line (one per request, which no parser reads), or any other line. Other
lines, stats lines in any other shape, and the stats lines the down-sampler keeps go to
the per-line parsers exactly as before; the runs of fast rows between them only update
the exact aggregates (sums and maxima, column by column, in file order), so the result
is the same as feeding every line to every parser (tests/test_logscan.py compares them).

Most blocks take the shape path (_Shapes, at the end): ROWS runs once per line shape
(the line with its digits as 0), not once per line, and each shape's fields come from one
split of its lines; a block it declines (a \r, an overlong line, a shape whose numbers do
not sit apart, an access line whose digits ROWS would refuse) is read by the row path.

Line ends follow the text reader's universal newlines (a lone \\r ends a line too): a
line holding \\r, or cut for length, is handed to the text reader's own code."""

from __future__ import annotations

import io
import os
import pickle
import re
import stat
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from functools import partial, reduce
from itertools import compress
from operator import add, attrgetter

from kb.linelimit import MAX_LINE_CHARS

# Blocks this process reads (192 KiB: ~4 MB less peak RSS than 512 KiB, within the noise in CPU
# per MB) and blocks the worker plans (384 KiB: each plan costs this process a fold, so fewer pay;
# 0.8 MB less worker peak than 512 KiB)
CHUNK = 3 * 2**16
PLAN_CHUNK = 3 * 2**17
# a line longer than this many bytes holds more than MAX_LINE_CHARS characters (UTF-8 ≤ 4 bytes each)
OVERLONG = 4 * MAX_LINE_CHARS + 8

_N = rb"\d{1,15}"  # a count (15 digits: exact through float, as num() reads it)
_F = rb"\d{1,15}\.\d{1,15}"  # a decimal


def _g(name: str, value: bytes) -> bytes:
    return b"(?P<" + name.encode() + b">" + value + b")"


def _opt(key: str, name: str | None = None, value: bytes = _N) -> bytes:
    """`, key: value`, optional; captured as `name` when given."""
    return b"(?:, " + re.escape(key).encode() + b": " + (_g(name, value) if name else value) + b")?"


# stats fields kb has no Sample slot for: their maxima go to stats["extra_max"] (group → key)
EXTRA = {
    "x_swa_tok": "#swa token", "x_mamba_num": "mamba num", "x_mamba_use": "mamba usage",
    "x_acc_rate": "accept rate", "x_pre_use": "pre-allocated usage", "x_d_prealloc": "#prealloc-req",
    "x_transfer": "#transfer-req", "x_retracted": "#retracted-req", "x_hit": "cache hit rate",
    "x_unboot": "#unbootstrapped-req", "x_p_prealloc": "#prealloc-req", "x_inflight": "#inflight-req",
    "x_transferring": "#transferring-req", "x_pending": "#pending-token",
}
_GRAPH = rb"(?:, (?:cuda|cpu) graph: "
# sglang 0.4 → 0.5 (scheduler_metrics_mixin.py log_decode_stats / log_prefill_stats): fields
# in the order sglang prints them, each optional one in its place; prefix as serverlog._SGL_PREFIX
_SGL = (
    rb"(?P<sg>\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<sg_rank>(?: [A-Z]{2,4}\d+)*)\] (?:"
    rb"Decode batch(?: \[\d+\])?[.,] #running-req: " + _g("d_run", _N)
    + rb"(?:, #token: " + _N + rb", token usage: " + _g("d_use", _F)
    + rb"|, #full token: " + _N + rb", full token usage: " + _g("d_full", _F) + _opt("#swa token", "x_swa_tok")
    + _opt("swa token usage", "d_swa", _F) + _opt("mamba num", "x_mamba_num") + _opt("mamba usage", "x_mamba_use", _F)
    + rb")" + _opt("accept len", "d_acc", _F) + _opt("accept rate", "x_acc_rate", _F)
    + _opt("pre-allocated usage", "x_pre_use", _F) + _opt("#prealloc-req", "x_d_prealloc")
    + _opt("#transfer-req", "x_transfer") + _opt("#retracted-req", "x_retracted")
    + _GRAPH + _g("d_graph", rb"True|False") + rb")?, gen throughput \(token/s\): " + _g("d_gen", _F)
    + _opt("#queue-req", "d_q")
    + rb"|Prefill batch(?: \[\d+\])?[.,] #new-seq: " + _N + rb", #new-token: " + _g("p_new", _N)
    + rb", #cached-token: " + _g("p_cached", _N) + _opt("cache hit rate", "x_hit", _F + b"%")
    + rb"(?:, token usage: " + _g("p_use", _F) + rb"|, full token usage: " + _g("p_full", _F)
    + rb", swa token usage: " + _g("p_swa", _F) + rb")"
    + _opt("#running-req") + _opt("#unbootstrapped-req", "x_unboot") + _opt("#queue-req")
    + _opt("#prealloc-req", "x_p_prealloc") + _opt("#inflight-req", "x_inflight")
    + _opt("#transferring-req", "x_transferring") + _opt("#pending-token", "x_pending")
    + _GRAPH + rb"(?:True|False))?" + _opt("input throughput (token/s)", "p_in", _F)
    + rb")(?:, ?)?)\n"
)
# vLLM V1 (v1/metrics/loggers.py) and V0 (engine/metrics.py) periodic stats; prefixes: a
# docker --timestamps time, a `[date time] ` capture prefix, `(APIServer pid=N) ` (coloured or not).
# A V1 line with `Preemptions: N` is not a row here (it is N preempt events): see _V1_PREEMPT.
_VPREFIX = (rb"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z |\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?"
            rb"(?:(?:\x1b\[[\d;]{0,8}m)?\(APIServer pid=\d{1,9}\)(?:\x1b\[[\d;]{0,8}m)? )?")


def _vllm(preempt: bytes = b"") -> bytes:
    """The vLLM stats rows; `preempt` is what stands between V1's Waiting and its KV cache usage."""
    return (
        rb"(?P<vl>" + _VPREFIX + rb"INFO \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:"
        rb"\[loggers\.py:\d{1,6}\] (?:Engine " + _g("v1_eng", rb"\d{1,6}") + rb": )?Avg prompt throughput: "
        + _g("v1_prompt", _F) + rb" tokens/s, Avg generation throughput: " + _g("v1_gen", _F)
        + rb" tokens/s, Running: " + _g("v1_run", _N) + rb" reqs, Waiting: " + _g("v1_wait", _N)
        + rb" reqs, " + preempt + rb"GPU KV cache usage: " + _g("v1_use", _F)
        + rb"%, Prefix cache hit rate: " + _F + rb"%"
        rb"|\[?metrics\.py:\d{1,6}\] Avg prompt throughput: " + _g("v0_prompt", _F) + rb" tokens/s, Avg generation "
        rb"throughput: " + _g("v0_gen", _F) + rb" tokens/s, Running: " + _g("v0_run", _N) + rb" reqs, Swapped: "
        + _g("v0_swap", _N) + rb" reqs, Pending: " + _g("v0_pend", _N) + rb" reqs, GPU KV cache usage: "
        + _g("v0_use", _F) + rb"%, CPU KV cache usage: " + _g("v0_cpu", _F) + rb"%\.?"
        rb"))\n"
    )


_VLLM = _vllm()
# V1's `Preemptions: N` (vLLM prints it only when N > 0, before the KV cache usage; v1/metrics/
# loggers.py): each such line is N preempt events. The row path leaves these lines to the line
# parser; the shape path reads them once the parser keeps no more preempt events in full (_Shapes.block).
_V1_PREEMPT = re.compile(_vllm(b"Preemptions: " + _g("v1_pre", _N) + b", "))
# uvicorn's access line for the serving endpoints; no parser reads it (its words and
# paths are none of the ones the log parsers look for), the log parsers only count it
_ACCESS = (
    rb"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z |\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: "
    rb"[A-Z]{2,4}\d+)*\] )?"
    rb"(?:(?:\x1b\[[\d;]{0,8}m)?\(APIServer pid=\d{1,9}\)(?:\x1b\[[\d;]{0,8}m)? )?"
    rb"INFO: +[0-9a-fA-F.:\[\]]{1,64} - \"(?:GET|POST) /(?:v1/chat/completions|v1/completions|generate|health"
    rb"|metrics|v1/models|get_model_info|get_server_info|version|ping|tokenize|detokenize|health_generate"
    rb"|flush_cache|v1/embeddings) HTTP/1\.[01]\" [1-4]\d\d(?: OK|(?: [A-Z][a-z]+)+)\n"
)
ROWS = re.compile(_SGL + b"|" + _VLLM + b"|" + _ACCESS + rb"|(?P<other>[^\n]*\n)")
COL = {name: i - 1 for name, i in ROWS.groupindex.items()}  # findall gives each row as a tuple of the groups
assert len(COL) == ROWS.groups  # every group named: the tuple's positions are COL's
SG, VL, OTHER = COL["sg"], COL["vl"], COL["other"]
_SG_EXTRA = [(COL[g], k) for g, k in EXTRA.items()]


# Past this many bytes a second process reads the file's tail (the machine's second core): smaller
# inputs are read here alone, where the worker's start-up (~50 ms) and the replay would not pay.
PARALLEL_MIN = 64 * 2**20
# the share of the file read here; the worker plans the rest, which this process applies in file
# order as the worker writes it. Planning costs ~0.7 of reading a block here, applying a plan ~0.15
# (kept rows and other lines go through the parsers here): at 0.35 this process still took 6-7%
# more CPU than the worker on benchmarks/log_parse.py's 1 GiB mixed log (0.37: ~10%)
SPLIT = 0.33


def scan(fh, parsers: list, logs: list, route: Callable[[int, str], None],
         on_bytes: Callable[[int], None] | None = None, parallel_min: int | None = None) -> None:
    """Every line of the binary file `fh` (read from its start) into the parsers, as
    `route(lineno, line)` would feed them one by one. `logs` holds the sglang and vLLM log
    parsers (in `parsers`). A regular file over `parallel_min` bytes (PARALLEL_MIN) is read
    by two processes (_parallel)."""
    sgl = next(p for p in logs if p.kind == "sglang-log")
    vll = next(p for p in logs if p.kind == "vllm-log")
    state = _State(sgl, vll, route)
    mid = _split_point(fh, PARALLEL_MIN if parallel_min is None else parallel_min)
    if mid is None:
        _read(fh, state, on_bytes)
    else:
        _parallel(fh, state, on_bytes, mid)
    for p in logs:
        p.lines += state.fast_lines


def _read(fh, state: "_State", on_bytes, end: int | None = None) -> None:
    """The file from its position up to byte `end` (a line start) or its end, block by block."""
    carry, skipping = b"", False
    while True:
        chunk = fh.read(CHUNK if end is None else min(CHUNK, end - fh.tell()))
        if on_bytes:
            on_bytes(len(chunk))
        if not chunk:
            break
        if skipping:  # the rest of a line cut for length: up to its line end
            chunk, skipping = _skip_rest(chunk, state)
            if skipping:
                continue
        buf = carry + chunk if carry else chunk
        chunk = None  # (only the block is held while it is read: the peak RSS)
        cut = buf.rfind(b"\n") + 1
        if cut:
            block, carry = buf[:cut], buf[cut:]
            buf = None
            state.block(block)
            block = None
        else:
            carry = buf
        if len(carry) > OVERLONG:
            carry, skipping = state.overlong(carry)
    if carry:
        state.block(carry + b"\n")  # the last line without its line end


# ---------------------------------------------------------------- two processes
#
# This process reads the file up to a line start `mid`; meanwhile a worker (a lean process:
# re and this module, no parsers) plans every block from `mid` on (_Shapes.plan: the figures to
# fold, the other lines, each engine's row indices) and writes the plans to a temporary file.
# This process then applies them in file order with its own state, as the worker writes them: which rows the sampler
# keeps, the float sums (added value by value, as the line reader adds them), the caps and
# vLLM's preempt events all come from that state, so the result is the serial reader's. A
# block the worker could not plan, or whose plan this state declines, is read here as before.


def _split_point(fh, parallel_min: int) -> int | None:
    """The line start after SPLIT of a regular file over `parallel_min` bytes; None: read serially."""
    try:
        info = os.fstat(fh.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size <= parallel_min or fh.tell() != 0:
        return None
    pos = int(info.st_size * SPLIT)
    for _ in range(64):  # a line end within 32 MiB of the split, or no split
        data = os.pread(fh.fileno(), CHUNK, pos)
        nl = data.find(b"\n")
        if nl >= 0:
            mid = pos + nl + 1
            return mid if 0 < mid < info.st_size else None
        if not data:
            return None
        pos += len(data)
    return None


_WORKER = "import sys; from ingest.logscan import work; sys.exit(work(*sys.argv[1:]))"


def _parallel(fh, state: "_State", on_bytes, mid: int) -> None:
    import subprocess  # (here: the worker imports this module, and a smaller process without these)
    import tempfile

    fd = fh.fileno()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    with tempfile.TemporaryDirectory(prefix="kb-logscan-") as tmp:
        plans = os.path.join(tmp, "plans")
        open(plans, "wb").close()  # there before the worker starts: this process may look first
        # -S: no site packages (the worker needs none): a smaller process
        proc = subprocess.Popen([sys.executable, "-S", "-c", _WORKER, str(fd), str(mid), plans],
                                pass_fds=(fd,), env=env, stdin=subprocess.DEVNULL)
        try:
            _read(fh, state, on_bytes, mid)
            at = _replay(fh, state, on_bytes, plans, mid, proc)
            proc.wait()  # it has written its last plan, or ended
        finally:
            if proc.poll() is None:  # this process failed or was interrupted: the worker stops too
                proc.kill()
                proc.wait()
    if at is not None:  # what the worker left (or all of it, if it failed): read here
        fh.seek(at)
        _read(fh, state, on_bytes)


def _replay(fh, state: "_State", on_bytes, plans: str, at: int, proc) -> int | None:
    """The worker's plans applied in file order as it writes them; where the file is left to
    read here, or None."""
    shapes, fd = state.fast, fh.fileno()
    for rec in _records(plans, proc):
        if rec[0] == "end":
            return None
        if rec[0] == "rest":
            return rec[1]
        _, off, size, plan = rec
        if (plan is None or (plan.preempt and not shapes.preempts_counted_only())
                or not shapes.apply(plan, partial(_lines, fd, off, size))):
            fh.seek(off)  # planned with what this state does not hold: read here, in this process's blocks
            _read(fh, state, None, off + size)
        at = off + size
        if on_bytes:
            on_bytes(size)
    return at  # (the worker ended without its last record: the rest is read here)


def _records(plans: str, proc):
    """The worker's records (8-byte length, then the pickle), each as soon as it is whole;
    until the worker has ended and nothing whole is left."""
    with open(plans, "rb", buffering=0) as fh:
        pos, pfd = 0, fh.fileno()
        while True:
            ended = proc.poll() is not None  # (looked at first: a record written before the end is read)
            head = os.pread(pfd, 8, pos)
            if len(head) == 8:
                size = int.from_bytes(head, "little")
                body = os.pread(pfd, size, pos + 8)
                if len(body) == size:
                    pos += 8 + size
                    yield _PlanReader(io.BytesIO(body)).load()
                    continue
            if ended:
                return
            time.sleep(0.002)  # the worker is ahead of this process but for the start and the end


class _PlanReader(pickle.Unpickler):
    """Unpickles the worker's records and nothing else: a plan is built of this module's
    _Plan, Counter and plain containers, so any other class or function a record names is
    refused (the records come from kb's own worker through a private temp directory; this
    keeps a tampered file from running code all the same)."""

    ALLOWED = {(__name__, "_Plan"), ("collections", "Counter")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"a log-reading plan names {module}.{name}")
        return super().find_class(module, name)


def _lines(fd: int, off: int, size: int, wanted: Iterable[int]) -> dict[int, bytes]:
    """The lines at the indices `wanted` of the block at `off`, read 64 KiB at a time (the
    whole block at once would add to this process's peak RSS)."""
    out, todo, first, pos, end, carry = {}, sorted(wanted, reverse=True), 0, off, off + size, b""
    while todo and pos < end:
        piece = os.pread(fd, min(2**16, end - pos), pos)
        if not piece:
            break
        pos += len(piece)
        parts = (carry + piece).split(b"\n")
        carry = parts.pop()  # (a line's start: its end is in the next piece)
        while todo and todo[-1] < first + len(parts):
            i = todo.pop()
            out[i] = parts[i - first]
        first += len(parts)
    return out


def work(fd: str, start: str, plans: str) -> int:
    """The worker process's entry: plan the blocks of the open file `fd` from byte `start`
    into the file `plans`; it stops if its parent has gone."""
    try:
        _plan_blocks(int(fd), int(start), plans)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent stops it too
        return 130
    return 0


def _plan_blocks(fd: int, at: int, plans: str) -> None:
    shapes, parent = _Shapes(None), os.getppid()
    carry, read = b"", at
    out = os.open(plans, os.O_WRONLY)
    try:
        while True:
            if os.getppid() != parent:
                return
            chunk = os.pread(fd, PLAN_CHUNK, read)
            if not chunk:
                break
            read += len(chunk)
            buf = carry + chunk if carry else chunk
            chunk = None  # (only the block is held while it is planned: the peak RSS)
            cut = buf.rfind(b"\n") + 1
            block, carry = buf[:cut], buf[cut:]
            buf = None
            if cut:
                plan = shapes.plan(block, counted_only=True)
                if plan is not None and plan.ordered:
                    plan = None  # lines that need the fold before them first: read by the parent
                if plan is not None:
                    plan.lines = None  # the parent reads a kept row's line from the file
                _write(out, ("block", at, cut, plan))
                at += cut
            if len(carry) > OVERLONG:
                break  # a line cut for length: the rest is read by the parent, as before
        _write(out, ("rest", at) if carry else ("end",))
    finally:
        os.close(out)


def _write(out: int, rec: tuple) -> None:
    """One record for _records: its length, then its pickle."""
    data = pickle.dumps(rec, pickle.HIGHEST_PROTOCOL)
    data = len(data).to_bytes(8, "little") + data
    while data:
        data = data[os.write(out, data):]


def _skip_rest(chunk: bytes, state: "_State") -> tuple[bytes, bool]:
    if state.pending_cr:  # a \r ended the cut line; a \n right after it is the same line end
        state.pending_cr = False
        if chunk.startswith(b"\n"):
            return chunk[1:], False
        return chunk, False
    m = _EOL.search(chunk)
    if m is None:
        return b"", True
    if m.group() == b"\r" and m.end() == len(chunk):
        state.pending_cr = True
        return b"", True
    return chunk[m.end():], False


_EOL = re.compile(rb"\r\n?|\n")
# an other line that may add a stats sample or change the last one (ingest.run.STATS_MARKERS, vLLM's
# STATS_START, its prefix-hit and acceptance lines): the fast rows before it are folded first
_ORDERED = re.compile(rb"Decode batch|Prefill batch|Avg prompt throughput|Avg generation throughput"
                      rb"|Total generation tokens|Prefix cache hit rate: GPU:|acceptance length")


class _State:
    def __init__(self, sgl, vll, route):
        self.sgl, self.vll, self.route = sgl, vll, route
        self.lineno = 0
        self.fast_lines = 0  # rows fed to no parser: each log parser counts them as lines
        self.pending_cr = False
        self.fast = _Shapes(self)

    # ------------------------------------------------------------ lines the parsers read

    def text_lines(self, data: bytes) -> None:
        """Complete lines (ending in \\n) through the line parsers, as the text reader reads them."""
        if b"\r" in data or len(data) > MAX_LINE_CHARS:
            from kb.textfile import lines  # (here: the worker process needs none of kb.textfile)

            with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=None) as fh:
                for line in lines(fh):
                    self.lineno += 1
                    self.route(self.lineno, line)
            return
        for raw in data.split(b"\n")[:-1]:
            self.lineno += 1
            self.route(self.lineno, raw.decode("utf-8", "replace"))

    def overlong(self, carry: bytes) -> tuple[bytes, bool]:
        """More than OVERLONG bytes without \\n: lines ended by \\r, or one line to cut."""
        cr = carry.rfind(b"\r", 0, len(carry) - 1)
        if cr >= 0:
            self.text_lines(carry[: cr + 1] + b"\n")  # "...\r" + "\n" reads as the one line end
            return carry[cr + 1:], False
        self.lineno += 1
        self.route(self.lineno, carry.decode("utf-8", "replace")[:MAX_LINE_CHARS])
        return b"", True

    # ------------------------------------------------------------ a block of complete lines

    def block(self, data: bytes) -> None:
        if not self.fast.block(data):
            self.rows_block(data)

    def rows_block(self, data: bytes) -> None:
        """A block through the row pattern, run by run (any block the shape path declines)."""
        # the extra fields this block holds at all (a bytes search is far cheaper than a column per run)
        self.extras = [(c, k) for c, k in _SG_EXTRA if b", " + k.encode() + b": " in data]
        rows = ROWS.findall(data)
        cols = list(zip(*rows, strict=True))
        other = cols[OTHER]
        start, inside = 0, 0  # first row of the current run; other lines read inside it
        for i in compress(range(len(rows)), other):
            text = other[i]
            if b"\r" in text or len(text) > MAX_LINE_CHARS or _ORDERED.search(text):
                # it may add a sample or change the last one (or is not one line): fold the rows before it first
                if i > start:
                    self.run(cols, start, i, inside)
                self.text_lines(text)
                start, inside = i + 1, 0
            else:  # it touches no state the fast rows change: the run goes on around it
                self.route(self.lineno + (i - start) + 1, text[:-1].decode("utf-8", "replace"))
                inside += 1
        if start < len(rows):
            self.run(cols, start, len(rows), inside)

    def run(self, cols: list, a: int, b: int, inside: int) -> None:
        """Rows a..b-1, one line each from line self.lineno + 1, are fast rows but for
        `inside` other lines already read."""
        base = self.lineno - a  # line of row i is base + i + 1
        self.fast_lines += b - a - inside
        self._engine(self.sgl, cols, cols[SG], a, b, base, self._sglang)
        self._engine(self.vll, cols, cols[VL], a, b, base, self._vllm)
        self.lineno = base + b

    def _engine(self, p, cols, mark, a, b, base, fold) -> None:
        """One engine's rows of a run: the rows the sampler keeps through the parsers
        (one line each, in order), the rows between them folded into the aggregates."""
        idx = list(compress(range(a, b), mark[a:b]))
        if not idx:
            return
        sm, j, start = p.sampler, 0, a
        while j < len(idx):
            skip = -sm.seen % sm.stride  # rows before the next one the sampler keeps
            if skip >= len(idx) - j:
                sm.seen += len(idx) - j
                fold(p, cols, start, b)
                return
            sm.seen += skip
            j += skip
            i = idx[j]
            if i > start:
                fold(p, cols, start, i)
            self.fast_lines -= 1  # this row goes through the parsers, which count it
            self.route(base + i + 1, mark[i].decode("ascii"))
            start, j = i + 1, j + 1

    def _sglang(self, p, cols, a: int, b: int) -> None:
        """sglang_log._batch and SampleStats.observe over a run's Decode/Prefill rows."""
        st = p.stats
        run = _ints(cols[D_RUN], a, b)
        if run:
            n = len(run)
            st.n["decode"] += n
            _add_running(st, n, sum(run), max(run))
            q = _ints(cols[D_Q], a, b)
            if q:
                st.queue_known += len(q)
                st.queue_nonzero += len(q) - q.count(0)
                st.queued_max = _mx(st.queued_max, max(q))
            st.token_usage_max = _mx(st.token_usage_max, _usage(cols, D_USE, D_FULL, D_SWA, a, b))
            graph = cols[D_GRAPH][a:b]
            false = graph.count(b"False")
            if false:
                st.graph_false += false
                st.graph_false_running_max = _mx(
                    st.graph_false_running_max, max(map(int, compress(cols[D_RUN][a:b], map(b"False".__eq__, graph)))))
            acc = _floats(cols[D_ACC], a, b)
            if acc:  # in file order, as SampleStats.accept adds them
                st.accept_sum = reduce(add, acc, st.accept_sum)
                st.accept_n += len(acc)
                st.accept_max = _mx(st.accept_max, max(acc))
            gen = _floats(cols[D_GEN], a, b)
            st.gen_max = _mx(st.gen_max, max(gen))
            st.gen_sum = reduce(add, gen, st.gen_sum)  # in file order, as the line reader adds
            st.gen_n += n
        new = _ints(cols[P_NEW], a, b)
        if new:
            st.n["prefill"] += len(new)
            st.token_usage_max = _mx(st.token_usage_max, _usage(cols, P_USE, P_FULL, P_SWA, a, b))
            prompt = _floats(cols[P_IN], a, b)
            if prompt:
                st.prompt_max = _mx(st.prompt_max, max(prompt))
            p.new_tokens += sum(new)
            p.cached_tokens += sum(_ints(cols[P_CACHED], a, b))
        if run or new:
            p.recognised = True
            for col, key in self.extras:
                vals = _floats(cols[col], a, b, b"%")
                if vals:
                    st.extra(key, max(vals))
            _ranks(st, (r.strip() for r in dict.fromkeys(compress(cols[SG_RANK][a:b], cols[SG][a:b]))))

    @staticmethod
    def _vllm(p, cols, a: int, b: int) -> None:
        """vllm_log._stats and SampleStats.observe over a run's stats rows."""
        st = p.stats
        for v1, (prompt_c, gen_c, run_c, wait_c, use_c) in ((True, V1), (False, V0)):
            run = _ints(cols[run_c], a, b)
            if not run:
                continue
            n = len(run)
            p.recognised = True
            st.n["stats"] += n
            _add_running(st, n, sum(run), max(run))
            q = _ints(cols[wait_c], a, b)
            st.queue_known += n
            st.queue_nonzero += n - q.count(0)
            st.queued_max = _mx(st.queued_max, max(q))
            st.token_usage_max = _mx(st.token_usage_max, max(round(v / 100, 6) for v in _floats(cols[use_c], a, b)))
            st.prompt_max = _mx(st.prompt_max, max(_floats(cols[prompt_c], a, b)))
            gen = _floats(cols[gen_c], a, b)
            st.gen_max = _mx(st.gen_max, max(gen))
            st.gen_sum = reduce(add, gen, st.gen_sum)
            st.gen_n += n
            p.last = None  # the last stats line was not kept: what later lines add to it is not seen
            if v1:
                engines = [e.decode() for e in dict.fromkeys(filter(None, cols[V1_ENG][a:b]))]
                for e in engines:
                    if len(p.engines) < 256:
                        p.engines.add(e)
                _ranks(st, (f"Engine {e}" for e in engines))
            else:
                st.extra("Swapped", float(max(_ints(cols[V0_SWAP], a, b))))
                st.extra("CPU KV cache usage", max(_floats(cols[V0_CPU], a, b)) / 100)


(D_RUN, D_USE, D_FULL, D_SWA, D_ACC, D_GRAPH, D_GEN, D_Q, P_NEW, P_CACHED, P_USE, P_FULL, P_SWA, P_IN, SG_RANK,
 V1_ENG, V0_SWAP, V0_CPU) = (COL[k] for k in (
    "d_run", "d_use", "d_full", "d_swa", "d_acc", "d_graph", "d_gen", "d_q", "p_new", "p_cached", "p_use", "p_full",
    "p_swa", "p_in", "sg_rank", "v1_eng", "v0_swap", "v0_cpu"))
V1 = tuple(COL["v1_" + k] for k in ("prompt", "gen", "run", "wait", "use"))
V0 = tuple(COL["v0_" + k] for k in ("prompt", "gen", "run", "pend", "use"))


def _usage(cols, use, full, swa, a, b) -> float | None:
    """The run's largest token usage; a hybrid (SWA) model's is the fuller of its two pools."""
    best = max(_floats(cols[use], a, b), default=None)
    for f, s in zip(cols[full][a:b], cols[swa][a:b], strict=True):
        if f:
            best = _mx(best, max(float(f), float(s) if s else 0.0))
    return best


def _ints(col, a, b) -> list[int]:
    return list(map(int, filter(None, col[a:b])))


def _floats(col, a, b, strip: bytes = b"") -> list[float]:
    vals = filter(None, col[a:b])
    return list(map(float, (v.rstrip(strip) for v in vals) if strip else vals))


def _add_running(st, n: int, total: int, most: int) -> None:
    """`n` stats rows' running counts (their sum and maximum) into the aggregates (both engines alike)."""
    st.load += n
    st.running_sum += total
    st.running_n += n
    st.running_max = _mx(st.running_max, most)


def _mx(a, b):
    return b if a is None or b > a else a


def _count(col: list[bytes]) -> tuple[int, int, int, int]:
    """(count, sum, maximum, zeros) of a column of whole numbers: each distinct value is
    converted once (counts and queue lengths repeat a few values over and over)."""
    vals = [(int(k), n) for k, n in Counter(col).items()]
    return len(col), sum(k * n for k, n in vals), max(k for k, _ in vals), sum(n for k, n in vals if k == 0)


def _merged(counts: list[tuple]) -> tuple[int, int, int, int]:
    return sum(c[0] for c in counts), sum(c[1] for c in counts), max(c[2] for c in counts), sum(c[3] for c in counts)


def _queue(c: tuple) -> tuple[int, int, int]:
    """(rows, rows with a queue, longest queue) from _count's figures."""
    return c[0], c[0] - c[3], c[2]


def _ranks(st, ranks: Iterable) -> None:
    from ingest.serverlog import MAX_RANKS

    for r in ranks:
        if len(st.ranks) >= MAX_RANKS:
            return
        r = r.decode() if isinstance(r, bytes) else r
        if r:
            st.ranks.add(r)


# ---------------------------------------------------------------- the shape path
#
# A line's shape is the line with every digit written as 0 (widths kept): two lines of one
# shape take the same path through ROWS, since ROWS reads digits only as \d (the access
# line's literal digits are checked apart: _ACCESS_TAIL). So ROWS runs once per new shape,
# not once per line; a shape's numbers sit at fixed places among the line's runs of digits
# and dots, so one split of all the lines of a shape gives every field of every line.

_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NUMBERS = bytes(c if c in b"0123456789." else 32 for c in range(256))  # runs of digits and dots, all else a space
_TOKEN = re.compile(rb"[0-9.]+")
_ACCESS_TAIL = re.compile(rb'- "(?:GET|POST) /(?:v1/chat/completions|v1/completions|generate|health|metrics|v1/models'
                          rb'|get_model_info|get_server_info|version|ping|tokenize|detokenize|health_generate'
                          rb'|flush_cache|v1/embeddings) HTTP/1\.[01]" [1-4]\d\d(?: OK|(?: [A-Z][a-z]+)+)\n')
# the order-dependent float fields (sums), read from each engine's rows in file order
_SG_GEN = re.compile(rb"gen throughput \(token/s\): (" + _F + rb")")
_SG_ACC = re.compile(rb"accept len: (" + _F + rb")")
_VL_GEN = re.compile(rb"Avg generation throughput: (" + _F + rb") tokens/s")
MAX_SHAPES = 4096  # shapes (and layouts) remembered per file; past that a new one takes the row path
_NUMERIC = {name for name in COL if name not in ("sg", "vl", "other", "sg_rank", "d_graph")} | {"v1_pre"}


class _Shape:
    """The lines of one layout (engine kind and where each field sits among the line's numbers)."""

    def __init__(self, kind: str, k: int, fields: dict, rank: tuple | None, graph_false: bool):
        self.kind, self.k, self.fields, self.rank, self.graph_false = kind, k, fields, rank, graph_false
        self.preempt = "v1_pre" in fields
        self.rows: list[bytes] = []
        self.engine_rows: list = []  # the line indices of this engine's rows (shared by one engine's shapes)
        self.engine_lines: list = []  # and the lines themselves, in file order

    def col(self, toks: list, name: str) -> list:
        return toks[self.fields[name]::self.k]


class _Plan:
    """One block as _Shapes.plan reads it: its line count, its lines (not sent by the worker),
    the lines that need the fast rows before them folded first (then nothing else is set), the
    other lines by index, each engine's row indices, the access rows, whether a row holds
    vLLM's Preemptions field, and the figures to fold (_Shapes.gather). (A plain class: the
    worker process then need not import dataclasses.)"""

    __slots__ = ("n", "lines", "ordered", "others", "sg_rows", "vl_rows", "n_access", "preempt", "fold")

    def __init__(self, n: int, lines: list | None, ordered: list, others: dict | None = None,
                 sg_rows: list | None = None, vl_rows: list | None = None, n_access: int = 0,
                 preempt: bool = False, fold: dict | None = None):
        self.n, self.lines, self.ordered, self.others = n, lines, ordered, others or {}
        self.sg_rows, self.vl_rows, self.n_access = sg_rows or [], vl_rows or [], n_access
        self.preempt, self.fold = preempt, fold or {}


def _fold(st: "_State", f: dict) -> None:
    """A block's figures (_Shapes.gather) into the aggregates, as the line parsers add them
    (sglang_log._batch, vllm_log._stats, SampleStats.observe); float sums in file order."""
    p, sgl = st.sgl, st.sgl.stats
    if f["dec"]:
        run, q, per_shape = f["dec"]
        sgl.n["decode"] += run[0]
        _add_running(sgl, *run)
        if q:
            sgl.queue_known += q[0]
            sgl.queue_nonzero += q[1]
            sgl.queued_max = _mx(sgl.queued_max, q[2])
        for usage, graph in per_shape:
            sgl.token_usage_max = _mx(sgl.token_usage_max, usage)
            if graph:
                sgl.graph_false += graph[0]
                sgl.graph_false_running_max = _mx(sgl.graph_false_running_max, graph[1])
        acc = f["sg_acc"]
        if acc:
            sgl.accept_sum = reduce(add, acc, sgl.accept_sum)
            sgl.accept_n += len(acc)
            sgl.accept_max = _mx(sgl.accept_max, max(acc))
        gen = f["sg_gen"]
        sgl.gen_max = _mx(sgl.gen_max, max(gen))
        sgl.gen_sum = reduce(add, gen, sgl.gen_sum)
        sgl.gen_n += len(gen)
    for n, usage, prompt, new, cached in f["pre"]:
        sgl.n["prefill"] += n
        sgl.token_usage_max = _mx(sgl.token_usage_max, usage)
        if prompt is not None:
            sgl.prompt_max = _mx(sgl.prompt_max, prompt)
        p.new_tokens += new
        p.cached_tokens += cached
    if f["sg"]:
        p.recognised = True
        for key, value in f["extra"]:
            sgl.extra(key, value)
        _ranks(sgl, f["ranks"])
    p, vll = st.vll, st.vll.stats
    for run, q, usage, prompt, preempt, v0 in f["vl"]:
        p.recognised = True
        vll.n["stats"] += run[0]
        _add_running(vll, *run)
        vll.queue_known += q[0]
        vll.queue_nonzero += q[1]
        vll.queued_max = _mx(vll.queued_max, q[2])
        vll.token_usage_max = _mx(vll.token_usage_max, usage)
        vll.prompt_max = _mx(vll.prompt_max, prompt)
        if preempt:  # as vllm_log._stats: the field's maximum, and N events per line (counted only)
            vll.extra("Preemptions", preempt[0])
            if preempt[1]:
                p.events.counts["preempt"] += preempt[1]
        if v0:
            vll.extra("Swapped", v0[0])
            vll.extra("CPU KV cache usage", v0[1])
    gen = f["vl_gen"]
    if gen:
        vll.gen_max = _mx(vll.gen_max, max(gen))
        vll.gen_sum = reduce(add, gen, vll.gen_sum)
        vll.gen_n += len(gen)
        for e in f["engines"]:
            if len(p.engines) < 256:
                p.engines.add(e)
        _ranks(vll, f["eng_ranks"])


_ROWS_OF = attrgetter("rows")
_ENGINE_ROWS_OF = attrgetter("engine_rows")
_ENGINE_LINES_OF = attrgetter("engine_lines")


class _Shapes:
    """A block of complete lines by shape; False (and nothing changed) when the block
    holds anything the shape path does not take, so the row path reads it."""

    def __init__(self, state: "_State"):
        self.state = state
        self.known: dict[bytes, _Shape] = {}
        self.layouts: dict[tuple, _Shape] = {}
        self.engine_rows = {"sg": [], "vl": [], "access": []}
        self.engine_lines = {"sg": [], "vl": [], "access": []}
        self.other = _Shape("other", 0, {}, None, False)  # every line that is not a fast row

    def classify(self, line: bytes) -> _Shape | None:
        """The layout of a fast row, self.other for any other line, None for a fast row whose
        numbers do not sit apart (never seen: the block then takes the row path)."""
        m = ROWS.match(line + b"\n")
        if m.group("other") is not None:
            m = _V1_PREEMPT.match(line + b"\n") if b"Preemptions: " in line else None
            if m is None:
                return self.other
        kind = "vl" if m.re is _V1_PREEMPT else (
            "sg" if m.group("sg") is not None else "vl" if m.group("vl") is not None else "access")
        starts = {t.span(): i for i, t in enumerate(_TOKEN.finditer(line))}
        fields = {}
        for name in _NUMERIC:
            text = m.group(name) if name in m.re.groupindex else None
            if text is None:
                continue
            s, e = m.span(name)
            e -= text.endswith(b"%")
            if (s, e) not in starts:
                return None
            fields[name] = starts[s, e]
        rank = None
        if kind == "sg" and m.group("sg_rank"):
            s, e = m.span("sg_rank")
            inside = [t.span() for t in _TOKEN.finditer(line, s, e)]
            idx = [starts.get(span) for span in inside]
            if None in idx:
                return None
            template, at = [], s
            for ts, te in inside:
                template.append(line[at:ts].decode().replace("{", "{{").replace("}", "}}"))
                template.append("{}")
                at = te
            template.append(line[at:e].decode().replace("{", "{{").replace("}", "}}"))
            rank = ("".join(template).strip(), tuple(idx))
        if kind == "sg":
            kind = "sgd" if "d_run" in fields else "sgp"
        elif kind == "vl":
            kind = "v1" if "v1_run" in fields else "v0"
        graph = m.group("d_graph") if kind == "sgd" else None
        key = (kind, len(starts), tuple(sorted(fields.items())), rank, graph)
        shape = self.layouts.get(key)
        if shape is None:
            if len(self.layouts) >= MAX_SHAPES:
                return None  # (a damaged log inventing rank names): the row path, in bounded memory
            shape = self.layouts[key] = _Shape(kind, len(starts), fields, rank, graph == b"False")
            engine = "sg" if kind[:2] == "sg" else "vl" if kind[0] == "v" else "access"
            shape.engine_rows, shape.engine_lines = self.engine_rows[engine], self.engine_lines[engine]
        return shape

    def block(self, data: bytes) -> bool:
        plan = self.plan(data, self.preempts_counted_only())
        if plan is None:
            return False
        if plan.ordered:
            self.around(data, plan.lines, plan.ordered)
            return True
        return self.apply(plan, lambda n: plan.lines)

    def plan(self, data: bytes, counted_only: bool) -> "_Plan | None":
        """What the block adds, read without the parsers' state (the worker process reads
        its blocks with this alone); None if the shape path does not take the block.
        `counted_only`: whether the vLLM parser only counts preempt events by now."""
        if b"\r" in data:
            return None
        lines = data.split(b"\n")
        lines.pop()
        if len(data) >= MAX_LINE_CHARS and max(map(len, lines)) >= MAX_LINE_CHARS:
            return None
        shapes_of = data.translate(_ZERO).split(b"\n")
        shapes_of.pop()
        shapes = list(map(self.known.get, shapes_of))
        others, ordered, i = [], [], -1
        while True:
            try:
                i = shapes.index(None, i + 1)
            except ValueError:
                break
            shape = self.known.get(shapes_of[i]) or self.classify(lines[i])  # (seen earlier in this block)
            if shape is None:
                return None
            if shape.preempt and not counted_only:
                ordered.append(i)  # its preempt events are still kept in full: the parser reads it
                shapes[i] = self.other
                continue
            if shape is self.other:
                if _ACCESS_TAIL.search(lines[i] + b"\n"):
                    return None  # it would hide an access line of a shape read as good
                (ordered if _ORDERED.search(lines[i]) else others).append(i)
            elif len(self.known) < MAX_SHAPES:
                self.known[shapes_of[i]] = shape
            shapes[i] = shape
        if ordered:
            return _Plan(len(lines), lines, ordered)
        del shapes_of  # (less memory held while the numbers are read)
        for shape in self.layouts.values():
            shape.rows.clear()
        for rows in (*self.engine_rows.values(), *self.engine_lines.values()):
            rows.clear()
        deque(map(list.append, map(_ENGINE_LINES_OF, shapes), lines), 0)
        deque(map(list.append, map(_ROWS_OF, shapes), lines), 0)
        self.other.rows.clear()
        self.other.engine_lines.clear()
        used = [s for s in self.layouts.values() if s.rows]
        fold = self.gather(used)
        n_access = sum(len(s.rows) for s in used if s.kind == "access")
        for rows in (*(s.rows for s in used), *self.engine_lines.values()):
            rows.clear()  # (the block's lines are not held past it: the peak RSS)
        if fold is None:
            return None
        deque(map(list.append, map(_ENGINE_ROWS_OF, shapes), range(len(lines))), 0)
        self.other.engine_rows.clear()
        return _Plan(len(lines), lines, [], {i: lines[i] for i in others}, list(self.engine_rows["sg"]),
                     list(self.engine_rows["vl"]), n_access, any(s.preempt for s in used), fold)

    def apply(self, plan: "_Plan", lines_of: Callable[[dict], dict | list]) -> bool:
        """A planned block into the parsers' state, in file order; False (nothing changed)
        if a cap is reached inside it. `lines_of(indices)` gives the block's lines at those
        indices (the kept rows), by index."""
        from ingest.serverlog import MAX_RANKS

        st, f = self.state, plan.fold
        if (len(st.sgl.stats.ranks | set(f["ranks"])) > MAX_RANKS > len(st.sgl.stats.ranks)
            or len(st.vll.stats.ranks | set(f["eng_ranks"])) > MAX_RANKS > len(st.vll.stats.ranks)
                or len(st.vll.engines | set(f["engines"])) > 256 > len(st.vll.engines)):
            return False  # a cap reached inside the block: which ones are kept depends on the order
        n_sg, n_vl = len(plan.sg_rows), len(plan.vl_rows)
        kept, seen = {}, {st.sgl: st.sgl.sampler.seen + n_sg, st.vll: st.vll.sampler.seen + n_vl}
        if any(-p.sampler.seen % p.sampler.stride < n for p, n in ((st.sgl, n_sg), (st.vll, n_vl))):
            kept = {**self.kept(st.sgl, plan.sg_rows), **self.kept(st.vll, plan.vl_rows)}
        lines = lines_of(kept) if kept else None
        base = st.lineno
        for i in sorted([*plan.others, *kept]):
            if i in kept:
                self.feed_kept(kept[i][0], kept[i][1], base + i + 1, lines[i].decode("ascii"))
            else:
                st.route(base + i + 1, plan.others[i].decode("utf-8", "replace"))
        for p, n in seen.items():
            p.sampler.seen = n  # every row of the block counted, kept or not
        st.fast_lines += n_sg + n_vl + plan.n_access - len(kept)
        st.lineno = base + plan.n
        _fold(st, f)
        if n_vl and not (kept and plan.vl_rows[-1] in kept):
            st.vll.last = None  # the last stats line was not kept: what later lines add to it is not seen
        return True

    def around(self, data: bytes, lines: list[bytes], ordered: list[int]) -> None:
        """A block holding lines that may add a sample or change the last one (vLLM's
        acceptance and prefix-hit lines): the rows before each are read first, then it."""
        st, at, prev = self.state, 0, 0
        for i in ordered:
            end = at + sum(map(len, lines[prev:i])) + (i - prev)
            if end > at and not self.block(data[at:end]):
                st.rows_block(data[at:end])
            at = end + len(lines[i]) + 1
            st.text_lines(data[end:at])
            prev = i + 1
        if at < len(data) and not self.block(data[at:]):
            st.rows_block(data[at:])

    def preempts_counted_only(self) -> bool:
        """Whether the vLLM parser now only counts preempt events (EventLog keeps the first
        `per_kind` in full, in file order) and has seen the Preemptions field: a V1 line with
        Preemptions then changes only those two, in no order-dependent way, and can be folded."""
        p = self.state.vll
        return p.events.counts.get("preempt", 0) >= p.events.per_kind and "Preemptions" in p.stats.extra_max

    @staticmethod
    def kept(p, rows: list[int]) -> dict:
        """The rows the sampler keeps ({line index: (parser, seen before it)}), as LineSampler.add
        would pick them; the stride doubles when the kept items reach the cap."""
        sm, out = p.sampler, {}
        seen, stride, held, j = sm.seen, sm.stride, len(sm.items), 0
        while True:
            skip = -seen % stride
            if skip >= len(rows) - j:
                return out
            seen += skip
            j += skip
            out[rows[j]] = (p, seen)
            held += 1
            if held >= sm.cap:
                held, stride = (held + 1) // 2, stride * 2
            seen += 1
            j += 1

    def feed_kept(self, p, seen: int, lineno: int, line: str) -> None:
        """A kept row through the parsers for its sample only: its figures are in the aggregates."""
        st = self.state
        p.sampler.seen = seen
        real, counts = p.stats, (getattr(p, "new_tokens", 0), getattr(p, "cached_tokens", 0))
        events = p.events.counts  # a V1 row's preemptions are folded too (only counted by now)
        from ingest.serverlog import SampleStats

        p.stats, p.events.counts = SampleStats(), dict(events)  # thrown away: what the parser adds is already folded
        try:
            # a fast row holds a stats marker, so `route` gives it to the two log parsers only;
            # the other engine's parser reads nothing in it (as for every fast row): it counts it
            p.feed(lineno, line)
            (st.vll if p is st.sgl else st.sgl).lines += 1
        finally:
            p.stats, p.events.counts = real, events
            if hasattr(p, "new_tokens"):  # sglang's prefill token sums are the parser's own: folded too
                p.new_tokens, p.cached_tokens = counts

    def gather(self, used: list) -> dict | None:
        """What the block adds to the aggregates, as plain figures in the order `_fold` adds
        them; None if the block's order-dependent fields cannot be read in file order here."""
        dec = [s for s in used if s.kind == "sgd"]
        pre = [s for s in used if s.kind == "sgp"]
        vls = [s for s in used if s.kind in ("v1", "v0")]
        n_acc = sum(len(s.rows) for s in dec if "d_acc" in s.fields)
        # in file order: each engine's rows, which are all of one of its shapes (other lines are checked apart)
        sg = b"\n".join(self.engine_lines["sg"]) if dec else b""
        sg_gen = list(map(float, _SG_GEN.findall(sg))) if dec else []
        sg_acc = list(map(float, _SG_ACC.findall(sg))) if n_acc else []
        sg = None
        vl_gen = list(map(float, _VL_GEN.findall(b"\n".join(self.engine_lines["vl"])))) if vls else []
        if (len(sg_gen) != sum(len(s.rows) for s in dec) or len(sg_acc) != n_acc
                or len(vl_gen) != sum(len(s.rows) for s in vls)):
            return None
        access = [s for s in used if s.kind == "access"]
        if access:  # every access row's digits as the row pattern reads them (its shape does not tell)
            rows = b"\n".join(b"\n".join(s.rows) for s in access) + b"\n"
            if len(_ACCESS_TAIL.findall(rows)) != sum(len(s.rows) for s in access):
                return None
        ranks, engines, runs, qs, per_dec = set(), set(), [], [], []
        f = {"sg": bool(dec or pre), "dec": None, "pre": [], "vl": [], "extra": [], "sg_gen": sg_gen,
             "sg_acc": sg_acc, "vl_gen": vl_gen}
        for s in dec + pre + vls:  # one shape's numbers at a time (less memory held at once)
            t = b"\n".join(s.rows).translate(_NUMBERS).split()
            if len(t) != s.k * len(s.rows):
                return None
            if s.rank:
                template, idx = s.rank
                ranks.update(template.format(*(v.decode() for v in vals))
                             for vals in set(zip(*(t[j::s.k] for j in idx), strict=False)))
            if s.kind == "sgd":
                runs.append(_count(s.col(t, "d_run")))
                if "d_q" in s.fields:
                    qs.append(_count(s.col(t, "d_q")))
                per_dec.append((self.usage(s, t, "d"), (runs[-1][0], runs[-1][2]) if s.graph_false else None))
            elif s.kind == "sgp":
                f["pre"].append((len(s.rows), self.usage(s, t, "p"),
                                 max(map(float, s.col(t, "p_in"))) if "p_in" in s.fields else None,
                                 sum(map(int, s.col(t, "p_new"))), sum(map(int, s.col(t, "p_cached")))))
            else:
                f["vl"].append(self.vllm(s, t))
                if "v1_eng" in s.fields:
                    engines.update(e.decode() for e in set(s.col(t, "v1_eng")))
            if s.kind in ("sgd", "sgp"):
                f["extra"] += [(key, max(map(float, s.col(t, name))))
                               for name, key in EXTRA.items() if name in s.fields]
        if dec:
            f["dec"] = (_merged(runs)[:3], _queue(_merged(qs)) if qs else None, per_dec)
        f["ranks"], f["engines"] = sorted(ranks), sorted(engines)
        f["eng_ranks"] = sorted(f"Engine {e}" for e in engines)
        return f

    @staticmethod
    def vllm(s: _Shape, t: list) -> tuple:
        """One vLLM stats shape's figures for _fold."""
        v1 = s.kind == "v1"
        prompt_f, run_f, wait_f, use_f = (("v1_" if v1 else "v0_") + k for k in
                                          ("prompt", "run", "wait" if v1 else "pend", "use"))
        pre_n = list(map(int, s.col(t, "v1_pre"))) if s.preempt else None
        return (_count(s.col(t, run_f))[:3], _queue(_count(s.col(t, wait_f))),
                round(max(map(float, s.col(t, use_f))) / 100, 6), max(map(float, s.col(t, prompt_f))),
                (float(max(pre_n)), sum(pre_n)) if s.preempt else None,
                None if v1 else (float(max(map(int, s.col(t, "v0_swap")))),
                                 max(map(float, s.col(t, "v0_cpu"))) / 100))

    @staticmethod
    def usage(s: _Shape, toks: list, which: str) -> float:
        """The rows' largest token usage; a hybrid (SWA) model's is the fuller of its two pools."""
        if which + "_use" in s.fields:
            return max(map(float, s.col(toks, which + "_use")))
        best = max(map(float, s.col(toks, which + "_full")))
        if which + "_swa" in s.fields:
            best = max(best, max(map(float, s.col(toks, which + "_swa"))))
        return best
