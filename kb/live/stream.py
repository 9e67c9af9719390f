"""The sweep's streaming client: one `/v1/completions` request with `stream: true`,
its server-sent events read and timed as vLLM's `benchmarks/serve.py` times them
(TTFT the first chunk carrying a choice, ITL the gaps between later chunks, token
counts from the `usage` chunk), and every failure turned into a one-line reason."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from kb.live import client as cl
from kb.redact import redact_text


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


def error_text(body: str) -> str:
    """An error answer's message on one short line, credentials hidden."""
    text = body.strip()
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            e = doc.get("error", doc)
            msg = e.get("message") if isinstance(e, dict) else e
            text = str(msg or doc.get("detail") or doc.get("message") or text)
    except ValueError:
        pass
    return " ".join(redact_text(text[:4096]).split())[:160] or "(empty body)"


READ_TIMEOUT = "read timeout (no token within the read timeout)"


def transport_error(e: BaseException) -> str:
    if isinstance(e, aiohttp.ClientConnectorError):
        return "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else "cannot connect"
    if isinstance(e, aiohttp.ConnectionTimeoutError):
        return "connect timeout"
    if isinstance(e, asyncio.TimeoutError):  # aiohttp's SocketTimeoutError: no bytes within sock_read
        return READ_TIMEOUT
    if isinstance(e, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError)):
        return "connection closed by the server mid-answer"
    return f"{type(e).__name__}"


def plain_token(payload: bytes) -> bool:
    """A chunk carrying a choice and nothing else kb reads (no usage, no error), told
    apart without parsing it: inside JSON strings a quote is escaped, so these
    byte patterns only match the object's own keys. (Unrolled: a generator over the
    patterns cost a third of the client's own time per token.)"""
    return (b'"choices"' in payload and b'"usage":{' not in payload and b'"usage": {' not in payload
            and b'"error"' not in payload and b'"choices":[]' not in payload and b'"choices": []' not in payload)


_JSON = {"Content-Type": "application/json"}


def ssl_context():
    """One TLS context for all the sweep's clients: building one loads the CA bundle."""
    import ssl

    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


def stream_session(timeouts: cl.Timeouts, headers: dict, tls, limit: int) -> aiohttp.ClientSession:
    """The client of the streamed requests: aiohttp, whose HTTP parser and chunked
    decoding are C (llhttp), where httpx parses every chunk in Python (h11): on a
    2-core machine shared with the server, the client's CPU per token slows the server
    it measures (docs/PERFORMANCE.md). vLLM's own serving benchmark uses aiohttp too.
    `limit` connections (0: unbounded), no proxies from the environment, no redirects.
    No sock_read timeout: aiohttp re-arms that timer on every chunk received (a tenth to
    a sixth of the client's CPU per token); `one_request` keeps its own, re-armed lazily."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=tls),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect),
        headers=headers, trust_env=False, auto_decompress=False)


async def one_request(http: aiohttp.ClientSession, url: str, body: dict, read: float | None = None) -> Outcome:
    """One streamed request, timed. `read`: seconds without a token (from the request's
    start, then from each token) after which it fails with a read timeout."""
    out = Outcome()
    st = time.perf_counter()
    last = st
    first = False
    expired = False
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def watch() -> None:
        """The read timeout, checked when it could first expire and re-armed from the
        last token's time: no timer work per token."""
        nonlocal expired, timer
        idle = time.perf_counter() - last
        if idle >= read:
            expired = True
            task.cancel()
        else:
            timer = loop.call_later(read - idle, watch)

    timer = loop.call_later(read, watch) if read else None
    itl = out.itl
    try:
        async with http.post(url, data=json.dumps(body).encode(), headers=_JSON, allow_redirects=False) as r:
            if r.status != 200:
                raw = b""
                while len(raw) <= cl.ERROR_BODY_CAP:
                    more = await r.content.read(cl.ERROR_BODY_CAP + 1 - len(raw))
                    if not more:
                        break
                    raw += more
                out.error = f"HTTP {r.status}: {error_text(raw.decode('utf-8', 'replace'))}"
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
                    if not plain_token(payload):  # most chunks are plain: no JSON parsing needed
                        try:
                            data = json.loads(payload)
                        except ValueError:
                            continue
                        if not isinstance(data, dict):
                            continue
                    if data is None or data.get("choices"):  # a token: time it
                        now = time.perf_counter()
                        if first:
                            itl.append(now - last)
                        else:
                            first = True
                            out.ttft = now - st
                        last = now
                    if data is None:
                        continue
                    usage = data.get("usage")
                    if isinstance(usage, dict):
                        out.output_tokens = int(usage.get("completion_tokens") or 0)
                        out.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                    if data.get("error") or data.get("object") == "error":
                        out.error = f"error in stream: {error_text(json.dumps(data))}"
                        return out
        if not first:
            out.error = "no token streamed"
            return out
        out.latency = last - st
        if not out.output_tokens:
            out.output_tokens = len(itl) + 1  # no usage chunk: one token per chunk
        out.ok = True
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        out.error = transport_error(e)
        out.transport = True
    except asyncio.CancelledError:
        if not expired or task.uncancel():  # the level's own cancellation (Ctrl-C, time cap) goes on
            raise
        out.error = READ_TIMEOUT
        out.transport = True
    finally:
        if timer:
            timer.cancel()
    return out
