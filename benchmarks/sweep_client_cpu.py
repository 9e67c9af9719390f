"""The sweep client's own CPU per 1,000 streamed tokens, before and after, in one run.

    python benchmarks/sweep_client_cpu.py [--before /work/main] [--concurrency 16]
        [--requests 256] [--output-len 64] [--rounds 3]

A stand-in server (a child process, plain asyncio) streams `--output-len` tokens per
request as vLLM 0.32 frames them (one `data: {...}` event per token, chunked transfer
encoding, then the usage chunk and `[DONE]`), as fast as it can, so the client's CPU
is all that is measured. The same requests go through `one_request` of this checkout
and of the `--before` checkout (its kb/live/stream.py, or kb/live/sweep.py before the
sweep was split, loaded under another name),
interleaved for `--rounds` rounds; the table gives the median CPU seconds (user +
system, of this process) per 1,000 tokens. Exit 0; traffic only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kb.live.client import Timeouts  # noqa: E402

SERVER = r'''
import asyncio, json, sys
N = int(sys.argv[1])
STEP = float(sys.argv[2])  # seconds between a stream's tokens (0: as fast as it can)
TOKEN = json.dumps({"id": "cmpl-0", "object": "text_completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "text": " the", "logprobs": None, "finish_reason": None,
                                 "stop_reason": None, "token_ids": None, "prompt_logprobs": None,
                                 "prompt_token_ids": None}], "usage": None}, separators=(",", ":"))
USAGE = json.dumps({"id": "cmpl-0", "object": "text_completion", "created": 1, "model": "m", "choices": [],
                    "usage": {"prompt_tokens": 32, "total_tokens": 32 + N, "completion_tokens": N}},
                   separators=(",", ":"))

def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)

EVENT = chunk(b"data: " + TOKEN.encode() + b"\n\n")
END = chunk(b"data: " + USAGE.encode() + b"\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for _ in range(N):
                writer.write(EVENT)
                await writer.drain()
                await asyncio.sleep(STEP)  # one event per write, as a server sends tokens
            writer.write(END)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()

asyncio.run(main())
'''


def load_sweep(root: Path, name: str):
    """The module holding `one_request` in that checkout."""
    live = root / "kb" / "live"
    path = live / "stream.py" if (live / "stream.py").exists() else live / "sweep.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


async def drive(mod, url: str, c: int, n: int, output_len: int) -> tuple[float, int]:
    """(CPU seconds of this process, tokens) for n requests at concurrency c through mod.one_request."""
    body = {"prompt": "x", "max_tokens": output_len, "stream": True, "stream_options": {"include_usage": True}}
    issued = 0
    tokens = 0
    if hasattr(mod, "stream_session"):  # aiohttp: one session of c connections
        # the sweep's own timeouts; before the split, stream_session took the whole SweepOptions
        timeouts = mod.SweepOptions(levels=[c]) if hasattr(mod, "SweepOptions") else Timeouts(connect=5.0, read=60.0)
        clients = [mod.stream_session(timeouts, {}, None, c)]
        pick = lambda i: clients[0]  # noqa: E731
        close = [s.close for s in clients]
    else:  # httpx: one client (and connection) per worker, as that version did
        import httpx

        clients = [httpx.AsyncClient(limits=httpx.Limits(max_connections=1), trust_env=False) for _ in range(c)]
        pick = lambda i: clients[i]  # noqa: E731
        close = [x.aclose for x in clients]

    async def worker(i: int) -> None:
        nonlocal issued, tokens
        while issued < n:
            issued += 1
            o = await mod.one_request(pick(i), url, body, *((60.0,) if "read" in mod.one_request.__code__.co_varnames[:4] else ()))
            if not o.ok:
                raise SystemExit(f"request failed: {o.error}")
            tokens += o.output_tokens
    cpu = time.process_time()
    await asyncio.gather(*(worker(i) for i in range(c)))
    cpu = time.process_time() - cpu
    for f in close:
        await f()
    return cpu, tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="/work/main", help="the checkout whose client is 'before'")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    clients = {"before": load_sweep(Path(args.before), "kb_sweep_before"), "after": load_sweep(ROOT, "kb_sweep_after")}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.output_len)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1/completions"
        per_k: dict[str, list[float]] = {k: [] for k in clients}
        load = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for name, mod in clients.items():
                cpu, tokens = asyncio.run(drive(mod, url, args.concurrency, args.requests, args.output_len))
                per_k[name].append(1000 * cpu / tokens)
            load.append(os.getloadavg()[0])
    finally:
        server.terminate()
        server.wait(10)
    print(f"client CPU per 1,000 streamed tokens: {args.requests} requests x {args.output_len} tokens at concurrency "
          f"{args.concurrency}, {args.rounds} interleaved rounds, medians; "
          f"load average {min(load):.1f}-{max(load):.1f}")
    for name, vals in per_k.items():
        print(f"  {name:<7} {statistics.median(vals) * 1000:8.1f} ms   (rounds: "
              f"{', '.join(f'{v * 1000:.1f}' for v in vals)})")
    b, a = statistics.median(per_k["before"]), statistics.median(per_k["after"])
    print(f"  after / before: {a / b:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
