"""Offline benchmarks that run the engine in-process, with the command that ran them:

* sglang `python -m sglang.bench_latency` (2024), `sglang.bench_one_batch` (2024-2025)
  and `sglang.benchmark.one_batch` (0.5.23): one static batch, printed as
  `Prefill. latency: 0.03 s, throughput:  4266.67 token/s`,
  `Decode.  latency: ...` (old) or `Decode 0. Batch size: 1, latency: ...` (new),
  `Decode.  median latency: 0.00823 s, median throughput:    121.46 token/s` and
  `Total. latency:  0.118 s, throughput:   1147.73 token/s`, after `Warmup ...` /
  `Benchmark ...` (format strings of `latency_test_run_once` in those modules).
* vLLM `benchmarks/benchmark_throughput.py` and `vllm bench throughput`
  (vllm/benchmarks/throughput.py): `Throughput: 2.35 requests/s, 1205.12 total tokens/s,
  240.80 output tokens/s` (older: `Throughput: X requests/s, Y tokens/s`, Y the total),
  then `Total num prompt tokens:  N` / `Total num output tokens:  N`.

Both tools take the engine's own server arguments (sglang `ServerArgs`, vLLM
`EngineArgs`), so the command line tells the engine configuration as a launch command
would: it becomes a LaunchCommand with entry `bench:<tool>` (server flags only, never
used as the command to relaunch) and the results become BenchRuns (batch size as the
concurrency, prefill latency as TTFT, median decode step as TPOT).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ingest import bench_common as bc
from ingest.launch_command import MAX_COMMAND_CHARS, LaunchCommand, cli_context, flag_values, norm_flag, shell_words
from kb.flagdata import any_version_flags
from kb.records import BenchRun, Where
from kb.redact import redact_data

MAX_LINE = 4096  # result lines are short; a longer one is not a result line
MAX_GROUPS = 10_000
MAX_COMMANDS = 200
MAX_CONTINUED = 200  # continuation lines of one command

_SGL_CMD = re.compile(r"\bpython[\d.]*\s+(?:-[A-Za-z]+\s+)*-m\s+(sglang\.bench_latency|sglang\.bench_one_batch|"
                      r"sglang\.benchmark\.one_batch)(?![\w.])")
_VLLM_CMD = re.compile(r"(?:\bbenchmark_throughput\.py|\bvllm\s+bench\s+throughput)(?![\w.])")
_NUM = r"([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf)"
_PREFILL = re.compile(rf"\bPrefill\.\s+latency:\s*{_NUM}\s*s,\s*throughput:\s*{_NUM}\s*token/s")
_DECODE_STEP = re.compile(rf"\bDecode(?:\s+\d+)?\.\s+(?:Batch size:\s*(\d+),\s*)?latency:\s*{_NUM}\s*s,\s*"
                          rf"throughput:\s*{_NUM}\s*token/s")
_DECODE_MEDIAN = re.compile(rf"\bDecode\.\s+median latency:\s*{_NUM}\s*s,\s*median throughput:\s*{_NUM}\s*token/s")
_TOTAL = re.compile(rf"\bTotal\.\s+latency:\s*{_NUM}\s*s,\s*throughput:\s*{_NUM}\s*token/s")
_VLLM_TPUT = re.compile(rf"\bThroughput:\s*{_NUM}\s*requests/s,\s*{_NUM}\s*(total\s+)?tokens/s"
                        rf"(?:,\s*{_NUM}\s*output tokens/s)?")
_VLLM_TOKENS = re.compile(r"\bTotal num (prompt|output) tokens:\s*(\d{1,15})\b")
_NAMESPACE = re.compile(r"^\s*Namespace\((.*)\)\s*$")
_NS_KEYS = ("backend", "model", "input_len", "output_len", "num_prompts", "tensor_parallel_size",
            "pipeline_parallel_size", "max_num_seqs", "gpu_memory_utilization", "enforce_eager", "dtype",
            "quantization", "kv_cache_dtype", "max_model_len", "max_num_batched_tokens")

# The benchmark's own arguments (not server flags), from BenchArgs of sglang's
# bench_latency / bench_one_batch / benchmark.one_batch and the argument list of
# vLLM's benchmark_throughput.py / vllm/benchmarks/throughput.py.
_SGL_BENCH_ARGS = ("--run-name", "--batch-size", "--input-len", "--output-len", "--prompt-filename",
                   "--result-filename", "--correctness-test", "--cut-len", "--log-decode-step", "--profile",
                   "--profile-record-shapes", "--profile-activities", "--profile-stage", "--profile-filename-prefix",
                   "--profile-start-step", "--profile-steps", "--graph-sql")
_VLLM_BENCH_ARGS = ("--backend", "--dataset", "--dataset-name", "--dataset-path", "--input-len", "--output-len",
                    "--n", "--num-prompts", "--hf-max-batch-size", "--output-json", "--async-engine",
                    "--disable-detokenize", "--lora-path", "--prefix-len", "--random-range-ratio",
                    "--random-prefix-len", "--random-input-len", "--random-output-len", "--hf-subset", "--hf-split",
                    "--profile", "--num-warmups", "--prequeue-requests", "--disable-frontend-multiprocessing")


def _num(s: str | None) -> float | None:
    return bc.num(s) if s is not None else None


class _Command:
    def __init__(self, line: int, engine: str, tool: str, text: str) -> None:
        self.line, self.engine, self.tool, self.text = line, engine, tool, text


class _Group:
    """One measured batch of sglang's one-batch benchmark (or one vLLM throughput line)."""

    def __init__(self, line: int, warmup: bool) -> None:
        self.line = line
        self.warmup = warmup
        self.values: dict[str, Any] = {}
        self.closed = False


class _OfflineText:
    """Streaming reader shared by both tools: command lines (joined across `\\`
    continuations) and result lines, in any order (a post may show the output first)."""

    kind = ""
    tool = ""
    engine = ""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.commands: list[_Command] = []
        self.pending: _Command | None = None
        self.pending_lines = 0
        self.groups: list[_Group] = []
        self.namespace: dict[str, Any] = {}

    # ---- commands
    def _command_start(self, line: str) -> str | None:
        raise NotImplementedError

    def _take_command(self, lineno: int, line: str) -> bool:
        if self.pending is not None:
            self.pending.text += " " + line.rstrip().rstrip("\\")
            self.pending_lines += 1
            if not line.rstrip().endswith("\\") or self.pending_lines >= MAX_CONTINUED \
                    or len(self.pending.text) > MAX_COMMAND_CHARS:
                self._close_command()
            return True
        if len(line) > MAX_COMMAND_CHARS:
            return False
        tool = self._command_start(line)
        if not tool:
            return False
        self.pending = _Command(lineno, self.engine, tool, line.rstrip().rstrip("\\"))
        self.pending_lines = 0
        if not line.rstrip().endswith("\\"):
            self._close_command()
        return True

    def _close_command(self) -> None:
        if self.pending is not None and len(self.commands) < MAX_COMMANDS:
            self.commands.append(self.pending)
        self.pending = None

    def _group(self, lineno: int) -> _Group | None:
        if len(self.groups) >= MAX_GROUPS:
            return None
        g = _Group(lineno, self._in_warmup())
        self.groups.append(g)
        return g

    def _in_warmup(self) -> bool:
        return False

    def _namespace_launch(self) -> LaunchCommand | None:
        return None

    # ---- records
    def _launch(self, cmd: _Command) -> LaunchCommand | None:
        """The server flags of a benchmark command, as a LaunchCommand of entry `bench:<tool>`."""
        text = cmd.text
        m = self._entry(text)
        if not m:
            return None
        tokens = shell_words(text[m.end():])
        positional: list[str] = []
        if tokens[:1] == ["throughput"]:
            tokens = tokens[1:]
        args = flag_values(tokens, positional)
        bench, server = self._sort_args(args)
        if bench.get("--backend") not in (None, True, self.engine, f"{self.engine}-chat"):
            return None  # vLLM's throughput benchmark also runs HF / MII: no vLLM server arguments
        if self.engine == "vllm" and positional and "--model" not in server:
            server["--model"] = positional[0]
        norm = {norm_flag(k): v for k, v in server.items()}
        model = norm.get("model-path") or norm.get("model")
        cmd_out = LaunchCommand(engine=self.engine, entry=f"bench:{cmd.tool}",
                                model=model if isinstance(model, str) else None, args=server, norm_args=norm,
                                positional=positional, raw=text.strip()[:MAX_COMMAND_CHARS],
                                source=Where(path=self.path, line=cmd.line))
        return LaunchCommand.model_validate(redact_data(cmd_out.model_dump()))

    def _entry(self, text: str) -> re.Match | None:
        raise NotImplementedError

    def _sort_args(self, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the benchmark's own arguments, server flags the engine's catalog knows); an
        abbreviation argparse would accept (`--batch` for `--batch-size`) is resolved
        when exactly one flag starts with it."""
        known = any_version_flags(self.engine)
        own = _SGL_BENCH_ARGS if self.engine == "sglang" else _VLLM_BENCH_ARGS
        bench: dict[str, Any] = {}
        server: dict[str, Any] = {}
        for name, value in args.items():
            if name in own:
                bench[name] = value
                continue
            if name in known:
                server[name] = value
                continue
            if not name.startswith("--"):
                continue
            hits = [f for f in (*own, *known) if f.startswith(name)] if self.engine == "sglang" else []
            if len(hits) == 1:
                (bench if hits[0] in own else server)[hits[0]] = value
        return bench, server

    def _bench_settings(self) -> dict[str, Any]:
        """The benchmark arguments of the (single, or first) command: batch sizes and lengths."""
        if not self.commands:
            return {}
        m = self._entry(self.commands[0].text)
        if not m:
            return {}
        tokens = shell_words(self.commands[0].text[m.end():])
        bench, server = self._sort_args(flag_values(tokens, []))
        norm = {norm_flag(k): v for k, v in bench.items()}
        norm["model"] = next((v for k, v in server.items() if norm_flag(k) in ("model", "model-path")
                              and isinstance(v, str)), None)
        return norm

    @bc.guarded("offline benchmark output")
    def feed(self, lineno: int, line: str) -> None:
        if self._take_command(lineno, line) or len(line) > MAX_LINE:
            return
        self._feed_result(lineno, line)

    def _feed_result(self, lineno: int, line: str) -> None:
        raise NotImplementedError

    @bc.guarded("offline benchmark output")
    def results(self) -> list:
        self._close_command()
        out: list = []
        for cmd in self.commands:
            try:
                launch = self._launch(cmd)
            except (ValueError, TypeError):
                launch = None
            if launch is not None:
                out.append(launch)
        extra = self._namespace_launch()
        if extra is not None:
            out.append(extra)
        out += self._runs()
        return out

    def _runs(self) -> list[BenchRun]:
        raise NotImplementedError


def _ints(v: Any) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    out = []
    for x in vals:
        n = bc.count(x) if isinstance(x, (str, int, float)) and not isinstance(x, bool) else None
        if n:
            out.append(n)
    return out


class SglangOneBatchText(_OfflineText):
    """sglang's static-batch latency benchmark: `python -m sglang.bench_latency`,
    `sglang.bench_one_batch`, `sglang.benchmark.one_batch` and their output."""

    kind = "sglang-one-batch-text"
    tool = "sglang-one-batch"
    engine = "sglang"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.phase = ""  # "warmup" after `Warmup ...`, "bench" after `Benchmark ...`
        self.current: _Group | None = None

    def _command_start(self, line: str) -> str | None:
        m = _SGL_CMD.search(line) if "sglang." in line else None
        return m.group(1) if m else None

    def _entry(self, text: str) -> re.Match | None:
        return _SGL_CMD.search(text)

    def _in_warmup(self) -> bool:
        return self.phase == "warmup"

    def _feed_result(self, lineno: int, line: str) -> None:
        s = line.strip()
        if s.endswith("Warmup ..."):
            self.phase, self.current = "warmup", None
            return
        if s.endswith("Benchmark ..."):
            self.phase, self.current = "bench", None
            return
        if "latency:" not in line:
            return
        m = _PREFILL.search(line)
        if m:
            self.current = self._group(lineno)
            if self.current:
                self.current.values.update(prefill_s=_num(m.group(1)), prefill_tput=_num(m.group(2)))
            return
        m = _DECODE_MEDIAN.search(line)
        if m:
            g = self._open(lineno)
            if g:
                g.values.update(decode_median_s=_num(m.group(1)), decode_median_tput=_num(m.group(2)))
            return
        m = _DECODE_STEP.search(line)
        if m:
            g = self._open(lineno)
            if g and m.group(1):
                g.values["batch"] = bc.count(m.group(1))
            return
        m = _TOTAL.search(line)
        if m:
            g = self._open(lineno)
            if g:
                g.values.update(total_s=_num(m.group(1)), total_tput=_num(m.group(2)))
                g.closed = True
            self.current = None

    def _open(self, lineno: int) -> _Group | None:
        if self.current is None or self.current.closed:
            self.current = self._group(lineno)
        return self.current

    def _runs(self) -> list[BenchRun]:
        groups = [g for g in self.groups if g.values]
        if any(not g.warmup for g in groups):
            groups = [g for g in groups if not g.warmup]
        settings = self._bench_settings()
        # BenchArgs defaults when the command is known: batch 1, input 1024, output 16
        default = bool(self.commands)
        bss = _ints(settings.get("batch-size")) or [1] * default
        ils = _ints(settings.get("input-len")) or [1024] * default
        ols = _ints(settings.get("output-len")) or [16] * default
        combos = [(b, i, o) for b in bss for i in (ils or [None]) for o in (ols or [None])]
        runs = []
        for n, g in enumerate(groups):
            v = g.values
            b, il, ol = combos[n] if n < len(combos) and len(groups) == len(combos) else \
                (combos[0] if len(combos) == 1 else (None, None, None))
            batch = v.get("batch") or b
            if il is None and batch and v.get("prefill_s") and v.get("prefill_tput"):
                il = round(v["prefill_s"] * v["prefill_tput"] / batch)
            step = v.get("decode_median_s")
            run = bc.make_run(
                self.path, g.line, tool=self.tool, backend="sglang", model=settings.get("model"),
                concurrency=batch, num_prompts=batch, completed=batch, input_len=il, output_len=ol,
                duration_s=v.get("total_s"), total_throughput=v.get("total_tput"),
                output_throughput=v.get("decode_median_tput"),
                ttft_ms={"median": round(v["prefill_s"] * 1000, 6)} if v.get("prefill_s") else None,
                tpot_ms={"median": round(step * 1000, 6)} if step else None,
                e2e_ms={"median": round(v["total_s"] * 1000, 6)} if v.get("total_s") else None,
                server_args={"bench": {"kind": "static batch (one_batch)",
                                       **({"prefill_throughput": v["prefill_tput"]} if v.get("prefill_tput") else {})}},
            )
            if bc.has_throughput(run):
                runs.append(run)
        return runs


class VllmThroughputText(_OfflineText):
    """vLLM's offline throughput benchmark: `benchmark_throughput.py` / `vllm bench
    throughput`, its command line, `Namespace(...)` echo and `Throughput:` line."""

    kind = "vllm-throughput-text"
    tool = "vllm-throughput"
    engine = "vllm"

    def _command_start(self, line: str) -> str | None:
        if "throughput" not in line:
            return None
        m = _VLLM_CMD.search(line)
        if not m or line.lstrip().startswith(("Throughput:", "#")):
            return None
        new_cli = "bench" in m.group(0) and ".py" not in m.group(0)
        if new_cli and not cli_context(line, m):
            return None  # prose: "that time is included in vllm bench throughput measurement"
        return "vllm bench throughput" if new_cli else "benchmark_throughput.py"

    def _entry(self, text: str) -> re.Match | None:
        return _VLLM_CMD.search(text)

    def _feed_result(self, lineno: int, line: str) -> None:
        if "amespace(" in line:
            m = _NAMESPACE.match(line)
            if m:
                self.namespace = _namespace(m.group(1))
            return
        m = _VLLM_TPUT.search(line) if "Throughput:" in line else None
        if m:
            g = self._group(lineno)
            if g:
                g.values.update(req=_num(m.group(1)), total=_num(m.group(2)), out=_num(m.group(4)),
                                ns=dict(self.namespace))
            return
        m = _VLLM_TOKENS.search(line) if "Total num" in line else None
        if m and self.groups:
            self.groups[-1].values.setdefault(m.group(1), bc.count(m.group(2)))

    def _runs(self) -> list[BenchRun]:
        settings = self._bench_settings()
        runs = []
        for g in self.groups:
            v = g.values
            ns = v.get("ns") or {}
            if ns.get("backend") not in (None, "vllm", "vllm-chat"):
                continue
            n_prompts = bc.count(settings.get("num-prompts")) or bc.count(ns.get("num_prompts"))
            model = settings.get("model") or (ns.get("model") if isinstance(ns.get("model"), str) else None)
            il = bc.num(settings.get("input-len")) or bc.num(ns.get("input_len"))
            ol = bc.num(settings.get("output-len")) or bc.num(ns.get("output_len"))
            if n_prompts and v.get("prompt") is not None:
                il = v["prompt"] / n_prompts
            if n_prompts and v.get("output") is not None:
                ol = v["output"] / n_prompts
            run = bc.make_run(
                self.path, g.line, tool=self.tool, backend="vllm", model=model, num_prompts=n_prompts,
                completed=n_prompts, input_len=il, output_len=ol, request_throughput=v.get("req"),
                total_throughput=v.get("total"), output_throughput=v.get("out"),
                duration_s=n_prompts / v["req"] if n_prompts and v.get("req") else None,
                server_args={"bench": {"kind": "offline throughput (all prompts at once)",
                                       **{k: ns[k] for k in ("tensor_parallel_size", "max_num_seqs")
                                          if isinstance(ns.get(k), (int, float)) and not isinstance(ns.get(k), bool)}}},
            )
            if bc.has_throughput(run):
                runs.append(run)
        return runs

    def _namespace_launch(self) -> LaunchCommand | None:
        """Without the command line, the engine settings older versions echo as `Namespace(...)`."""
        ns = self.namespace
        if self.commands or not ns or ns.get("backend") not in (None, "vllm", "vllm-chat"):
            return None
        known = any_version_flags("vllm")
        args = {f"--{k.replace('_', '-')}": v for k, v in ns.items()
                if k != "backend" and f"--{k.replace('_', '-')}" in known and v is not None and v is not False}
        if not args:
            return None
        norm = {norm_flag(k): v for k, v in args.items()}
        model = norm.get("model")
        out = LaunchCommand(engine="vllm", entry="bench:benchmark_throughput.py", args=args, norm_args=norm,
                            model=model if isinstance(model, str) else None, raw="Namespace(...)",
                            source=Where(path=self.path))
        return LaunchCommand.model_validate(redact_data(out.model_dump()))


def _namespace(text: str) -> dict[str, Any]:
    """The engine and benchmark settings of a printed argparse Namespace."""
    out: dict[str, Any] = {}
    for key in _NS_KEYS:
        m = re.search(rf"(?<![\w.]){key}=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\[\]{{}}]*)", text)
        if not m:
            continue
        try:
            out[key] = ast.literal_eval(m.group(1).strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return out


PARSERS = (SglangOneBatchText, VllmThroughputText)
