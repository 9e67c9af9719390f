"""Each rule fires on the evidence it exists for and stays quiet otherwise.

Rules read records (signals, server arguments, model profile, hardware), so the
fixtures here are records; the parsers that produce them are tested on verbatim
tool output elsewhere."""

import shlex

from kb.evidence import RunEvidence
from kb.flags import catalog
from kb.records import BenchRun, Event, Hardware, ModelProfile, ServerTrace, Where
from kb.rules import registry
from kb.rules.base import RuleContext
from kb.rules.registry import RULES
from kb.signals import detect

GLM5 = dict(name="GLM-5-NVFP4", architecture="GlmMoeDsaForCausalLM", family="glm", is_moe=True, experts=256,
            experts_per_token=8, expert_intermediate_size=2048, shared_experts=1, attention="MLA", heads=64,
            mtp_layers=1, quantization="nvfp4")
LLAMA = dict(name="Llama-3.1-70B", family="llama", is_moe=False, attention="GQA", heads=64, kv_heads=8,
             quantization="bf16")
PRO6000 = dict(gpu="RTX PRO 6000 Blackwell", arch="SM120", count=8, interconnect="PCIe", numa_nodes=2)
H100 = dict(gpu="H100", arch="SM90", count=8, interconnect="NVLink")


def bench(*points, single=None, io=(1000, 1000)):
    runs = [BenchRun(tool="sglang-bench", concurrency=c, total_throughput=t, input_len=io[0], output_len=io[1],
                     ttft_ms={"median": ttft}, source=Where(path="bench.jsonl", line=i + 1))
            for i, (c, t, ttft) in enumerate(points)]
    if single:
        runs.append(BenchRun(tool="sglang-bench", concurrency=1, output_throughput=single,
                             tpot_ms={"median": 1000 / single}))
    return runs


def trace(cap=128, max_running=128, queued=0.9, usage=0.41, graph_false=0, max_graph_false=None, events=(),
          captured=None, tokens=500000):
    startup = {"max_running_requests": cap, "max_total_num_tokens": tokens}
    if captured:
        startup["cuda_graph_max_bs"] = captured
    counts = {}
    for e in events:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return ServerTrace(engine="sglang", source="server.log", startup=startup, events=list(events),
                       stats={"samples": 100, "running_max": max_running, "queue_nonzero_frac": queued,
                              "queued_max": 64,
                              "token_usage_max": usage, "cuda_graph_false": graph_false,
                              "cuda_graph_false_running_max": max_graph_false, "events": counts})


MOE_EVENT = Event(kind="moe-default-config", where=Where(path="server.log", line=7),
                  text="Using default MoE kernel config",
                  data={"E": 257, "N": 256, "device_name": "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition",
                        "path": "/x/configs/triton_3_4_0/"
                                "E=257,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition.json"})


def run_rule(name, engine="sglang", version="0.5.8", model=None, hw=None, args=None, runs=(), traces=()):
    ev = RunEvidence(engine=engine, engine_version=version, bench=list(runs), traces=list(traces),
                     model=ModelProfile(**model) if model else None, hardware=Hardware(**hw) if hw else None,
                     server_args=args or {}, model_path="org/model")
    ctx = RuleContext(ev=ev, signals={s.id: s for s in detect(ev)}, engine=engine, catalog=catalog(engine, version))
    (rule,) = [r for r in RULES if r.name == name]
    return registry.run(rule, ctx)


def flag(p, name):
    return next(c for c in p.changes if c.flag == name)


# ---------------------------------------------------------------- KB101


def test_running_cap_fires_when_pinned_with_queue():
    p = run_rule("running-request-cap", runs=bench((64, 700, 900), (128, 806, 2000), (256, 880, 9000)),
                 traces=[trace(cap=128)], args={"max_running_requests": 128})
    assert flag(p, "--max-running-requests").new == 250  # 500,000 KV tokens / 2,000 tokens per request


def test_running_cap_vllm_uses_max_num_seqs():
    p = run_rule("running-request-cap", engine="vllm", version="0.11.0",
                 runs=bench((8, 3307, 50), (16, 3940, 120), (32, 3082, 400)),
                 traces=[trace(cap=8, max_running=8, tokens=None)], args={"max_num_seqs": 8})
    assert flag(p, "--max-num-seqs").new == 32


def test_running_cap_fires_when_offered_load_exceeds_cap_and_requests_queue():
    run = BenchRun(tool="vllm-bench", concurrency=512, total_throughput=9959.18,
                   ttft_ms={"median": 419854.01}, tpot_ms={"median": 451.88}, e2e_ms={"median": 462730.0})
    p = run_rule("running-request-cap", runs=[run], args={"max_running_requests": "64"})
    assert flag(p, "--max-running-requests").new == 512 and "ttft-queueing" in p.supporting


def test_running_cap_quiet_when_no_queue_and_scaling():
    assert run_rule("running-request-cap", runs=bench((32, 1000, 100), (64, 1900, 110), (128, 3600, 130)),
                    traces=[trace(cap=256, max_running=128, queued=0.0)]) is None


# ---------------------------------------------------------------- KB102


def test_cuda_graph_fires_on_eager_decode_batches():
    p = run_rule("cuda-graph-ceiling",
                 traces=[trace(cap=512, max_running=300, graph_false=40, max_graph_false=300, queued=0.0)],
                 runs=bench((128, 2000, 100), (256, 2100, 200), (512, 2150, 900)), args={"cuda_graph_max_bs": 160})
    change = flag(p, "--cuda-graph-max-bs")
    assert change.new >= 300 and change.new % 8 == 0 and change.current == 160


def test_cuda_graph_flag_name_follows_the_version():
    p = run_rule("cuda-graph-ceiling", version="0.5.23",
                 traces=[trace(cap=512, max_running=300, graph_false=40, max_graph_false=300)])
    assert p.changes[0].flag == "--cuda-graph-max-bs-decode"


def test_cuda_graph_gap_from_startup_facts_alone():
    tr = ServerTrace(engine="sglang", source="s.log", startup={"max_running_requests": 4096, "cuda_graph_max_bs": 32},
                     stats={"samples": 0})
    p = run_rule("cuda-graph-ceiling", traces=[tr])
    assert flag(p, "--cuda-graph-max-bs").new == 256 and p.severity == "low"


def test_cuda_graph_quiet_when_batches_fit():
    assert run_rule("cuda-graph-ceiling", traces=[trace(cap=128, max_running=64, queued=0.0, captured=256)],
                    runs=bench((32, 1000, 100), (64, 1900, 110))) is None


# ---------------------------------------------------------------- KB103


def test_kv_capacity_fires_on_retractions_and_offers_fp8_kv_on_hopper():
    retracts = [Event(kind="retract", where=Where(path="server.log", line=i),
                      text="KV cache pool is full. Retract requests.")
                for i in range(12)]
    p = run_rule("kv-cache-capacity", hw=H100, traces=[trace(usage=0.99, events=retracts)],
                 args={"mem_fraction_static": 0.85})
    assert flag(p, "--mem-fraction-static").new == 0.89
    assert flag(p, "--kv-cache-dtype").new == "fp8_e4m3"
    assert p.severity == "severe"


def test_kv_capacity_quiet_with_room():
    assert run_rule("kv-cache-capacity", hw=H100, traces=[trace(usage=0.5)]) is None


# ---------------------------------------------------------------- KB104


def test_scheduler_fires_when_queue_with_low_usage_below_cap():
    p = run_rule("scheduler-conservativeness", traces=[trace(cap=256, max_running=100, usage=0.3, queued=0.8)])
    assert flag(p, "--schedule-conservativeness").new == 0.3


def test_scheduler_quiet_when_memory_is_full():
    assert run_rule("scheduler-conservativeness",
                    traces=[trace(cap=256, max_running=250, usage=0.97, queued=0.8)]) is None


# ---------------------------------------------------------------- KB105


def test_moe_tuning_command_has_e_n_tp_and_destination():
    p = run_rule("moe-kernel-config", model=GLM5, hw=PRO6000, traces=[trace(events=[MOE_EVENT])],
                 runs=bench((128, 806, 2000), (256, 880, 9000)), args={"tp_size": 8})
    tune = next(c for c in p.commands if "tuning_fused_moe_triton.py" in c)
    argv = shlex.split(tune.split("  #")[0])
    assert argv[argv.index("--tp-size") + 1] == "8" and argv[argv.index("--model") + 1] == "org/model"
    assert "E=257,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition" in tune
    assert any(c.startswith("cp ") and "/x/configs/triton_3_4_0/" in c for c in p.commands)


def test_moe_shape_computed_from_config_without_warning():
    p = run_rule("moe-kernel-config", model=GLM5, hw=PRO6000, runs=bench((128, 806, 2000), (256, 880, 9000)),
                 args={"tp_size": 4})
    assert "E=257,N=512" in " ".join(p.commands)  # shared expert fused; 2048 / TP4


def test_moe_warning_is_a_red_herring_on_another_backend():
    p = run_rule("moe-kernel-config", model=GLM5, hw=PRO6000, traces=[trace(events=[MOE_EVENT])],
                 args={"moe_runner_backend": "flashinfer_cutlass"})
    assert p.severity == "low" and "red herring" in p.title and not p.commands


def test_moe_model_without_a_log_gets_a_low_reminder_to_check():
    p = run_rule("moe-kernel-config", model=GLM5, hw=H100, args={"tp_size": 8})
    assert p.severity == "low" and p.title.startswith("Check") and any("tuning_fused_moe_triton" in c
                                                                       for c in p.commands)


def test_moe_tuning_passes_ep_size():
    p = run_rule("moe-kernel-config", model=GLM5, hw=H100, traces=[trace(events=[MOE_EVENT])],
                 args={"tp_size": 8, "ep_size": 8})
    assert "--ep-size 8" in " ".join(p.commands)


def test_moe_reminder_ranks_below_a_symptom_backed_recommendation():
    from kb.recommend import recommend

    # a MoE model, no server log (KB105 can only remind), and a queue at a cap (KB101)
    run = BenchRun(tool="vllm-bench", concurrency=512, total_throughput=9959.18,
                   ttft_ms={"median": 419854.01}, tpot_ms={"median": 451.88}, e2e_ms={"median": 462730.0})
    ev = RunEvidence(engine="sglang", engine_version="0.5.8", bench=[run], model=ModelProfile(**GLM5),
                     hardware=Hardware(**H100), server_args={"tp_size": 8, "max_running_requests": 64},
                     model_path="org/model")
    recs = recommend(ev, detect(ev), "sglang", catalog("sglang", "0.5.8"), findings=[])
    classes = [r.fix_class for r in recs]
    assert classes.index("moe-kernel-config") > classes.index("max-running-requests")
    assert recs[-1].fix_class == "moe-kernel-config" and recs[-1].confidence == 0.2


def test_moe_reminder_is_not_raised_by_an_unrelated_symptom():
    p = run_rule("moe-kernel-config", model=GLM5, hw=H100, args={"tp_size": 8}, runs=bench(single=11))
    assert p.reminder and p.supporting == []


def test_moe_tuning_quiet_for_dense_model():
    assert run_rule("moe-kernel-config", model=LLAMA, hw=H100, runs=bench((128, 806, 2000), (256, 880, 9000))) is None


# ---------------------------------------------------------------- KB106


def test_blackwell_nvfp4_moe_gets_flashinfer_cutlass():
    p = run_rule("moe-runner-backend", model=GLM5, hw=PRO6000, runs=bench((128, 806, 2000), (256, 880, 9000)))
    assert flag(p, "--moe-runner-backend").new == "flashinfer_cutlass" and p.severity == "severe"


def test_moe_backend_quiet_on_hopper_or_when_set():
    assert run_rule("moe-runner-backend", model=GLM5, hw=H100) is None
    assert run_rule("moe-runner-backend", model=GLM5, hw=PRO6000,
                    args={"moe_runner_backend": "flashinfer_cutlass"}) is None


# ---------------------------------------------------------------- KB107


def test_dp_attention_for_mla_moe_under_kv_pressure():
    retracts = [Event(kind="retract", where=Where(path="s.log", line=1), text="Retract")]
    p = run_rule("dp-attention", model=GLM5, hw=H100, args={"tp_size": 8}, traces=[trace(usage=0.99, events=retracts)],
                 runs=bench((64, 2000, 100), (128, 2100, 300)))
    assert flag(p, "--enable-dp-attention").new is True and flag(p, "--dp-size").new == 8


def test_dp_attention_quiet_for_gqa_model():
    assert run_rule("dp-attention", model=LLAMA, hw=H100, args={"tp_size": 8},
                    runs=bench((64, 2000, 100), (128, 2100, 300))) is None


# ---------------------------------------------------------------- KB108


def test_pcie_tp8_becomes_tp4_pp2():
    p = run_rule("pcie-topology", model=GLM5, hw=PRO6000, args={"tp_size": 8})
    assert flag(p, "--tp-size").new == 4 and flag(p, "--pp-size").new == 2


def test_pcie_rule_quiet_on_nvlink():
    assert run_rule("pcie-topology", model=GLM5, hw=H100, args={"tp_size": 8}) is None


def test_pcie_rule_reports_under_pcie_topology_so_pcie_findings_are_cited():
    (rule,) = [r for r in RULES if r.name == "pcie-topology"]
    assert rule.fix_class == "pcie-topology"


def test_pcie_tp4_becomes_tp2_pp2():
    l40s = dict(gpu="L40S", arch="SM89", count=4, interconnect="PCIe")
    p = run_rule("pcie-topology", engine="vllm", version="0.11.0", model=LLAMA, hw=l40s,
                 args={"tensor_parallel_size": 4})
    assert flag(p, "--tensor-parallel-size").new == 2 and flag(p, "--pipeline-parallel-size").new == 2
    assert any("custom all-reduce" in n for n in p.notes)


def test_pcie_tp2_pair_through_the_cpu_moves_to_a_shared_switch():
    hw = dict(gpu="A100 PCIe", arch="SM80", count=4, interconnect="PCIe",
              links={"GPU0-GPU1": "SYS", "GPU0-GPU2": "SYS", "GPU0-GPU3": "SYS", "GPU1-GPU2": "SYS",
                     "GPU1-GPU3": "SYS", "GPU2-GPU3": "PIX"})
    p = run_rule("pcie-topology", engine="vllm", version="0.11.0", model=LLAMA, hw=hw, args={"tensor_parallel_size": 2})
    assert p.severity == "moderate" and not p.changes
    assert "nvidia-smi topo -m" in p.commands and any(c.startswith("CUDA_VISIBLE_DEVICES=2,3 ") for c in p.commands)


def test_pcie_tp2_unknown_link_is_a_low_check_and_same_switch_is_quiet():
    hw = dict(gpu="A100 PCIe", arch="SM80", count=2, interconnect="PCIe")
    p = run_rule("pcie-topology", engine="vllm", version="0.11.0", hw=hw, args={"tensor_parallel_size": 2})
    assert p.severity == "low" and p.commands[:2] == ["nvidia-smi topo -m", "nvidia-smi topo -p2p r"]
    hw["links"] = {"GPU0-GPU1": "PIX"}
    assert run_rule("pcie-topology", engine="vllm", version="0.11.0", hw=hw, args={"tensor_parallel_size": 2}) is None


# ---------------------------------------------------------------- KB109


def test_speculative_uses_mtp_layers_when_present():
    p = run_rule("speculative-decoding", model=GLM5, hw=PRO6000, runs=bench(single=11))
    assert flag(p, "--speculative-algorithm").new == "EAGLE"


def test_speculative_quiet_when_single_stream_is_fast():
    assert run_rule("speculative-decoding", model=GLM5, hw=H100, runs=bench(single=120)) is None


# ---------------------------------------------------------------- KB110


def test_eager_mode_flag_is_removed():
    p = run_rule("eager-mode", engine="vllm", version="0.11.0", args={"enforce_eager": True})
    assert p.changes[0].flag == "--enforce-eager" and p.changes[0].new is None


def test_eager_mode_quiet_by_default():
    assert run_rule("eager-mode") is None


def test_async_scheduling_only_where_the_version_defaults_it_off():
    assert run_rule("async-scheduling", engine="vllm", version="0.11.0").changes[0].flag == "--async-scheduling"
    assert run_rule("async-scheduling", engine="vllm", version="0.32.0") is None
    assert run_rule("async-scheduling", engine="vllm", version="0.11.0", args={"async_scheduling": True}) is None


# ---------------------------------------------------------------- KB112

LLAMA70 = dict(name="Llama-3.1-70B", family="llama", is_moe=False, attention="GQA", heads=64, kv_heads=8, head_dim=128,
               layers=80, hidden_size=8192, vocab_size=128256, params_b=70.6, context_len=131072, quantization="fp8")
LLAMA405 = dict(LLAMA70, name="Llama-3.1-405B", layers=126, heads=128, hidden_size=16384, params_b=405.9,
                quantization="bf16")
QWEN235 = dict(name="Qwen3-235B-A22B", family="qwen3-moe", is_moe=True, experts=128, experts_per_token=8,
               expert_intermediate_size=1536, attention="GQA", heads=64, kv_heads=4, head_dim=128, layers=94,
               hidden_size=4096, vocab_size=151936, params_b=235.1, context_len=40960, quantization="fp8")
H100_80 = dict(gpu="H100", arch="SM90", count=8, interconnect="NVLink", memory_gb=80)


def check_flags(p, engine, version):
    cat = catalog(engine, version)
    for c in p.changes:
        assert cat.check(c.flag) is None, c.flag
    for cmd in p.commands:
        for word in shlex.split(cmd):
            if word.startswith("--"):
                assert cat.check(word.split("=")[0]) is None, (word, cmd)


def test_replicas_for_70b_fp8_at_tp8_under_high_load_vllm():
    run = BenchRun(tool="vllm-bench", concurrency=256, total_throughput=9000, input_len=1000, output_len=500)
    p = run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=LLAMA70, hw=H100_80, runs=[run],
                 args={"tensor_parallel_size": 8})
    # 70.6B FP8 ≈ 68 GiB: TP2 leaves ~35 GiB KV per GPU = 230k tokens per replica, room for its 64 of 256 requests
    assert flag(p, "--tensor-parallel-size").new == 2 and flag(p, "--tensor-parallel-size").current == 8
    assert flag(p, "--data-parallel-size").new == 4 and p.severity == "moderate"
    check_flags(p, "vllm", "0.11.0")


def test_replicas_sglang_uses_dp_size_and_keeps_ep_inside_the_group():
    p = run_rule("data-parallel-replicas", version="0.5.23", model=LLAMA70, hw=H100_80,
                 args={"tp_size": 8, "ep_size": 8})
    assert flag(p, "--tp-size").new == 4 and flag(p, "--dp-size").new == 2 and flag(p, "--ep-size").new == 4
    assert p.severity == "low"  # no benchmark: context only
    check_flags(p, "sglang", "0.5.23")


def test_replicas_moe_on_vllm_are_separate_servers():
    run = BenchRun(tool="vllm-bench", peak_concurrency=1000, total_throughput=3740, input_len=217, output_len=197)
    hw = dict(gpu="A100", arch="SM80", count=8, interconnect="NVLink", memory_gb=80)
    p = run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=QWEN235, hw=hw, runs=[run],
                 args={"tensor_parallel_size": 8, "enable_expert_parallel": True})
    assert not p.changes  # not one command: N servers, so nothing goes into the combined command
    servers = [c for c in p.commands if c.startswith("CUDA_VISIBLE_DEVICES=")]
    assert [s.split()[0] for s in servers] == ["CUDA_VISIBLE_DEVICES=0,1,2,3", "CUDA_VISIBLE_DEVICES=4,5,6,7"]
    assert all("--tensor-parallel-size 4" in s for s in servers) and "--port 8001" in servers[1]
    check_flags(p, "vllm", "0.11.0")


def test_replicas_quiet_when_the_model_needs_every_gpu():
    run = BenchRun(tool="vllm-bench", concurrency=256, total_throughput=2000, input_len=1000, output_len=500)
    assert run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=LLAMA405, hw=H100_80, runs=[run],
                    args={"tensor_parallel_size": 8}) is None


def test_replicas_quiet_for_a_latency_benchmark_or_unknown_tp():
    single = BenchRun(tool="vllm-bench", concurrency=1, output_throughput=60, tpot_ms={"median": 16.0},
                      input_len=1000, output_len=500)
    assert run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=LLAMA70, hw=H100_80,
                    runs=[single], args={"tensor_parallel_size": 8}) is None
    assert run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=LLAMA70, hw=H100_80) is None
    assert run_rule("data-parallel-replicas", engine="vllm", version="0.11.0", model=LLAMA70, hw=H100_80,
                    args={"tensor_parallel_size": "${ENGINE_TP:?}"}) is None


def test_replicas_quiet_when_already_data_parallel_or_without_gpu_memory():
    assert run_rule("data-parallel-replicas", model=LLAMA70, hw=H100_80, args={"tp_size": 4, "dp_size": 2}) is None
    assert run_rule("data-parallel-replicas", model=LLAMA70, hw=dict(gpu="Mystery GPU", count=8, known=False),
                    args={"tp_size": 8}) is None


def test_every_rule_has_documented_headings_and_unique_id():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        for heading in ("What it flags:", "Why it matters:", "Evidence:", "Fix:"):
            assert heading in r.doc, (r.id, heading)


# ---------------------------------------------------------------- KB113, KB114 and the low-load signal


def test_low_load_signal_from_concurrency_peak_or_littles_law():
    from kb.signals import detect

    def sig(run):
        return {s.id: s for s in detect(RunEvidence(bench=[run]))}.get("low-load")

    assert sig(BenchRun(tool="vllm-bench", concurrency=4, total_throughput=100)).data["level"] == 4
    assert sig(BenchRun(tool="vllm-bench", peak_concurrency=6, total_throughput=100)) is not None
    # 0.5 req/s x 10 s mean latency = 5 in flight (Little's law)
    s = sig(BenchRun(tool="vllm-bench", request_throughput=0.5, e2e_ms={"mean": 10000}, total_throughput=100))
    assert s.data["level"] == 5 and "computed" in s.summary
    assert sig(BenchRun(tool="vllm-bench", concurrency=64, total_throughput=100)) is None
    assert sig(BenchRun(tool="vllm-bench", total_throughput=100)) is None  # load unknown: not judged


def test_dp_attention_off_at_low_load():
    runs = [BenchRun(tool="sglang-bench", concurrency=2, total_throughput=300)]
    p = run_rule("dp-attention-low-load", model=GLM5, hw=H100, args={"enable_dp_attention": True, "dp_size": 8},
                 runs=runs)
    assert {(c.flag, c.new) for c in p.changes} == {("--enable-dp-attention", None), ("--dp-size", None)}
    high = [BenchRun(tool="sglang-bench", concurrency=256, total_throughput=3000)]
    assert run_rule("dp-attention-low-load", model=GLM5, hw=H100, args={"enable_dp_attention": True}, runs=high) is None
    assert run_rule("dp-attention-low-load", model=GLM5, hw=H100, args={}, runs=runs) is None


def test_fp8_checkpoint_for_16_bit_weights_on_fp8_gpus():
    def fp8(path, model=None, hw=H100, args=None):
        ev = RunEvidence(engine="sglang", engine_version="0.5.8", model=ModelProfile(**model) if model else None,
                         hardware=Hardware(**hw), server_args=args or {}, model_path=path,
                         launch_argv=["python", "-m", "sglang.launch_server", "--model-path", path])
        ctx = RuleContext(ev=ev, signals={}, engine="sglang", catalog=catalog("sglang", "0.5.8"))
        return registry.run(registry.get("fp8-checkpoint"), ctx)

    p = fp8("Qwen/Qwen3-14B")
    assert p.severity == "low" and "--model-path Qwen/Qwen3-14B-FP8" in p.commands[0]
    assert fp8("Qwen/Qwen3-14B-FP8") is None  # already FP8
    assert fp8("Qwen/Qwen3-14B", hw=dict(gpu="A100", arch="SM80", count=1)) is None  # no FP8 tensor cores
    assert fp8("meta-llama/Llama-3.1-8B-Instruct") is None  # no known FP8 release by that publisher
    assert fp8("Qwen/Qwen3-14B", args={"quantization": "fp8"}) is None  # quantized online already
    assert fp8("zai-org/GLM-4.5-Air", model=dict(name="GLM-4.5-Air", quantization="fp8", is_moe=True)) is None
