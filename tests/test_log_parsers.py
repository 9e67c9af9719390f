"""sglang and vLLM server-log parsers: every sample file, exact values from real lines,
garbage that must not crash, and a 50 MB log that must stay bounded."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ingest.serverlog import LineSampler, moe_config_data, parse_call_args, parse_dict_repr, split_fields
from ingest.sglang_log import SglangLog
from ingest.vllm_log import VllmLog
from kb.records import ServerTrace

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"
SGLANG_FILES = sorted(p for p in (SAMPLES / "sglang_logs").glob("*") if p.suffix != ".md")
VLLM_FILES = sorted(p for p in (SAMPLES / "vllm_logs").glob("*") if p.suffix != ".md")


def feed(cls, lines, path="test.log"):
    p = cls(str(path))
    for i, line in enumerate(lines, 1):
        p.feed(i, line)
    return p.results()


def parse_file(cls, path: Path):
    p = cls(str(path))
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, 1):
            p.feed(i, line.rstrip("\r\n"))
    return p.results()


def one(cls, name: str) -> ServerTrace:
    folder = "sglang_logs" if cls is SglangLog else "vllm_logs"
    traces = parse_file(cls, SAMPLES / folder / name)
    assert len(traces) == 1
    return traces[0]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


# ---------------------------------------------------------------- every sample file


@pytest.mark.parametrize("path", SGLANG_FILES, ids=lambda p: p.name)
def test_sglang_sample_gives_one_trace(path):
    traces = parse_file(SglangLog, path)
    assert len(traces) == 1
    t = traces[0]
    assert t.engine == "sglang" and t.source == str(path)
    text = lines_of(path)
    assert t.lines == len(text)
    # an independent count: every line that reads as a Decode/Prefill stats line is one sample
    decode = sum(1 for ln in text if ("Decode batch" in ln and "#running-req" in ln))
    prefill = sum(1 for ln in text if "Prefill batch" in ln and "#new-seq" in ln)
    assert t.stats["decode_samples"] == decode
    assert t.stats["prefill_samples"] == prefill
    assert len(t.samples) == t.stats["samples"] == decode + prefill
    assert all(s.line and 1 <= s.line <= len(text) for s in t.samples)
    assert sum(t.stats["events"].values()) >= len(t.events)
    assert ServerTrace.model_validate_json(t.model_dump_json()) == t
    assert feed(VllmLog, text) == []  # not mistaken for the other engine


@pytest.mark.parametrize("path", VLLM_FILES, ids=lambda p: p.name)
def test_vllm_sample_gives_one_trace(path):
    traces = parse_file(VllmLog, path)
    assert len(traces) == 1
    t = traces[0]
    assert t.engine == "vllm"
    text = lines_of(path)
    stats_lines = sum(1 for ln in text if "Avg generation throughput" in ln and "Running: " in ln)
    assert t.stats["stats_samples"] == len(t.samples) == stats_lines
    assert t.stats["decode_samples"] == t.stats["prefill_samples"] == 0
    assert ServerTrace.model_validate_json(t.model_dump_json()) == t
    assert feed(SglangLog, text) == []


def test_sample_dirs_are_not_empty():
    assert len(SGLANG_FILES) >= 5 and len(VLLM_FILES) >= 5


# ---------------------------------------------------------------- sglang specifics


def test_sglang_grok2_startup():
    t = one(SglangLog, "p2_grok2_v052rc2_tp8_startup.log")
    s = t.startup
    assert s["max_total_num_tokens"] == 903439
    assert s["chunked_prefill_size"] == 8192
    assert s["max_prefill_tokens"] == 16384
    assert s["max_running_requests"] == 3529
    assert s["context_len"] == 131072
    assert s["available_gpu_mem_gb"] == 10.26
    assert s["cuda_graph_bs"][:4] == [1, 2, 4, 8] and s["cuda_graph_max_bs"] == 160 and len(s["cuda_graph_bs"]) == 23
    assert s["kv_cache_tokens"] == 903439 and s["kv_cache_gb"] == 27.58
    assert s["model_class"] == "Grok1ForCausalLM" and s["weights_mem_gb"] == 36.73
    assert s["cuda_graph_capture_s"] == 17.13 and s["cuda_graph_mem_gb"] == 0.89
    a = t.server_args
    assert a["model_path"] == "/models/grok-2" and a["tp_size"] == 8 and a["quantization"] == "fp8"
    assert a["mem_fraction_static"] == 0.831 and a["custom_weight_loader"] == [] and a["api_key"] is None
    assert a["max_queued_requests"] == 9223372036854775807 and a["enable_dp_attention"] is False
    assert len(a) > 200
    # the first fallback warning is glued to a tqdm bar ("...it/s][2025-09-11 10:25:47 TP3] Config file ...")
    fb = [e for e in t.events if e.kind == "moe-fallback-config"]
    assert t.stats["events"] == {"moe-fallback-config": 3}
    assert fb[0].data["E"] == 8 and fb[0].data["N"] == 2048 and fb[0].data["device_name"] == "NVIDIA_H100_80GB_HBM3"
    assert fb[0].data["dtype"] == "fp8_w8a8" and fb[0].data["triton_version"] == "3.4.0"
    assert fb[0].data["fallback_triton_version"] == "3.1.0"
    first_decode = next(x for x in t.samples if x.kind == "decode")
    assert (first_decode.time, first_decode.running, first_decode.tokens) == ("2025-09-11 10:26:22", 1, 48)
    assert first_decode.cuda_graph is True and first_decode.gen_throughput == 1.88
    assert t.stats["gen_throughput_max"] == 98.94 and t.stats["ranks"] == ["TP0"]
    assert t.stats["prefill_new_tokens"] == 6 + 15 + 12 + 15 and t.stats["prefill_cached_tokens"] == 4


def test_sglang_cuda_graph_false_counts():
    t = one(SglangLog, "p2_pr13023_cuda_graph_false.log")
    assert t.stats["cuda_graph_false"] == 2
    assert t.stats["cuda_graph_false_running_max"] == 46
    assert t.stats["running_max"] == 46 and t.stats["running_mean"] == 23.75
    assert t.stats["queued_max"] == 0 and t.stats["queue_nonzero_frac"] == 0.0
    assert t.samples[0].time == "2025-11-11 04:06:27"


def test_sglang_queue_and_usage():
    t = one(SglangLog, "p2_issue14972_overlap_retract.log")
    assert t.stats["queue_nonzero_frac"] == 1.0 and t.stats["queued_max"] == 5
    assert t.stats["token_usage_max"] == 0.94 and t.stats["gen_throughput_max"] == 446.45


def test_sglang_hybrid_swa_and_garbled_prefix():
    t = one(SglangLog, "p2_issue26248_swa_retract_collapse.log")
    first = t.samples[0]  # pasted without its "[": the time is still found
    assert first.time == "2026-05-24 03:51:44" and first.tokens == 2642688
    assert first.token_usage == 1.0 and first.queued == 3
    short = t.samples[3]  # "[03:51:54] Decode batch, ..." without cuda graph or queue
    assert short.running == 6 and short.queued is None and short.cuda_graph is None and short.token_usage == 0.92
    assert t.stats["token_usage_max"] == 1.0
    assert t.stats["extra_max"]["#swa token"] == 14592


def test_sglang_spec_decoding_and_prefill_fields():
    t = one(SglangLog, "p2_issue36081_spec_swa_ep.log")
    decode = [s for s in t.samples if s.kind == "decode"]
    assert [s.accept_len for s in decode] == [3.55, 4.42]
    assert t.stats["accept_len_mean"] == 3.985 and t.stats["accept_len_max"] == 4.42
    assert t.stats["extra_max"]["accept rate"] == 0.69
    assert t.stats["ranks"] == ["TP0 EP0"]
    prefill = [s for s in t.samples if s.kind == "prefill"][0]
    assert prefill.prompt_throughput == 49004.48 and prefill.cuda_graph is False and prefill.token_usage == 0.02
    assert t.stats["cuda_graph_false"] == 0  # prefill lines do not count toward the decode graph figure


def test_sglang_docs_old_form_and_retract():
    t = one(SglangLog, "p2_sglang_docs_tuning.log")
    s = t.samples[0]
    assert (s.running, s.tokens, s.token_usage, s.gen_throughput, s.queued) == (233, 370959, 0.82, 4594.01, 317)
    assert s.cuda_graph is None and s.time is None
    (ev,) = t.events
    assert ev.kind == "retract" and ev.where.line == 2
    assert ev.data == {"retracted": 1, "new_token_ratio_before": 0.9998, "new_token_ratio_after": 1.0}


def test_sglang_format_strings_across_versions():
    t = one(SglangLog, "p2_format_strings_sglang.log")
    by_line = {s.line: s for s in t.samples}
    iters = by_line[7]  # "Decode batch [1234], ..." with disaggregation + spec fields
    assert (iters.running, iters.tokens, iters.queued, iters.cuda_graph) == (256, 150000, 40, False)
    assert iters.accept_len == 3.12 and iters.gen_throughput == 9876.54
    assert by_line[8].cuda_graph is True  # "cpu graph: True"
    assert by_line[4].token_usage == 0.35  # hybrid: the fuller of full/swa pools
    ex = t.stats["extra_max"]
    assert ex["#prealloc-req"] == 6 and ex["#transfer-req"] == 3 and ex["#retracted-req"] == 1
    assert ex["#inflight-req"] == 1 and ex["#unbootstrapped-req"] == 3 and ex["pre-allocated usage"] == 0.1
    assert by_line[9].prompt_throughput == 30123.45
    retracts = [e for e in t.events if e.kind == "retract"]
    assert [e.data["retracted"] for e in retracts] == [2, 3]
    assert retracts[1].data["new_tokens_gained"] == 4096 and retracts[1].data["new_token_ratio_after"] == 0.8
    assert t.startup["available_cpu_mem_gb"] == 120.5 and t.startup["max_total_num_tokens"] == 500000
    assert t.startup["cpu_graph_bs"] == [1, 2, 4, 8, 16] and t.startup["cpu_graph_max_bs"] == 16
    assert t.startup["piecewise_cuda_graph_tokens"] == [4, 8, 16, 32, 64]
    assert t.startup["kv_cache_gb"] == 32.75
    assert t.stats["events"]["oom"] == 2
    assert sorted(t.stats["ranks"]) == ["DP1 TP1 EP1", "DP3 TP3 EP3", "TP0"]


def test_sglang_moe_default_config_events():
    t = one(SglangLog, "p2_moe_default_config_issues.log")
    assert t.stats["events"] == {"moe-default-config": 12, "moe-fallback-config": 1, "w8a8-default-config": 1}
    moe = [e for e in t.events if e.kind == "moe-default-config"]
    d = moe[0].data
    assert (d["E"], d["N"], d["device_name"], d["dtype"], d["block_shape"]) == (256, 128, "NVIDIA_H800", "fp8_w8a8",
                                                                                [128, 128])
    assert d["path"].endswith("E=256,N=128,device_name=NVIDIA_H800,dtype=fp8_w8a8,block_shape=[128, 128].json")
    down = [e for e in moe if e.data.get("down")]
    assert down and down[0].data["device_name"] in ("NVIDIA_H200_NVL", "NVIDIA_H200")
    w8 = next(e for e in t.events if e.kind == "w8a8-default-config")
    assert (w8.data["N"], w8.data["K"]) == (576, 7168)
    assert moe[-1].data == {}  # the warning wrapped over two lines keeps its event, without a file name


def test_moe_config_name_from_brief():
    line = ("Using default MoE kernel config. Performance might be sub-optimal! Config file not found at "
            "/.../E=257,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=fp8_w8a8,"
            "block_shape=[128, 128].json")
    d = moe_config_data(line)
    assert d["E"] == 257 and d["N"] == 256 and d["block_shape"] == [128, 128]
    assert d["device_name"] == "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition" and d["dtype"] == "fp8_w8a8"
    assert d["path"].startswith("/.../E=257")


# ---------------------------------------------------------------- vLLM specifics


def test_vllm_v1_stats():
    t = one(VllmLog, "p2_v1_mtp_issue43295.log")
    s = t.samples[0]
    assert (s.time, s.running, s.queued, s.token_usage) == ("05-19 10:13:11", 18, 43, 0.959)
    assert s.gen_throughput == 1055.3 and s.prompt_throughput == 0.0 and s.prefix_hit_rate == 0.0
    assert t.stats["queued_max"] == 43 and t.stats["token_usage_max"] == 0.984
    assert t.stats["gen_throughput_max"] == 1242.7 and t.stats["prompt_throughput_max"] == 18032.5
    assert t.stats["engines"] == 1 and t.stats["queue_nonzero_frac"] == 1.0


def test_vllm_docker_timestamp_prefix():
    t = one(VllmLog, "p2_v1_docker_timestamps_tt3359.log")
    assert t.samples[0].time == "05-12 08:01:39"
    assert t.stats["queue_nonzero_frac"] == 0.25


def test_vllm_prefix_hit_rate():
    t = one(VllmLog, "p2_v1_prefix_hit_issue19680.log")
    assert t.samples[0].prefix_hit_rate == 0.405 and t.samples[0].queued == 4


def test_vllm_v0_stats_and_separate_prefix_line():
    t = one(VllmLog, "p2_v0_prefix_cache_pr18674.log")
    assert len(t.samples) == 3
    assert all(s.prefix_hit_rate == 0.0 for s in t.samples)  # "Prefix cache hit rate: GPU: 0.00%, CPU: 90.00%"
    assert t.stats["extra_max"]["CPU prefix cache hit rate"] == 0.9
    assert t.stats["extra_max"]["CPU KV cache usage"] == 0.002
    assert t.samples[0].queued == 0  # Pending


def test_vllm_v0_preemption_and_tqdm_glued_lines():
    t = one(VllmLog, "p2_v0_swap_preempt_issue5578.log")
    s = t.samples[0]
    assert (s.running, s.queued, s.token_usage, s.gen_throughput) == (34, 9832, 0.992, 13395.4)
    assert s.time == "06-16 21:24:15"
    (ev,) = t.events
    assert ev.kind == "preempt" and ev.data == {"seq_group": "165", "mode": "SWAP", "cumulative": 151}
    assert t.stats["extra_max"]["Swapped"] == 137
    docs = one(VllmLog, "p2_v0_docs_preempt.log")
    assert docs.events[0].data == {"seq_group": "0", "mode": "RECOMPUTE", "cumulative": 1}


def test_vllm_startup_pr24162():
    t = one(VllmLog, "p2_v1_startup_pr24162.log")
    assert t.engine_version == "0.10.2.dev378+g4d7fe40fc.d20250829"
    assert t.server_args == {"model_tag": "/data/datasets/models-hf/Qwen2.5-0.5B/",
                             "model": "/data/datasets/models-hf/Qwen2.5-0.5B/", "tensor_parallel_size": 2}
    assert t.startup["max_model_len"] == 32768 and t.startup["max_num_batched_tokens"] == 2048


def test_vllm_startup_kv_capacity_and_nested_args():
    t = one(VllmLog, "p2_v1_startup_club3090_295.log")
    assert t.startup["kv_cache_tokens"] == 620944 and t.startup["max_concurrency"] == 2.37
    assert t.startup["max_model_len"] == 262144 and t.startup["max_num_seqs"] == 2
    assert t.server_args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert t.server_args["served_model_name"] == ["qwen3.6-27b-autoround"]
    t2 = one(VllmLog, "p2_v1_startup_club3090_871.log")
    assert t2.startup["kv_cache_memory_gib"] == 10.3 and t2.startup["kv_cache_tokens"] == 567737
    t3 = one(VllmLog, "p2_v1_startup_pr12569_blocks.log")
    assert t3.startup == {"weights_mem_gib": 67.7229, "num_gpu_blocks": 1381, "max_concurrency": 10.79,
                          "max_model_len": 2048}
    t4 = one(VllmLog, "p2_v1_kv_tokens_pr13596.log")
    assert t4.startup["kv_cache_tokens"] == 2042016 and t4.startup["max_model_len"] == 2048


def test_vllm_cpu_kv_capacity():
    # vLLM names the pool after the device: "CPU KV cache size" on the CPU build (real start-up here)
    t = one(VllmLog, "run-vllm-0.32.0_cpu_tiny-llama_startup.log")
    assert t.startup["kv_cache_tokens"] == 1048576 and t.startup["max_concurrency"] == 2048.0
    assert t.engine_version == "0.32.0" and t.startup["max_model_len"] == 512


def test_vllm_engine_config_lines():
    t = one(VllmLog, "p2_engine_config_wrapped_ramalama912.log")
    assert t.engine_version == "0.8.3.dev244+g8b3a4a17e"
    cfg = t.startup["engine_config"]
    assert cfg["model"] == "google/gemma-3-1b-it" and cfg["max_seq_len"] == 32768
    assert cfg["enable_prefix_caching"] is True
    assert "cuda_graph_bs" not in t.startup  # the capture list is cut off in this paste
    old = one(VllmLog, "p2_engine_config_v066.log")
    assert old.engine_version == "0.6.6" and old.startup["engine_config"]["pipeline_parallel_size"] == 2
    assert one(VllmLog, "p2_api_server_args_v064.log").engine_version == "0.6.4.post1"


def test_vllm_format_strings_dp_spec_and_redaction():
    t = one(VllmLog, "p2_format_strings_vllm.log")
    assert t.stats["engines"] == 2 and len(t.samples) == 2
    assert t.samples[1].accept_len == 2.61 and t.stats["accept_len_mean"] == 2.61
    assert t.samples[0].prefix_hit_rate == 0.25 and t.samples[1].queued == 5
    assert t.server_args["api_key"] == "<redacted>" and t.server_args["max_num_seqs"] == 256
    assert t.startup["max_num_seqs"] == 256
    assert "sk-secret" not in t.model_dump_json()


def test_vllm_oom_log_alone_is_recognised():
    t = one(VllmLog, "p2_v0_oom_issue9290.log")
    assert t.stats["events"] == {"error": 1, "oom": 1}
    assert t.events[0].kind == "oom" and t.events[0].where.line == 1


def test_vllm_moe_default_config():
    t = one(VllmLog, "p2_moe_default_config.log")
    assert t.stats["events"] == {"moe-default-config": 6, "w8a8-default-config": 1}
    moe = [e.data for e in t.events if e.kind == "moe-default-config"]
    assert moe[0]["block_shape"] == [128, 128] and moe[0]["E"] == 16 and moe[0]["N"] == 1536
    assert moe[1] == {**moe[1], "E": 256, "N": 14336, "device_name": "NVIDIA_GeForce_RTX_3090"}
    assert "dtype" not in moe[1]
    listed = moe[-1]  # newer vLLM prints the searched paths as a list
    assert listed["device_name"] == "NVIDIA_L40S" and listed["path"].startswith("/workspace/")


# ---------------------------------------------------------------- shared helpers


def test_split_fields_and_call_args():
    assert split_fields("#running-req: 5, token usage: 0.41, cuda graph: True, ") == {
        "#running-req": "5", "token usage": "0.41", "cuda graph": "True"}
    args = parse_call_args("ServerArgs(a=1, b='x, y', c=[1, 2], d=LoadFormat.AUTO, e={'k': (1, 2)}, hf_token='hf_x')")
    assert args == {"a": 1, "b": "x, y", "c": [1, 2], "d": "LoadFormat.AUTO", "e": {"k": [1, 2]},
                    "hf_token": "<redacted>"}
    assert parse_dict_repr("{'a': 1, 'b': <Enum.X: 2>, 'c': 'd'}") == {"a": 1, "b": "<Enum.X: 2>", "c": "d"}


def test_line_sampler_bounds_and_spreads():
    s = LineSampler(cap=100)
    for i in range(100_000):
        s.add(i)
    assert len(s.items) < 100 and s.items[0] == 0
    gaps = {b - a for a, b in pairwise(s.items)}
    assert gaps == {s.stride}  # evenly spaced
    assert s.seen == 100_000


GARBAGE = [
    "", " ", "\x00\x01", "Decode batch.", "Decode batch, #running-req: abc, token usage: , cuda graph: maybe",
    "Decode batch [x], #running-req", "Prefill batch. #new-seq: 1, #new-token: -, #cached-token: nan",
    "server_args=ServerArgs(model_path='x', broken=", "server_args=ServerArgs(" + "[" * 5000,
    "non-default args: {'a': ", "non-default args: {" + "(" * 5000, "args: Namespace(model=",
    "Capture cuda graph bs [1, 2,", "Capture cuda graph bs []", "max_total_num_tokens=, chunked_prefill_size=x",
    "KV cache pool is full. Retract requests. #retracted_reqs: ", "Config file not found at E=,N=.json",
    "Using default MoE config. Performance might be sub-optimal! Config file not found at ['",
    "Engine 000: Avg prompt throughput: , Running:  reqs", "Avg prompt throughput: x tokens/s, Running: y reqs",
    "GPU KV cache size: , tokens", "Maximum concurrency for x tokens per request: yx", "# GPU blocks: ",
    "Initializing a V1 LLM engine (v) with config: ", "vLLM API server version",
    "Sequence group  is preempted by PreemptionMode. mode", "Prefix cache hit rate: GPU: x%, CPU",
    "SpecDecoding metrics: Mean acceptance length: .", "x" * 1_000_000, "💥 Decode batch, #running-req: 1💥",
]


@pytest.mark.parametrize("cls", [SglangLog, VllmLog])
def test_garbage_lines_never_raise(cls):
    p = cls("garbage.log")
    for i, line in enumerate(GARBAGE, 1):
        p.feed(i, line)
    for trace in p.results():
        assert len(trace.samples) <= 2000
        ServerTrace.model_validate_json(trace.model_dump_json())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("Decode batch,.#:-[] 0123456789TPrunig-qeuktoavsx=()'{}%\\"))
                        | st.characters(), max_size=120), max_size=20))
def test_random_lines_never_raise(lines):
    for cls in (SglangLog, VllmLog):
        p = cls("random.log")
        for i, line in enumerate(lines, 1):
            p.feed(i, line)
        p.results()


@pytest.mark.parametrize("line", [
    "Using default MoE config. Performance might be sub-optimal! Config file not found at " + "x" * 1_000_000,
    "Config file not found at " + "a/" * 500_000 + "N=1",
    "Decode batch, " + "#running-req: 1, " * 100_000,
    "E" * 1_000_000 + "Error: x",
])
def test_pathological_lines_stay_fast(line):
    for cls in (SglangLog, VllmLog):
        t0 = time.perf_counter()
        feed(cls, [line])
        assert time.perf_counter() - t0 < 5


def test_nan_and_inf_values_are_dropped():
    (t,) = feed(SglangLog, ["Decode batch, #running-req: 3, #token: 9, token usage: nan, cuda graph: True, "
                            "gen throughput (token/s): inf, #queue-req: 0"])
    s = t.samples[0]
    assert (s.running, s.token_usage, s.gen_throughput) == (3, None, None)
    assert t.stats["gen_throughput_max"] is None
    t.model_dump_json()


def test_unrelated_text_gives_nothing():
    text = ["hello", "INFO:     127.0.0.1:1 - \"GET / HTTP/1.1\" 200 OK", "RuntimeError: something else"]
    assert feed(SglangLog, text) == [] and feed(VllmLog, text) == []


# ---------------------------------------------------------------- 50 MB


def _big_log(path: Path, blocks: list[str], target: int) -> int:
    """Write `blocks` (real lines) repeatedly until `target` bytes; returns the repeat count."""
    blob = "\n".join(blocks) + "\n"
    n = target // len(blob.encode()) + 1
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(n):
            fh.write(blob)
    return n


def _timed(cls, path: Path):
    t0 = time.perf_counter()
    traces = parse_file(cls, path)
    secs = time.perf_counter() - t0
    return traces, path.stat().st_size / 1e6 / secs


def test_sglang_50mb_log_is_bounded_and_exact(tmp_path, record_property):
    startup = lines_of(SAMPLES / "sglang_logs" / "p2_grok2_v052rc2_tp8_startup.log")
    body = (lines_of(SAMPLES / "sglang_logs" / "p2_pr13023_cuda_graph_false.log")
            + lines_of(SAMPLES / "sglang_logs" / "p2_pr22166_prefill_cuda_graph.log")
            + lines_of(SAMPLES / "sglang_logs" / "p2_sglang_docs_tuning.log"))
    path = tmp_path / "big_sglang.log"
    (path).write_text("\n".join(startup) + "\n", encoding="utf-8")
    with open(path, "a", encoding="utf-8") as fh:
        blob = "\n".join(body) + "\n"
        reps = 50 * 1024 * 1024 // len(blob.encode()) + 1
        for _ in range(reps):
            fh.write(blob)
    (t,), mbps = _timed(SglangLog, path)
    record_property("sglang_mb_per_s", round(mbps, 1))
    print(f"\nsglang-log: {path.stat().st_size / 1e6:.0f} MB at {mbps:.1f} MB/s")
    assert path.stat().st_size >= 50 * 1024 * 1024
    assert len(t.samples) <= 2000 and len(t.events) <= 50 * len(t.stats["events"])
    assert t.stats["decode_samples"] == 14 + reps * (8 + 1 + 1)
    assert t.stats["prefill_samples"] == 4 + reps * 3
    assert t.stats["cuda_graph_false"] == reps * 2 and t.stats["cuda_graph_false_running_max"] == 46
    assert t.stats["events"]["retract"] == reps and t.stats["events"]["moe-fallback-config"] == 3
    assert t.stats["running_max"] == 233 and t.stats["queued_max"] == 317
    assert t.lines == len(startup) + reps * len(body)
    assert t.startup["max_total_num_tokens"] == 903439


def test_vllm_50mb_log_is_bounded_and_exact(tmp_path, record_property):
    body = (lines_of(SAMPLES / "vllm_logs" / "p2_v1_mtp_issue43295.log")
            + lines_of(SAMPLES / "vllm_logs" / "p2_v0_swap_preempt_issue5578.log")
            + lines_of(SAMPLES / "vllm_logs" / "p2_format_strings_vllm.log"))
    path = tmp_path / "big_vllm.log"
    reps = _big_log(path, body, 50 * 1024 * 1024)
    (t,), mbps = _timed(VllmLog, path)
    record_property("vllm_mb_per_s", round(mbps, 1))
    print(f"\nvllm-log: {path.stat().st_size / 1e6:.0f} MB at {mbps:.1f} MB/s")
    assert len(t.samples) <= 2000
    assert t.stats["stats_samples"] == reps * (5 + 2 + 2)
    assert t.stats["events"] == {"preempt": reps} and len(t.events) == 50
    assert t.stats["queued_max"] == 9832 and t.stats["engines"] == 2
    assert t.stats["accept_len_mean"] == 2.61
    assert t.lines == reps * len(body)
