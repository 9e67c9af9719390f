"""The sweep's streamed request (kb/live/stream.py) against a small local server that
frames tokens as vLLM 0.32 does (one `data: {...}` event per HTTP chunk, the usage chunk,
`[DONE]`): its own read timeout (re-armed from the last token, not per chunk), the
level's cancellation passing through, and the calibration's nearest prompt length."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from kb.live.client import Timeouts
from kb.live.prompts import calibrate
from kb.live.stream import READ_TIMEOUT, one_request, stream_session

# a vLLM 0.32 /v1/completions stream chunk, as it prints it
TOKEN = (b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the",'
         b'"logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":null,"prompt_logprobs":null,'
         b'"prompt_token_ids":null}],"usage":null}')


def usage(n: int) -> bytes:
    return (b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],'
            b'"usage":{"prompt_tokens":7,"total_tokens":%d,"completion_tokens":%d}}' % (7 + n, n))


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def serve(gaps: list[float], stall: float = 0.0):
    """A server that streams len(gaps) tokens, waiting gaps[i] before token i, then
    (after `stall` s) the usage chunk and [DONE]. Returns (server, url)."""

    async def handle(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for g in gaps:
                await asyncio.sleep(g)
                writer.write(chunk(b"data: " + TOKEN + b"\n\n"))
                await writer.drain()
            await asyncio.sleep(stall)
            writer.write(chunk(b"data: " + usage(len(gaps)) + b"\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test's loop ended mid-stall
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/v1/completions"


async def request(gaps, read, stall=0.0):
    srv, url = await serve(gaps, stall)
    async with srv:
        http = stream_session(Timeouts(connect=2.0, read=read), {}, None, 1)
        try:
            t = time.perf_counter()
            out = await one_request(http, url, {"prompt": "x", "stream": True}, read)
            return out, time.perf_counter() - t
        finally:
            await http.close()


def test_tokens_slower_in_total_than_the_read_timeout_but_each_within_it_pass():
    """Five tokens 0.3 s apart with a 0.5 s read timeout: 1.5 s in all, so a timer armed
    once at the start would fire; re-armed from the last token, it does not."""
    out, _ = asyncio.run(request([0.05, 0.3, 0.3, 0.3, 0.3], read=0.5))
    assert out.ok, out.error
    assert (out.output_tokens, out.prompt_tokens, len(out.itl)) == (5, 7, 4)
    assert all(0.2 < x < 0.5 for x in out.itl), out.itl
    assert out.ttft < out.latency


def test_a_stream_that_stops_sending_tokens_fails_with_a_read_timeout():
    out, elapsed = asyncio.run(request([0.0, 0.1], read=0.5, stall=5.0))
    assert not out.ok and out.transport and out.error == READ_TIMEOUT
    assert 0.5 <= elapsed < 2.0  # from the last token, not the end of the stall


def test_the_levels_own_cancellation_is_not_taken_for_a_timeout():
    """Ctrl-C or the level's time cap cancel the request: that must propagate (the level
    is dropped), never turn into a failed request that the level then keeps."""

    async def run():
        srv, url = await serve([0.0], stall=5.0)
        async with srv:
            http = stream_session(Timeouts(connect=2.0, read=30.0), {}, None, 1)
            try:
                task = asyncio.create_task(one_request(http, url, {"prompt": "x"}, 30.0))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                await http.close()

    asyncio.run(run())


def _calibrate(tokens_per_word: int, target: int, cap=None):
    def handler(request: httpx.Request) -> httpx.Response:
        n = tokens_per_word * len(json.loads(request.content)["prompt"].split())
        return httpx.Response(200, json={"choices": [{"text": "x"}], "usage": {"prompt_tokens": n}})

    async def run():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            return await calibrate(http, httpx.URL("http://127.0.0.1:8000"), "m", target, 0, [], cap=cap)

    return asyncio.run(run())


def test_calibration_takes_the_nearest_length_where_the_context_allows():
    """3 tokens a word, target 32: 11 words are 33 tokens, 10 words 30. vLLM's random
    prompts are 32 tokens, so 33 is the closer workload; with no room above the
    target (the default, or the output filling the context) 30 is kept."""
    prompts, tokens = _calibrate(3, 32, cap=100)
    assert (tokens, len(prompts.words)) == (33, 11)
    prompts, tokens = _calibrate(3, 32)
    assert (tokens, len(prompts.words)) == (30, 10)
    prompts, tokens = _calibrate(3, 32, cap=32)
    assert tokens == 30
