"""sglang server logs → one ServerTrace.

Formats read (sgl-project/sglang, 0.4.x → 0.5.x):
- `Decode batch. #running-req: ...` (≤0.5.2) and `Decode batch, ...` / `Decode batch [iter], ...`
  (later), with `#token`/`token usage` or the hybrid `#full token`/`full token usage`/`#swa token`/
  `mamba usage`, optional `accept len`, disaggregation fields (`pre-allocated usage`,
  `#prealloc-req`, `#transfer-req`, `#retracted-req`), `cuda graph:`/`cpu graph:`.
- `Prefill batch[.,] #new-seq: ..., #new-token: ..., #cached-token: ..., ...`
- start-up: `max_total_num_tokens=...`, `server_args=ServerArgs(...)`, `Capture cuda graph bs [...]`,
  `KV Cache is allocated. #tokens: ...`, `Load weight end. ...`, `Capture cuda graph end. ...`
- events: retraction, default/fallback MoE and W8A8 kernel configs, OOM and errors.
"""

from __future__ import annotations

import re

from ingest.serverlog import (
    ServerLogBase,
    as_bool,
    as_int,
    line_time,
    literal,
    moe_config_data,
    num,
    parse_call_args,
    split_fields,
)
from kb.records import Sample

BATCH = re.compile(r"\b(Decode|Prefill) batch(?: \[\d+\])?[.,] (.*)")
RETRACT = re.compile(
    r"(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\.) #retracted_reqs: (\d+)"
    r"(?:, #new_tokens_gained: (\d+))?(?:, #new_token_ratio: ([\d.]+) -> ([\d.]+))?"
)
STARTUP = re.compile(r"\bmax_total_num_tokens=\d+.*")
CAPTURE_BS = re.compile(r"Capture (cuda|cpu) graph bs (\[[\d, ]*\])|Capture (?:target )?decode (CUDA) graph "
                        r"begin\..*?\bbs=(\[[\d, ]*\])")
CAPTURE_TOKENS = re.compile(r"Capture cuda graph num tokens (\[[\d, ]*\])")
CAPTURE_END = re.compile(r"Capture (?:cuda|cpu) graph end\. Time elapsed: ([\d.]+) s\. mem usage=([\d.]+) GB")
KV_ALLOC = re.compile(r"KV Cache is allocated\. #tokens: (\d+), (?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: "
                      r"([\d.]+) GB)")
LOAD_END = re.compile(r"Load weight end\. type=(\w+), dtype=([\w.]+), avail mem=([\d.]+) GB, mem usage=([\d.]+) GB")
MOE_DEFAULT = ("Using default MoE kernel config", "Using default MoE config",
               "Using MoE kernel config with down_moe=False")
MOE_FALLBACK = re.compile(r"Fallback to triton version ([\d.]+) and use MoE kernel config from (\S+?\.json)")

# Decode/Prefill fields that have a Sample slot; the rest feed stats["extra_max"].
_KNOWN = {
    "#running-req", "#queue-req", "#token", "#full token", "token usage", "full token usage", "swa token usage",
    "cuda graph", "cpu graph", "gen throughput (token/s)", "input throughput (token/s)", "accept len",
    "#new-seq", "#new-token", "#cached-token",
}


class SglangLog(ServerLogBase):
    kind = "sglang-log"
    engine = "sglang"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.new_tokens = 0
        self.cached_tokens = 0

    def handle(self, lineno: int, line: str) -> None:
        if "batch" in line:
            m = BATCH.search(line)
            if m:
                self._batch(lineno, line, m.group(1), m.group(2))
                return
        if "=" in line and self._startup(line):
            return
        if "Capture" in line and self._capture(lineno, line):
            return
        if "#retracted_reqs" in line:
            m = RETRACT.search(line)
            if m:
                self.recognised = True
                data = {"retracted": int(m.group(1))}
                if m.group(2):
                    data["new_tokens_gained"] = int(m.group(2))
                if m.group(3):
                    data["new_token_ratio_before"], data["new_token_ratio_after"] = float(m.group(3)), float(m.group(4))
                self.events.add("retract", lineno, line, data)
                return
        if "Config file not found" in line or "kernel config" in line:
            self._kernel_config(lineno, line)
            return
        if "KV Cache is allocated" in line or "Load weight end" in line:
            self._memory(line)
            return
        self.error_event(lineno, line)

    def _batch(self, lineno: int, line: str, which: str, body: str) -> None:
        f = split_fields(body)
        time, rank = line_time(line)
        usage = num(f.get("token usage"))
        if usage is None and "full token usage" in f:
            # sglang reports the fuller of the two pools for hybrid (SWA) models
            usage = max(num(f.get("full token usage")) or 0.0, num(f.get("swa token usage")) or 0.0)
        graph = f.get("cuda graph", f.get("cpu graph"))
        running = as_int(f.get("#running-req"))
        decode = which == "Decode"
        gen = num(f.get("gen throughput (token/s)")) if decode else None
        if running is None and gen is None and usage is None:
            return  # "Decode batch" inside some other message
        hit = None
        if not decode:
            new, cached = as_int(f.get("#new-token")) or 0, as_int(f.get("#cached-token")) or 0
            self.new_tokens += new
            self.cached_tokens += cached
            if new + cached:
                hit = round(cached / (new + cached), 4)
        # one constructor call (a pydantic attribute set afterwards costs as much again)
        s = Sample(
            line=lineno, time=time, kind="decode" if decode else "prefill",
            running=running, queued=as_int(f.get("#queue-req")),
            tokens=as_int(f.get("#token", f.get("#full token"))), token_usage=usage,
            cuda_graph=as_bool(graph), accept_len=num(f.get("accept len")), gen_throughput=gen,
            prompt_throughput=None if decode else num(f.get("input throughput (token/s)")), prefix_hit_rate=hit,
        )
        for key, value in f.items():
            if key not in _KNOWN:
                self.stats.extra(key, num(value))
        self.add_sample(s, rank)

    def _startup(self, line: str) -> bool:
        if "server_args=" in line:
            text = line[line.find("server_args=") + len("server_args="):].strip()
            if text and text == self.args_text:
                return True  # the same dump again (a restart appended to the same file)
            args = parse_call_args(text)
            if args:
                self.args_text = text
                self.recognised = True
                self.server_args = args
                return True
        m = STARTUP.search(line)
        if not m:
            return False
        self.recognised = True
        for part in m.group(0).split(", ")[:64]:
            key, _, value = part.partition("=")
            value = value.strip()
            if key not in self.startup and len(self.startup) >= 256:
                continue  # a damaged line inventing keys: bounded like every other field
            if key.startswith("available_"):
                self.startup[key + "_gb"] = num(value)
            elif key:
                v = num(value)
                self.startup[key] = int(v) if v is not None and v.is_integer() else (v if v is not None else value)
        return True

    def _capture(self, lineno: int, line: str) -> bool:
        m = CAPTURE_BS.search(line)
        if m:
            device = m.group(1) or m.group(3).lower()
            bs = literal(m.group(2) or m.group(4))
            if isinstance(bs, list) and bs:
                self.recognised = True
                key = "cuda_graph_bs" if device == "cuda" else "cpu_graph_bs"
                self.startup.setdefault(key, bs)
                self.startup[key.replace("_bs", "_max_bs")] = max(max(bs),
                                                                  self.startup.get(key.replace("_bs", "_max_bs"), 0))
            return True
        m = CAPTURE_TOKENS.search(line)
        if m:
            tokens = literal(m.group(1))
            if isinstance(tokens, list) and tokens:
                self.recognised = True
                self.startup.setdefault("piecewise_cuda_graph_tokens", tokens)
            return True
        m = CAPTURE_END.search(line)
        if m:
            self.recognised = True
            self.startup["cuda_graph_capture_s"] = float(m.group(1))
            self.startup["cuda_graph_mem_gb"] = float(m.group(2))
            return True
        if "Capture cuda graph failed" in line:
            self.events.add("error", lineno, line)
            return True
        return False

    def _kernel_config(self, lineno: int, line: str) -> None:
        data = moe_config_data(line)
        if any(p in line for p in MOE_DEFAULT):
            kind = "moe-default-config"
        elif "Fallback to triton version" in line:
            kind = "moe-fallback-config"
            m = MOE_FALLBACK.search(line)
            if m:
                data["fallback_triton_version"], data["fallback_path"] = m.group(1), m.group(2)
        elif "W8A8 Block FP8 kernel config" in line:
            kind = "w8a8-default-config"
        else:
            self.error_event(lineno, line)
            return
        # the same warning text is vLLM's too; only an sglang path makes the file sglang's
        if "/sglang/" in line or "MoE kernel config" in line:
            self.recognised = True
        self.events.add(kind, lineno, line, data)

    def _memory(self, line: str) -> None:
        m = KV_ALLOC.search(line)
        if m:
            self.recognised = True
            self.startup.setdefault("kv_cache_tokens", int(m.group(1)))
            if m.group(2):
                self.startup.setdefault("kv_cache_gb", round(float(m.group(2)) + float(m.group(3)), 2))
            else:
                self.startup.setdefault("kv_cache_gb", float(m.group(4)))
            return
        m = LOAD_END.search(line)
        if m:
            self.recognised = True
            self.startup["model_class"] = m.group(1)
            self.startup["dtype"] = m.group(2)
            self.startup["weights_mem_gb"] = float(m.group(4))

    def results(self):
        if self.new_tokens or self.cached_tokens:
            total = self.new_tokens + self.cached_tokens
            self.extra_stats.update(prefill_new_tokens=self.new_tokens, prefill_cached_tokens=self.cached_tokens,
                                    prefill_cache_hit_rate=round(self.cached_tokens / total, 4))
        return super().results()
