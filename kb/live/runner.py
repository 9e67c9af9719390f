"""The sweep's level loop: per level, `c` workers send streamed requests back to back
(or, with `rate`, requests arrive as a Poisson process at `c` per second) until the
level's request count or duration is reached, while /metrics is sampled; each
finished level is written as one JSON line as soon as it ends. Ctrl-C ends the
sweep: the running level's requests are cancelled and the level is not kept.

Stops at the first level the server cannot serve (it stopped answering, nothing
finished within the level's time cap, or every request failed)."""

from __future__ import annotations

import asyncio
import json
import math
import random
import signal
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import aiohttp
import httpx

from kb.errors import KbError, ServerError
from kb.live import client as cl
from kb.live.probe import ProbeResult
from kb.live.prompts import Prompts, calibrate
from kb.live.sampler import Sampler
from kb.live.stream import Outcome, one_request, ssl_context, stream_session
from kb.live.sweep_options import SweepOptions, SweepResult
from kb.live.sweep_output import level_row
from kb.progress import LevelBar


class Stop:
    """Ctrl-C's mark: the sweep was interrupted; `event` ends the running level."""

    def __init__(self):
        self.interrupted = False
        self.event: asyncio.Event | None = None

    def set(self) -> None:
        self.interrupted = True
        if self.event:
            self.event.set()


@contextmanager
def ctrl_c_stops(stop: Stop) -> Iterator[None]:
    """While inside, Ctrl-C sets `stop`; a second Ctrl-C ends at once (the handler is
    removed at the first, so Python's KeyboardInterrupt is back)."""
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        stop.set()
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        handler = True
    except (NotImplementedError, RuntimeError, ValueError):
        handler = False
    try:
        yield
    finally:
        if handler:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError):
                pass


def level_label(c: float) -> str:
    """The progress bar's label for a level."""
    return f"  c={c:<5g}"


async def alive(http: httpx.AsyncClient, base: httpx.URL) -> bool:
    try:
        r = await http.get(cl.join(base, "/v1/models"), timeout=httpx.Timeout(3.0))
        return r.status_code < 500
    except httpx.HTTPError:
        return False


def request_body(prompt: str, opts: SweepOptions, model: str | None) -> dict:
    body = {"prompt": prompt, "max_tokens": opts.output_len, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}
    if model:
        body["model"] = model
    return body


async def run_level(c: int, http: httpx.AsyncClient, mhttp: httpx.AsyncClient, probe: ProbeResult,
                    base: httpx.URL, opts: SweepOptions, prompts: Prompts, stop: Stop, bar: LevelBar,
                    make_session: Callable[[int], aiohttp.ClientSession],
                    prompt_key: int | None = None) -> tuple[list[Outcome], float, int, dict, str | None, bool]:
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
    failed = [0]
    bar.start(level_label(c), n if not opts.duration and n < 1_000_000 else None)  # before the clock starts
    t0 = time.perf_counter()
    deadline = t0 + opts.duration if opts.duration else None

    async def check_alive() -> None:
        if not await alive(http, base):
            fatal.append("stopped answering")
            level_stop.set()

    async def worker(wc: aiohttp.ClientSession) -> None:
        nonlocal issued
        while not level_stop.is_set():
            if issued >= n or (deadline and time.perf_counter() >= deadline):
                return
            i = issued
            issued += 1
            key = c * 1_000_003 if prompt_key is None else prompt_key
            o = await one_request(wc, url, request_body(prompts.get(key + i), opts, probe.model), opts.timeouts.read)
            outcomes.append(o)
            failed[0] += not o.ok
            if o.transport and (not checking or (checking[-1].done() and time.monotonic() - last_check[0] > 1.0)):
                last_check[0] = time.monotonic()  # is the server gone? (at most once a second)
                checking.append(asyncio.create_task(check_alive()))
            bar.update(len(outcomes), failed[0])  # a count kept, not a pass over all outcomes per request

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
            key = int(c * 1000) * 1_000_003 if prompt_key is None else prompt_key
            body = request_body(prompts.get(key + i), opts, probe.model)
            t = asyncio.create_task(one_request(wc, url, body, opts.timeouts.read))
            t.add_done_callback(lambda d: outcomes.append(d.result())
                                if not d.cancelled() and not d.exception() else None)
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
        bar.end()
    duration = end - t0
    after = await sampler.scrape() if sampler and not fatal else None
    km: dict = {}
    if sampler:
        km = {"engine": engine, "source": "/metrics", "interval_s": opts.metrics_interval,
              "names": sampler.names or probe.metrics.get("names", {}), "startup": dict(probe.startup),
              "before": before, "after": after, "samples": sampler.samples, "scrape_errors": sampler.errors}
    return outcomes, duration, issued, km, (fatal[0] if fatal else None), truncated


def level_error(c: int, base: httpx.URL, outcomes: list[Outcome], fatal: str | None, opts: SweepOptions) -> str | None:
    """Why the sweep stops at this level, or None when the level is kept."""
    failed = [o for o in outcomes if not o.ok]
    if fatal:
        why = failed[0].error if failed else "no answer"
        return (f"{cl.shown(base)} stopped answering during the concurrency-{c} level "
                f"({len(failed)} of {len(outcomes)} requests failed: {why})")
    if not outcomes:
        return (f"{cl.shown(base)}: no request at concurrency {c} finished within "
                f"max_level_time {opts.max_level_time:g} s")
    if not any(o.ok for o in outcomes):
        return f"{cl.shown(base)}: all {len(outcomes)} requests at concurrency {c} failed: {failed[0].error}"
    return None


WARMUP_PROMPTS = 10**15  # above every level's key: concurrency c → c × 1,000,003, rate r → 1000 r × 1,000,003


async def warm_up(http, mhttp, probe: ProbeResult, base: httpx.URL, opts: SweepOptions, prompts: Prompts,
                  stop: Stop, bar: LevelBar, make_session, res: SweepResult) -> bool:
    """opts.warmup requests at the highest level, the same lengths, nothing recorded.
    Their prompts are not the measured ones (a key range no level uses), so the warm-up
    warms the engine without filling its prefix cache with what the levels then send.
    False when the sweep should not go on (Ctrl-C, or the server failed them: res.error)."""
    top = max(opts.levels)
    outcomes, _, _, _, fatal, _ = await run_level(top if opts.rate else int(top), http, mhttp, probe, base,
                                                  replace(opts, requests=opts.warmup, duration=None), prompts, stop,
                                                  bar, make_session, prompt_key=WARMUP_PROMPTS)
    if stop.interrupted:
        return False
    err = level_error(top, base, outcomes, fatal, opts)
    if err:
        res.error = f"warm-up: {err}"
        return False
    return True


async def run_sweep(probe: ProbeResult, opts: SweepOptions, api_key: str | None, out: Path | None,
                    on_level: Callable[[dict], None] | None, notes: list[str]) -> SweepResult:
    """Calibrate the prompts, then run the levels in order (lengths already fitted)."""
    base = cl.base_url(probe.url)
    res = SweepResult(warnings=list(notes))
    stop = Stop()
    t = opts.timeouts
    tls = ssl_context()  # one for all clients: building one loads the CA bundle
    kw = dict(headers=cl.headers(api_key), follow_redirects=False, trust_env=False, verify=tls)

    def make_session(limit: int) -> aiohttp.ClientSession:
        return stream_session(opts.timeouts, cl.headers(api_key), tls, limit)

    fh = None
    with ctrl_c_stops(stop):
        try:
            async with httpx.AsyncClient(timeout=t.httpx(), **kw) as http, \
                    httpx.AsyncClient(timeout=httpx.Timeout(connect=t.connect, read=10.0, write=10.0, pool=None),
                                      **kw) as mhttp:
                try:
                    room = probe.max_model_len - opts.output_len if probe.max_model_len else math.inf
                    prompts, ptoks = await calibrate(http, base, probe.model, opts.input_len, opts.seed, res.warnings,
                                                     cap=room)
                except httpx.HTTPError as e:
                    raise ServerError(cl.describe_error(e, cl.join(base, "/v1/completions"), t)) from None
                ctx = probe.max_model_len
                if ctx and ptoks and ptoks + opts.output_len > ctx:  # no load is sent: nothing would fit
                    raise KbError(f"prompts of {ptoks} tokens (the fewest near input_len {opts.input_len}) + "
                                  f"output {opts.output_len} = {ptoks + opts.output_len} tokens exceed the server's "
                                  f"context of {ctx} tokens (max_model_len)")
                res.prompt_words, res.prompt_tokens = len(prompts.words), ptoks
                if out:
                    out.parent.mkdir(parents=True, exist_ok=True)
                    fh = open(out, "w", encoding="utf-8")
                bar = LevelBar(opts.progress)
                warm = not opts.warmup or await warm_up(http, mhttp, probe, base, opts, prompts, stop, bar,
                                                        make_session, res)
                for c in opts.levels if warm else []:
                    if stop.interrupted:
                        break
                    cpu0, w0 = time.process_time(), time.perf_counter()
                    outcomes, duration, issued, km, fatal, truncated = await run_level(
                        c, http, mhttp, probe, base, opts, prompts, stop, bar, make_session)
                    cpu, wall = time.process_time() - cpu0, time.perf_counter() - w0
                    if stop.interrupted:
                        break  # an unfinished level is not kept
                    res.error = level_error(c, base, outcomes, fatal, opts)
                    if res.error:
                        break
                    row = level_row(c, outcomes, duration, issued, opts, probe, truncated, cpu, wall, km)
                    if truncated:
                        res.warnings.append(f"the concurrency-{c} level reached max_level_time "
                                            f"({opts.max_level_time:g} s): its unfinished requests were dropped")
                    res.levels.append(row)
                    if fh:
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()
                    if on_level:
                        on_level(row)
        finally:
            if fh:
                fh.close()
    res.interrupted = stop.interrupted
    return res
