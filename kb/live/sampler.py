"""The /metrics sampler of a sweep level: the engine's load figures (running, waiting,
KV-cache usage, preemptions, generated tokens) every `interval` s on a connection of
its own, so that the samples show how the server carried the level."""

from __future__ import annotations

import asyncio
import time

import httpx

from ingest.metrics_text import Scrape, prefixes
from kb.errors import ServerError
from kb.live import client as cl

MAX_SAMPLES_PER_LEVEL = 600  # past this, every other sample is dropped and the interval doubled


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
