"""The sweep client's own CPU per 1,000 streamed tokens, before and after, in one run.

    python benchmarks/sweep_client_cpu.py [--before /work/main] [--concurrency 16]
        [--requests 256] [--output-len 64] [--rounds 3] [--step-ms 2] [--no-vllm]

A stand-in server (a child process, plain asyncio) streams `--output-len` tokens per
request as vLLM 0.32 frames them (one `data: {...}` event per token, chunked transfer
encoding, then the usage chunk and `[DONE]`), one token per stream every --step-ms
(as a decode step hands every running request one token; each then reaches the client
in a read of its own, as from a real server: 0 sends them back to back, and the client
then reads many per wake-up), so the client's CPU is all that is measured. The same
requests go through `one_request` of this checkout and of the `--before` checkout (its
kb/live/stream.py, or kb/live/sweep.py before the sweep was split, loaded under another
name) and, as the anchor, through vLLM's own request function
(`vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions`, in the
engines venv, with the aiohttp session `vllm.benchmarks.serve` makes), interleaved for
`--rounds` rounds; the table gives the median CPU seconds (user + system, of the client
process, timed part only) per 1,000 tokens. Exit 0; traffic only to 127.0.0.1.
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

    # the read timeout: an argument since the client keeps its own (before, the session's)
    read = (60.0,) if "read" in mod.one_request.__code__.co_varnames[:4] else ()

    async def worker(i: int) -> None:
        nonlocal issued, tokens
        while issued < n:
            issued += 1
            o = await mod.one_request(pick(i), url, body, *read)
            if not o.ok:
                raise SystemExit(f"request failed: {o.error}")
            tokens += o.output_tokens
    cpu = time.process_time()
    await asyncio.gather(*(worker(i) for i in range(c)))
    cpu = time.process_time() - cpu
    for f in close:
        await f()
    return cpu, tokens


# vLLM's client, run in the engines venv: argv url c n output_len; prints "cpu_s tokens"
VLLM_CLIENT = r'''
import asyncio, sys, time, aiohttp
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions
url, c, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
async def main():
    conn = aiohttp.TCPConnector(limit=c, limit_per_host=c, ttl_dns_cache=300, use_dns_cache=True,
                                keepalive_timeout=60, enable_cleanup_closed=True, force_close=False, ssl=False)
    s = aiohttp.ClientSession(connector=conn, trust_env=True, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
    sem = asyncio.Semaphore(c)
    inp = RequestFuncInput(prompt="x", api_url=url, prompt_len=1, output_len=out, model="m", ignore_eos=True)
    async def one():
        async with sem:
            return await async_request_openai_completions(inp, s)
    cpu = time.process_time()
    outs = await asyncio.gather(*(one() for _ in range(n)))
    cpu = time.process_time() - cpu
    await s.close()
    if not all(o.success for o in outs):
        raise SystemExit(outs[0].error)
    print(cpu, sum(o.output_tokens for o in outs))
asyncio.run(main())
'''


def vllm_client(url: str, c: int, n: int, output_len: int) -> tuple[float, int] | None:
    """(CPU seconds, tokens) of vLLM's request function, or None without the engines venv."""
    sys.path.insert(0, str(ROOT / "tests"))
    from live import vllm_server as vs

    if not vs.ENGINES_PY.exists():
        return None
    proc = subprocess.run([str(vs.ENGINES_PY), "-c", VLLM_CLIENT, url, str(c), str(n), str(output_len)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"vLLM's client failed: {proc.stderr.strip()[-500:]}")
    cpu, tokens = proc.stdout.split()
    return float(cpu), int(tokens)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="/work/main", help="the checkout whose client is 'before'")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step-ms", type=float, default=2.0, help="ms between a stream's tokens (0: back to back)")
    ap.add_argument("--no-vllm", action="store_true", help="skip vLLM's own client (the anchor)")
    args = ap.parse_args()
    clients = {"before": load_sweep(Path(args.before), "kb_sweep_before"), "after": load_sweep(ROOT, "kb_sweep_after")}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.output_len),
                               str(args.step_ms / 1000)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1/completions"
        per_k: dict[str, list[float]] = {k: [] for k in [*clients, "vLLM"]}
        load = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for name, mod in clients.items():
                cpu, tokens = asyncio.run(drive(mod, url, args.concurrency, args.requests, args.output_len))
                per_k[name].append(1000 * cpu / tokens)
            got = None if args.no_vllm else vllm_client(url, args.concurrency, args.requests, args.output_len)
            if got:
                per_k["vLLM"].append(1000 * got[0] / got[1])
            load.append(os.getloadavg()[0])
    finally:
        server.terminate()
        server.wait(10)
    print(f"client CPU per 1,000 streamed tokens: {args.requests} requests x {args.output_len} tokens at concurrency "
          f"{args.concurrency}, one token per stream every {args.step_ms:g} ms, {args.rounds} interleaved rounds, "
          f"medians; "
          f"load average {min(load):.1f}-{max(load):.1f}")
    for name, vals in per_k.items():
        if not vals:
            continue
        print(f"  {name:<7} {statistics.median(vals) * 1000:8.1f} ms   (rounds: "
              f"{', '.join(f'{v * 1000:.1f}' for v in vals)})")
    b, a = statistics.median(per_k["before"]), statistics.median(per_k["after"])
    print(f"  after / before: {a / b:.2f}" + (f"; after / vLLM: {a / statistics.median(per_k['vLLM']):.2f}"
                                               if per_k["vLLM"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
