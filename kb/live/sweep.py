"""`kb sweep URL`: an OpenAI-compatible streaming load generator over concurrency levels.

Per level, `c` workers send streaming `/v1/completions` requests back to back
(`stream: true`, `ignore_eos: true`, `max_tokens` = the output length, prompts of
the requested token length made of repeated words in a per-request order) until
the level's request count or duration is reached. Timing follows vLLM's
`benchmarks/serve.py` so the figures compare: TTFT is the first chunk carrying a
choice, ITL the gaps between later chunks, TPOT (latency − TTFT) / (output
tokens − 1), token counts from the `usage` chunk, duration from the level's start
to its last answer. While a level runs, `/metrics` is sampled (running, waiting,
KV-cache usage, preemptions, generated tokens).

Each finished level is one JSON line in the shape of sglang's
`bench_serving --output-file` plus `server_info` (from the probe) and
`kb_metrics` (the samples), written as soon as the level ends, so `kb diagnose`
and `ingest.run` read it like any other benchmark and a crash or Ctrl-C keeps
the finished levels.

Bounds: requests per level (`--requests`, default max(16, 4×c)), an optional
duration per level (`--duration`), a cap on a level's wall time
(`--max-level-time`), a read timeout per chunk; traffic goes only to the URL given.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import aiohttp
import httpx

from kb.errors import KbError, ServerError
from kb.live import client as cl
from kb.live.metrics import Scrape, prefixes
from kb.live.probe import ProbeResult
from kb.progress import LevelBar

TOOL = "kb-sweep"
DATASET = "random-words"
MAX_SAMPLES_PER_LEVEL = 600
# Short, common English words: one token each in most BPE vocabularies; the
# calibration measures what they cost in this server's tokenizer anyway.
WORDS = ("the of and to in is for on that with as it at by from this be are was or an "
         "time data model server token batch cache queue request stream layer kernel memory").split()


DEFAULT_INPUT_LEN = 256
DEFAULT_OUTPUT_LEN = 256


@dataclass
class SweepOptions:
    levels: list[int]
    requests: int | None = None  # per level; default max(16, 4 × concurrency)
    duration: float | None = None  # seconds per level: stop sending after this
    input_len: int | None = None  # tokens; None: DEFAULT_INPUT_LEN, fitted to the server's context
    output_len: int | None = None  # tokens; None: DEFAULT_OUTPUT_LEN, fitted likewise
    max_level_time: float = 900.0  # hard cap on one level's wall time
    metrics_interval: float = 1.0  # a scrape costs the server: 4 a second slowed a CPU vLLM's decode ~15%
    first_sample: float = 0.25  # so that a short level still gets one sample
    timeouts: cl.Timeouts = field(default_factory=lambda: cl.Timeouts(connect=5.0, read=60.0))
    seed: int = 0
    progress: bool = False  # a progress line on stderr
    rate: bool = False  # levels are request rates (req/s, Poisson arrivals), not concurrencies
    slo: list | None = None  # kb.live.slo objectives: each level gets its goodput and verdict

    def requests_for(self, c: float) -> int:
        if self.requests:
            return self.requests
        if self.duration:
            return 1_000_000  # the duration bounds the level
        return max(16, 4 * math.ceil(c))


@dataclass
class Outcome:
    ok: bool = False
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    transport: bool = False  # the connection failed (not an HTTP or content error)


@dataclass
class SweepResult:
    levels: list[dict] = field(default_factory=list)
    interrupted: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    prompt_words: int = 0
    prompt_tokens: int | None = None
    input_len: int | None = None  # the lengths used, after fitting
    output_len: int | None = None


# ------------------------------------------------------------------ statistics


def percentile(sorted_vals: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation) on a sorted list."""
    if not sorted_vals:
        return 0.0
    k = (len(sorted_vals) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def _stats(prefix: str, metric: str, vals_s: list[float], pcts: tuple[int, ...]) -> dict[str, float]:
    v = sorted(x * 1000.0 for x in vals_s)
    n = len(v)
    mean = sum(v) / n if n else 0.0
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / n) if n else 0.0
    out = {f"mean_{metric}_ms": mean, f"median_{metric}_ms": percentile(v, 50), f"std_{metric}_ms": std}
    for p in pcts:
        out[f"p{p}_{metric}_ms"] = percentile(v, p)
    return out


def summarise(c: float, outcomes: list[Outcome], duration: float, opts: SweepOptions, model: str | None,
              engine: str | None, issued: int) -> dict[str, Any]:
    done = [o for o in outcomes if o.ok]
    total_in = sum(o.prompt_tokens for o in done)
    total_out = sum(o.output_tokens for o in done)
    d = duration if duration > 0 else float("nan")
    tpots = [(o.latency - o.ttft) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    itls = [x for o in done for x in o.itl]
    errors: dict[str, int] = {}
    for o in outcomes:
        if not o.ok:
            errors[o.error or "failed"] = errors.get(o.error or "failed", 0) + 1
    row: dict[str, Any] = {
        "backend": engine or "openai", "dataset_name": DATASET,
        "request_rate": c if opts.rate else "inf", "max_concurrency": None if opts.rate else c,
        "num_prompts": issued, "random_input_len": opts.input_len, "random_output_len": opts.output_len,
        "model": model, "duration": duration, "completed": len(done), "failed": len(outcomes) - len(done),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / d if done else 0.0,
        "input_throughput": total_in / d if done else 0.0,
        "output_throughput": total_out / d if done else 0.0,
        "total_throughput": (total_in + total_out) / d if done else 0.0,
    }
    row.update(_stats("", "ttft", [o.ttft for o in done], (90, 99)))
    row.update(_stats("", "tpot", tpots, (90, 99)))
    row.update(_stats("", "itl", itls, (90, 95, 99)))
    e2e = _stats("", "e2e_latency", [o.latency for o in done], (90, 99))
    row.update(e2e)
    row["concurrency"] = sum(o.latency for o in done) / d if done else 0.0  # sglang: mean in flight
    row["errors"] = errors
    return {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v) for k, v in row.items()}


# ------------------------------------------------------------------ prompts


class Prompts:
    """Prompts of about `n` tokens: one multiset of words, shuffled per request (so
    no two share a prefix for the prefix cache, yet all cost the same tokens)."""

    def __init__(self, words: int, seed: int):
        self.words = [WORDS[i % len(WORDS)] for i in range(max(1, words))]
        self.seed = seed

    def get(self, i: int) -> str:
        w = list(self.words)
        random.Random(self.seed * 1_000_003 + i).shuffle(w)
        return " ".join(w)


async def _count_tokens(http: httpx.AsyncClient, base: httpx.URL, model: str | None, text: str) -> int | None:
    body = {"prompt": text, "max_tokens": 1, "stream": False}
    if model:
        body["model"] = model
    r = await http.post(cl.join(base, "/v1/completions"), json=body)
    if r.status_code != 200:
        raise ServerError(f"{cl.shown(base)}: POST /v1/completions answered HTTP {r.status_code}: {_err_text(r.text)}")
    try:
        usage = r.json().get("usage") or {}
        n = usage.get("prompt_tokens")
    except (ValueError, AttributeError):
        return None
    return int(n) if isinstance(n, (int, float)) else None


CALIBRATION_START = 32  # words in the first counted prompt: short enough for any context


async def calibrate(http: httpx.AsyncClient, base: httpx.URL, model: str | None, target: int, seed: int,
                    warnings: list[str]) -> tuple[Prompts, int | None]:
    """Find the word count whose prompts cost `target` tokens, or the nearest below it
    (a few 1-token requests). The first prompt is short: a small tokenizer spends several
    tokens per word, and `target` words could exceed the server's context (HTTP 400)."""
    words = min(target, CALIBRATION_START)
    tokens_at: dict[int, int] = {}
    for _ in range(6):
        n = await _count_tokens(http, base, model, Prompts(words, seed).get(0))
        if n is None:
            warnings.append("the server reports no token usage: prompts assume one token per word")
            return Prompts(target, seed), None
        tokens_at[words] = n
        if n == target:
            break
        nxt = max(1, words + round((target - n) * words / max(n, 1)))
        if nxt == words:
            nxt = words + (1 if n < target else -1)
        if nxt in tokens_at or nxt < 1:
            break
        words = nxt
    # not above the target (the output is fitted to the context beside it), else the shortest
    best = min(tokens_at, key=lambda w: (tokens_at[w] > target, abs(tokens_at[w] - target)))
    return Prompts(best, seed), tokens_at[best]


# ------------------------------------------------------------------ one request


def _err_text(body: str) -> str:
    text = body.strip()
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            e = doc.get("error", doc)
            msg = e.get("message") if isinstance(e, dict) else e
            text = str(msg or doc.get("detail") or doc.get("message") or text)
    except ValueError:
        pass
    from kb.redact import redact_text

    return " ".join(redact_text(text[:4096]).split())[:160] or "(empty body)"


def _transport_error(e: BaseException) -> str:
    if isinstance(e, aiohttp.ClientConnectorError):
        return "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else "cannot connect"
    if isinstance(e, aiohttp.ConnectionTimeoutError):
        return "connect timeout"
    if isinstance(e, asyncio.TimeoutError):  # aiohttp's SocketTimeoutError: no bytes within sock_read
        return "read timeout (no token within the read timeout)"
    if isinstance(e, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError)):
        return "connection closed by the server mid-answer"
    return f"{type(e).__name__}"


def _plain_token(payload: bytes) -> bool:
    """A chunk carrying a choice and nothing else kb reads (no usage, no error), told
    apart without parsing it: inside JSON strings a quote is escaped, so these
    byte patterns only match the object's own keys. (Unrolled: a generator over the
    patterns cost a third of the client's own time per token.)"""
    return (b'"choices"' in payload and b'"usage":{' not in payload and b'"usage": {' not in payload
            and b'"error"' not in payload and b'"choices":[]' not in payload and b'"choices": []' not in payload)


_JSON = {"Content-Type": "application/json"}


def stream_session(opts: "SweepOptions", headers: dict, tls, limit: int) -> aiohttp.ClientSession:
    """The client of the streamed requests: aiohttp, whose HTTP parser and chunked
    decoding are C (llhttp), where httpx parses every chunk in Python (h11): on a
    2-core machine shared with the server, the client's CPU per token slows the server
    it measures (docs/PERFORMANCE.md). vLLM's own serving benchmark uses aiohttp too.
    `limit` connections (0: unbounded), no proxies from the environment, no redirects."""
    t = opts.timeouts
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=tls),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=t.connect, sock_read=t.read),
        headers=headers, trust_env=False, auto_decompress=False)


async def one_request(http: aiohttp.ClientSession, url: str, body: dict) -> Outcome:
    out = Outcome()
    st = time.perf_counter()
    last = st
    first = False
    try:
        async with http.post(url, data=json.dumps(body).encode(), headers=_JSON, allow_redirects=False) as r:
            if r.status != 200:
                raw = b""
                while len(raw) <= cl.ERROR_BODY_CAP:
                    more = await r.content.read(cl.ERROR_BODY_CAP + 1 - len(raw))
                    if not more:
                        break
                    raw += more
                out.error = f"HTTP {r.status}: {_err_text(raw.decode('utf-8', 'replace'))}"
                return out
            buf = b""
            async for chunk in r.content.iter_any():
                lines = (buf + chunk).split(b"\n")
                buf = lines.pop()
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]" or not payload:
                        continue
                    data = None
                    if not _plain_token(payload):  # most chunks are plain: no JSON parsing needed
                        try:
                            data = json.loads(payload)
                        except ValueError:
                            continue
                        if not isinstance(data, dict):
                            continue
                    if data is None or data.get("choices"):  # a token: time it
                        now = time.perf_counter()
                        if not first:
                            first = True
                            out.ttft = now - st
                        else:
                            out.itl.append(now - last)
                        last = now
                    if data is None:
                        continue
                    usage = data.get("usage")
                    if isinstance(usage, dict):
                        out.output_tokens = int(usage.get("completion_tokens") or 0)
                        out.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                    if data.get("error") or data.get("object") == "error":
                        out.error = f"error in stream: {_err_text(json.dumps(data))}"
                        return out
        if not first:
            out.error = "no token streamed"
            return out
        out.latency = last - st
        if not out.output_tokens:
            out.output_tokens = len(out.itl) + 1  # no usage chunk: one token per chunk
        out.ok = True
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        out.error = _transport_error(e)
        out.transport = True
    return out


# ------------------------------------------------------------------ progress


class Progress:
    """A rich bar per level on stderr (requests done, failures, time), only when stderr
    is a terminal (kb.progress): a pipe, a file and --json output see nothing of it."""

    def __init__(self, enabled: bool):
        self.bar = LevelBar(enabled)
        self.enabled = self.bar.on
        self.level: float | None = None

    def show(self, c: float, done: int, total: int | None, failed: int, t0: float, force: bool = False) -> None:
        if not self.enabled:
            return
        if self.level != c:
            self.bar.start(f"  c={c:<5g}", total if total and total < 1_000_000 else None)
            self.level = c
        self.bar.update(done, failed)

    def end(self) -> None:
        self.bar.end()
        self.level = None


# ------------------------------------------------------------------ metrics sampling


class Sampler:
    """Scrapes /metrics every `interval` s while a level runs (a separate connection)."""

    def __init__(self, http: httpx.AsyncClient, base: httpx.URL, engine: str, interval: float, first: float = 0.25):
        self.http, self.base, self.engine, self.interval, self.first = http, base, engine, interval, first
        self.samples: list[dict] = []
        self.errors = 0
        self.names: dict[str, str] = {}
        self.only = prefixes(engine)

    async def scrape(self) -> dict | None:
        url = cl.join(self.base, "/metrics")
        try:
            async with self.http.stream("GET", url) as r:
                if r.status_code != 200:
                    return None
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > cl.METRICS_CAP:
                        return None
            s = Scrape.parse(body.decode("utf-8", "replace"), only=self.only)
        except (httpx.HTTPError, ServerError):
            self.errors += 1
            return None
        if not self.names:
            self.names = s.names(self.engine)
        return s.figures(self.engine)

    async def run(self, t0: float, stop: asyncio.Event) -> None:
        interval = self.interval
        wait = min(self.first, interval)  # then every `interval`
        while not stop.is_set():
            try:  # wait, then scrape: no sample before the level's requests arrive
                await asyncio.wait_for(stop.wait(), wait)
                return
            except asyncio.TimeoutError:
                pass
            fig = await self.scrape()
            if fig is not None:
                self.samples.append({"t": round(time.perf_counter() - t0, 3), **fig})
                if len(self.samples) >= MAX_SAMPLES_PER_LEVEL:
                    self.samples = self.samples[::2]
                    interval *= 2
            wait = interval


# ------------------------------------------------------------------ the sweep


async def _alive(http: httpx.AsyncClient, base: httpx.URL) -> bool:
    try:
        r = await http.get(cl.join(base, "/v1/models"), timeout=httpx.Timeout(3.0))
        return r.status_code < 500
    except httpx.HTTPError:
        return False


class _Stop:
    def __init__(self):
        self.interrupted = False
        self.event: asyncio.Event | None = None


async def _run_level(c: int, http: httpx.AsyncClient, mhttp: httpx.AsyncClient, probe: ProbeResult,
                     base: httpx.URL, opts: SweepOptions, prompts: Prompts, stop: _Stop, progress: Progress,
                     make_session: Callable[[int], aiohttp.ClientSession]) -> tuple[list[Outcome], float, int, dict,
                                                                           str | None, bool]:
    """(outcomes, duration, issued, kb_metrics, fatal error or None, truncated).

    The streamed requests share one aiohttp session per level (`c` connections; any
    number at a --rate level)."""
    url = str(cl.join(base, "/v1/completions"))
    n = opts.requests_for(c)
    engine = probe.engine
    sampler = (Sampler(mhttp, base, engine, opts.metrics_interval, opts.first_sample)
               if engine and probe.metrics.get("available") else None)
    before = await sampler.scrape() if sampler else None
    outcomes: list[Outcome] = []
    issued = 0
    level_stop = asyncio.Event()
    stop.event = level_stop
    fatal: list[str] = []
    checking: list[asyncio.Task] = []
    last_check = [0.0]
    t0 = time.perf_counter()
    m0 = time.monotonic()
    deadline = t0 + opts.duration if opts.duration else None

    async def check_alive() -> None:
        if not await _alive(http, base):
            fatal.append("stopped answering")
            level_stop.set()

    async def worker(wc: aiohttp.ClientSession) -> None:
        nonlocal issued
        while not level_stop.is_set():
            if issued >= n or (deadline and time.perf_counter() >= deadline):
                return
            i = issued
            issued += 1
            body = {"prompt": prompts.get(c * 1_000_003 + i), "max_tokens": opts.output_len, "stream": True,
                    "stream_options": {"include_usage": True}, "ignore_eos": True}
            if probe.model:
                body["model"] = probe.model
            o = await one_request(wc, url, body)
            outcomes.append(o)
            if o.transport and (not checking or (checking[-1].done() and time.monotonic() - last_check[0] > 1.0)):
                last_check[0] = time.monotonic()  # is the server gone? (at most once a second)
                checking.append(asyncio.create_task(check_alive()))
            progress.show(c, len(outcomes), n if not opts.duration else None,
                          sum(1 for x in outcomes if not x.ok), m0)

    async def arrivals(wc: aiohttp.ClientSession) -> None:
        """Open loop at `c` requests/s: exponential gaps (a Poisson process, as the
        engines' serving benchmarks draw them), each request on its own task."""
        nonlocal issued
        rng = random.Random(opts.seed * 7919 + int(c * 1000))
        inflight: set[asyncio.Task] = set()
        due = time.perf_counter()
        while not level_stop.is_set() and issued < n and not (deadline and time.perf_counter() >= deadline):
            wait = due - time.perf_counter()
            if wait > 0:
                try:
                    await asyncio.wait_for(level_stop.wait(), wait)
                    break
                except asyncio.TimeoutError:
                    pass
            i = issued
            issued += 1
            body = {"prompt": prompts.get(int(c * 1000) * 1_000_003 + i), "max_tokens": opts.output_len,
                    "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
            if probe.model:
                body["model"] = probe.model
            t = asyncio.create_task(one_request(wc, url, body))
            t.add_done_callback(lambda d: outcomes.append(d.result()) if not d.cancelled() and not d.exception() else None)
            inflight.add(t)
            t.add_done_callback(inflight.discard)
            due += rng.expovariate(c)
        if inflight:
            await asyncio.gather(*inflight, return_exceptions=True)

    samp_stop = asyncio.Event()
    samp_task = asyncio.create_task(sampler.run(t0, samp_stop)) if sampler else None
    if opts.rate:  # arrivals are not bounded by a worker count
        clients = [make_session(0)]
        tasks = [asyncio.create_task(arrivals(clients[0]))]
    else:
        clients = [make_session(c)]
        tasks = [asyncio.create_task(worker(clients[0])) for _ in range(c)]
    truncated = False
    stopper = asyncio.create_task(level_stop.wait())
    end = t0
    try:
        await asyncio.wait([*tasks, stopper], timeout=opts.max_level_time, return_when=asyncio.FIRST_COMPLETED)
        while not level_stop.is_set() and not all(t.done() for t in tasks):
            left = opts.max_level_time - (time.perf_counter() - t0)
            if left <= 0:
                truncated = True
                break
            await asyncio.wait([*[t for t in tasks if not t.done()], stopper], timeout=left,
                               return_when=asyncio.FIRST_COMPLETED)
        end = time.perf_counter()
    finally:
        for t in [*tasks, stopper]:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
        await asyncio.gather(*(wc.close() for wc in clients), return_exceptions=True)
        for t in checking:
            if not t.done():
                await asyncio.gather(t, return_exceptions=True)
        samp_stop.set()
        if samp_task:
            await asyncio.gather(samp_task, return_exceptions=True)
    duration = end - t0
    after = await sampler.scrape() if sampler and not fatal else None
    progress.end()
    km: dict = {}
    if sampler:
        km = {"engine": engine, "source": "/metrics", "interval_s": opts.metrics_interval,
              "names": sampler.names or probe.metrics.get("names", {}), "startup": dict(probe.startup),
              "before": before, "after": after, "samples": sampler.samples, "scrape_errors": sampler.errors}
    return outcomes, duration, issued, km, (fatal[0] if fatal else None), truncated


async def _sweep(probe: ProbeResult, opts: SweepOptions, api_key: str | None, out: Path | None,
                 on_level: Callable[[dict], None] | None, notes: list[str]) -> SweepResult:
    base = cl.base_url(probe.url)
    res = SweepResult(warnings=list(notes))
    stop = _Stop()
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        stop.interrupted = True
        if stop.event:
            stop.event.set()
        try:
            loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C ends at once
        except (NotImplementedError, RuntimeError):
            pass

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        handler = True
    except (NotImplementedError, RuntimeError, ValueError):
        handler = False
    t = opts.timeouts
    timeout = httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=None)
    tls = ssl_context()  # one for all clients: building one loads the CA bundle
    kw = dict(headers=cl.headers(api_key), follow_redirects=False, trust_env=False, verify=tls)

    def make_session(limit: int) -> aiohttp.ClientSession:
        return stream_session(opts, cl.headers(api_key), tls, limit)

    fh = None
    try:
        async with httpx.AsyncClient(timeout=timeout, **kw) as http, \
                httpx.AsyncClient(timeout=httpx.Timeout(connect=t.connect, read=10.0, write=10.0, pool=None),
                                  **kw) as mhttp:
            try:
                prompts, ptoks = await calibrate(http, base, probe.model, opts.input_len, opts.seed, res.warnings)
            except httpx.HTTPError as e:
                raise ServerError(cl.describe_error(e, cl.join(base, "/v1/completions"), t)) from None
            ctx = probe.max_model_len
            if ctx and ptoks and ptoks + opts.output_len > ctx:  # no load is sent: nothing would fit
                raise KbError(f"prompts of {ptoks} tokens (the fewest near --input-len {opts.input_len}) + output "
                              f"{opts.output_len} = {ptoks + opts.output_len} tokens exceed the server's context of "
                              f"{ctx} tokens (max_model_len)")
            res.prompt_words, res.prompt_tokens = len(prompts.words), ptoks
            if out:
                out.parent.mkdir(parents=True, exist_ok=True)
                fh = open(out, "w", encoding="utf-8")
            progress = Progress(opts.progress)
            info = probe.server_info()
            for c in opts.levels:
                if stop.interrupted:
                    break
                cpu0, w0 = time.process_time(), time.perf_counter()
                outcomes, duration, issued, km, fatal, truncated = await _run_level(
                    c, http, mhttp, probe, base, opts, prompts, stop, progress, make_session)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - w0
                if stop.interrupted:
                    break  # an unfinished level is not kept
                failed = [o for o in outcomes if not o.ok]
                if fatal:
                    why = failed[0].error if failed else "no answer"
                    res.error = (f"{cl.shown(base)} stopped answering during the concurrency-{c} level "
                                 f"({len(failed)} of {len(outcomes)} requests failed: {why})")
                    break
                if not outcomes:
                    res.error = (f"{cl.shown(base)}: no request at concurrency {c} finished within "
                                 f"--max-level-time {opts.max_level_time:g} s")
                    break
                if not any(o.ok for o in outcomes):
                    res.error = (f"{cl.shown(base)}: all {len(outcomes)} requests at concurrency {c} failed: "
                                 f"{failed[0].error}")
                    break
                row = summarise(c, outcomes, duration, opts, probe.model, probe.engine, issued)
                if opts.slo:
                    from kb.live import slo

                    row["slo"] = slo.evaluate(opts.slo, outcomes, duration, row)
                row["tool"] = TOOL
                row["truncated"] = truncated
                if truncated:
                    res.warnings.append(f"the concurrency-{c} level reached --max-level-time "
                                        f"({opts.max_level_time:g} s): its unfinished requests were dropped")
                row["client"] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                                 "cpu_fraction": round(cpu / wall, 4) if wall else None}
                row["server_info"] = info
                if km:
                    row["kb_metrics"] = km
                res.levels.append(row)
                if fh:
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                if on_level:
                    on_level(row)
    finally:
        if fh:
            fh.close()
        if handler:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError):
                pass
    res.interrupted = stop.interrupted
    return res


def ssl_context():
    import ssl

    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


def check_levels(opts: SweepOptions) -> None:
    if opts.rate:
        if not opts.levels or any(not (0 < r <= 10_000) for r in opts.levels):
            raise ServerError("--rate needs request rates above 0 and at most 10000 req/s, e.g. 0.5,1,2,4")
    elif not opts.levels or any(c < 1 for c in opts.levels):
        raise ServerError("--concurrency needs positive levels, e.g. 1,8,32,128")
    elif max(opts.levels) > 4096:
        raise ServerError("--concurrency above 4096 is not supported")


def fit_lengths(opts: SweepOptions, ctx: int | None) -> tuple[SweepOptions, str | None]:
    """The prompt and output lengths to send, within the server's context `ctx` (its
    max_model_len; None when unknown): lengths the user gave are kept, or refused when they
    cannot fit (before any load is sent: vLLM answers HTTP 400 to a prompt longer than the
    context and silently shortens the output of one that fits without its max_tokens,
    sglang refuses both); a default is fitted into what is left, and the note says so."""
    given_in, given_out = opts.input_len, opts.output_len
    if (given_in is not None and given_in < 1) or (given_out is not None and given_out < 1):
        raise KbError("--input-len and --output-len must be at least 1")
    if given_in is not None and given_out is not None:
        if ctx and given_in + given_out > ctx:
            raise KbError(f"--input-len {given_in} + --output-len {given_out} = {given_in + given_out} tokens do not "
                          f"fit the server's context of {ctx} tokens (max_model_len): give lengths that sum to at "
                          f"most {ctx}")
        return opts, None
    if given_in is not None or given_out is not None:  # one given: the default takes what is left
        given = given_in if given_in is not None else given_out
        name = "--input-len" if given_in is not None else "--output-len"
        default = DEFAULT_OUTPUT_LEN if given_in is not None else DEFAULT_INPUT_LEN
        room = ctx - given if ctx else default
        if room < 1:
            raise KbError(f"{name} {given} tokens leave no room in the server's context of {ctx} tokens "
                          f"(max_model_len): give at most {ctx - 1}")
        other = min(default, room)
        fitted = replace(opts, input_len=given if given_in is not None else other,
                         output_len=other if given_in is not None else given)
        what = "output" if given_in is not None else "input"
        note = (f"the server's context is {ctx} tokens (max_model_len): {what} length {other} tokens, not the default "
                f"{default}, beside {name} {given}") if other < default else None
        return fitted, note
    if not ctx or DEFAULT_INPUT_LEN + DEFAULT_OUTPUT_LEN <= ctx:
        return replace(opts, input_len=DEFAULT_INPUT_LEN, output_len=DEFAULT_OUTPUT_LEN), None
    if ctx < 2:
        raise KbError(f"the server's context of {ctx} tokens (max_model_len) holds no prompt and output")
    inp = ctx // 2  # the defaults' one-to-one split
    out = ctx - inp
    return replace(opts, input_len=inp, output_len=out), (
        f"the server's context is {ctx} tokens (max_model_len): input {inp} + output {out} tokens instead of the "
        f"default {DEFAULT_INPUT_LEN} + {DEFAULT_OUTPUT_LEN} (--input-len and --output-len set them)")


def sweep(probe: ProbeResult, opts: SweepOptions, api_key: str | None = None, out: Path | None = None,
          on_level: Callable[[dict], None] | None = None) -> SweepResult:
    """Run the levels in order; stops at the first level the server cannot serve."""
    check_levels(opts)
    opts, note = fit_lengths(opts, probe.max_model_len)
    res = asyncio.run(_sweep(probe, opts, api_key, out, on_level, [note] if note else []))
    res.input_len, res.output_len = opts.input_len, opts.output_len
    return res


def sweep_find_max(probe: ProbeResult, opts: SweepOptions, ceiling: float, api_key: str | None = None,
                   out: Path | None = None):
    """The highest level (concurrency, or request rate with opts.rate) whose level meets
    opts.slo, by doubling from opts.levels[0] and bisecting (kb.live.slo.find_max).
    Returns (FindMax, SweepResult with every level run, in the order run)."""
    from kb.live import slo

    check_levels(replace(opts, levels=[opts.levels[0], ceiling]))
    opts, note = fit_lengths(opts, probe.max_model_len)  # once: every level below runs these lengths
    res = SweepResult(warnings=[note] if note else [], input_len=opts.input_len, output_len=opts.output_len)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")

    def measure(level: float) -> dict | None:
        if res.interrupted or res.error:
            return None
        one = sweep(probe, replace(opts, levels=[level if opts.rate else int(level)]), api_key)
        res.warnings += one.warnings
        res.prompt_words, res.prompt_tokens = one.prompt_words, one.prompt_tokens
        if one.interrupted:
            res.interrupted = True
        if not one.levels:
            res.error = one.error
            return None
        row = one.levels[0]
        res.levels.append(row)
        if out:
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        return row

    found = slo.find_max(measure, opts.levels[0], ceiling, integer=not opts.rate)
    return found, res


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ServerError(f"--rate {text!r}: expected comma-separated request rates, e.g. 0.5,1,2,4") from None
    if not rates or any(not math.isfinite(r) for r in rates):
        raise ServerError(f"--rate {text!r}: expected comma-separated finite request rates, e.g. 0.5,1,2,4")
    return rates


def level_of(row: dict) -> float:
    """A sweep row's load level: its concurrency, or its request rate in rate mode."""
    c = row.get("max_concurrency")
    return c if c is not None else float(row.get("request_rate") or 0)


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ServerError(f"--concurrency {text!r}: expected comma-separated whole numbers, e.g. 1,8,32,128") from None
    if not levels:
        raise ServerError("--concurrency: no level given")
    return levels


def table(levels: list[dict]) -> str:
    rate = any(r.get("max_concurrency") is None for r in levels)
    slo = any(r.get("slo") for r in levels)
    head = (f"  {'rate' if rate else 'conc':>5}  {'done':>5}  {'fail':>4}  {'total tok/s':>11}  {'out tok/s':>9}  {'TTFT p50':>9}  "
            f"{'TTFT p99':>9}  {'TPOT p50':>8}  {'ITL p95':>8}  {'running':>7}  {'waiting':>7}"
            + (f"  {'SLO met':>7}  {'goodput':>12}" if slo else ""))
    rows = [head]
    for r in levels:
        samples = (r.get("kb_metrics") or {}).get("samples") or []
        run = max((s.get("running") or 0 for s in samples), default=None)
        wait = max((s.get("waiting") or 0 for s in samples), default=None)
        lv = level_of(r)
        sl = r.get("slo")
        extra = (f"  {sl['met_share'] * 100:>6.1f}%  {sl['goodput_tok_s']:>8,.1f} tok/s" + ("" if sl["meets"] else "  ✗")
                 if sl else "")
        rows.append(f"  {lv:>5g}  {r['completed']:>5}  {r['failed']:>4}  {r['total_throughput']:>11,.1f}  "
                    f"{r['output_throughput']:>9,.1f}  {r['median_ttft_ms']:>7,.1f}ms  {r['p99_ttft_ms']:>7,.1f}ms  "
                    f"{r['median_tpot_ms']:>6,.2f}ms  {r['p95_itl_ms']:>6,.2f}ms  "
                    f"{'-' if run is None else int(run):>7}  {'-' if wait is None else int(wait):>7}" + extra)
    return "\n".join(rows)
