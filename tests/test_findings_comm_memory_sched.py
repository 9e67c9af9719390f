"""The communication, host-environment, memory-budget and scheduling findings
(findings/comm-memory-scheduling-2026.md) reach thin evidence (issue 13): one pasted error
line, a paragraph in a user's words (written here, not the finding's symptom sentence) or a
launch command makes `kb diagnose` rank the finding's fix in its top 3. The quiet side:
healthy logs and plain launches propose none of them, and a launch that already carries the
fix does not get it proposed again."""

from __future__ import annotations

import pytest
from thin_evidence import (
    LAUNCH,
    LOG,
    NOTES,
    assert_in_top_3,
    diagnose_files as _diagnose,
    position as _position,
)

PREFIXES = ("car26-", "nccl26-", "mn26-", "dr26-", "mf26-", "sched26-", "ovl26-", "cp26-")



def _ours(dx) -> list[str]:
    return [r.rule for r in dx.recommendations if r.rule.removeprefix("finding ").startswith(PREFIXES)]


# (finding id, evidence files, GPUs, engine): what someone would post, nothing more
CASES = [
    ("car26-vllm-expandable-segments-custom-ar",
     {LOG: "(EngineCore_DP0 pid=212) INFO 06-18 10:01:02 [monitor.py:34] torch.compile takes 41.2 s in total\n"
           "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'\n"
           "(EngineCore_DP0 pid=212) ERROR 06-18 10:01:09 [multiproc_executor.py:154] Worker proc VllmWorker-1 "
           "died unexpectedly, shutting down executor.\n"}, None, "vllm"),
    ("car26-vllm-graph-buffer-count-mismatch",
     {NOTES: "Our Kimi deployment at TP8 on vLLM crashes maybe one start in three while it captures CUDA graphs, "
             "always right at capture_end, sometimes as an out-of-memory and sometimes as an illegal memory access. "
             "With debug logging on, rank 0 and rank 5 print different numbers of cuda graph addresses when they "
             "register.\n"}, None, "vllm"),
    ("car26-sglang-register-graph-buffers-invalid-argument",
     {NOTES: "sglang dies while capturing cuda graphs on our 8xH100 box. The traceback ends in custom_all_reduce.py, "
             "register_graph_buffers, with RuntimeError: invalid argument. I already dropped mem-fraction-static to "
             "0.7 and it makes no difference.\n"}, None, "sglang"),
    ("car26-vllm-symm-mem-subset-hang",
     {NOTES: "On our 8x B200 server I give vLLM only two cards with CUDA_VISIBLE_DEVICES=0,1 and TP 2. It never "
             "finishes loading. py-spy says both workers are sitting in symmetric_memory.rendezvous. The same "
             "command is fine on a 4-GPU box.\n"}, None, "vllm"),
    ("nccl26-container-shm-too-small",
     {LOG: "node-3:412:530 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n"
           "node-3:412:530 [1] misc/shmutils.cc:72 NCCL WARN Error while creating shared memory segment "
           "/dev/shm/nccl-Qx3vB1 (size 9637888), error: No space left on device (28)\n"
           "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
           "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"}, None, None),
    ("nccl26-cumem-enable-mismatch-weight-sync",
     {NOTES: "In our GRPO trainer the rollout engine is a separate vLLM process. Generation works, but the first "
             "weight sync from the FSDP workers to vLLM over NCCL errors out. We never touched NCCL_CUMEM_ENABLE "
             "ourselves.\n"}, None, "vllm"),
    ("mn26-sglang-gloo-socket-ifname",
     {LOG: "[2025-11-02 18:11:28 TP8] Init torch distributed begin.\n"
           "[rank10]:[E1102 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
           "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
           "[2025-11-02 18:11:34 TP10] Scheduler hit an exception: Traceback (most recent call last):\n"},
     None, "sglang"),
    ("mn26-vllm-mp-multinode-without-ray",
     {NOTES: "We want to serve Llama 405B over two 8-GPU machines with vLLM, TP 8 and PP 2. Setting up a ray "
             "cluster in our Kubernetes environment keeps failing and I would rather run it without Ray at all. "
             "Is there another way to start the second node?\n"}, None, "vllm"),
    ("dr26-vllm-image-cuda-compat-803",
     {LOG: "(EngineCore_DP0 pid=406) ERROR 01-30 13:26:29 [core.py:946] RuntimeError: Unexpected error from "
           "cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have "
           "already set an error? Error 803: system has unsupported display driver / cuda driver combination\n"},
     None, "vllm"),
    ("dr26-driver-too-old-for-wheel",
     {LOG: "(EngineCore pid=546) ERROR 08-12 03:12:29 [core.py:1202] RuntimeError: The NVIDIA driver on your system "
           "is too old (found version 12080). Please update your GPU driver by downloading and installing a new "
           "version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
           "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA "
           "driver.\n"}, None, "vllm"),
    ("mf26-vllm-startup-free-memory-check",
     {LOG: "(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:0 (38.20/79.19 GiB) on startup is less "
           "than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU "
           "memory used by other processes.\n"}, None, "vllm"),
    ("mf26-vllm-no-memory-for-kv-blocks",
     {LOG: "ERROR 04-30 10:20:36 [core.py:396] EngineCore failed to start.\n"
           "ERROR 04-30 10:20:36 [core.py:396] ValueError: No available memory for the cache blocks. Try increasing "
           "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation "
           "on the CPU backend, despite its name).\n"}, None, "vllm"),
    ("mf26-vllm-cudagraph-memory-estimate-kv",
     {NOTES: "Since we moved from vLLM 0.19 to 0.24 the KV cache on the same two GPUs holds about a third of the "
             "tokens it used to, and max concurrency in the startup log fell accordingly, although "
             "--gpu-memory-utilization is still 0.9. Someone mentioned the new CUDA graph memory profiling.\n"},
     None, "vllm"),
    ("mf26-sglang-not-enough-memory-raise-fraction",
     {LOG: "[2025-03-12 09:14:02 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.float16, avail mem=6.10 GB, "
           "mem usage=39.20 GB.\n"
           "[2025-03-12 09:14:03 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
           "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
           "mem_fraction_static=0.84\n"}, None, "sglang"),
    ("mf26-sglang-cuda-graph-capture-oom",
     {LOG: "[2025-04-10 08:01:12 TP7] Capture cuda graph begin. This can take up to several minutes. "
           "avail mem=3.10 GB\n"
           "[2025-04-10 08:01:40 TP7] Scheduler hit an exception: Traceback (most recent call last):\n"
           "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total "
           "capacity of 95.00 GiB\n"}, None, "sglang"),
    ("sched26-sglang-lpm-cold-request-starvation",
     {NOTES: "Our agents hit the radix cache almost every time and p50 TTFT is under a second, but a small set of "
             "cold requests that miss the cache sit in the queue for half a minute or more before they get their "
             "first token.\n",
      LAUNCH: "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2 --schedule-policy lpm\n"},
     None, None),
    ("sched26-vllm-priority-field-ignored",
     {NOTES: "We tag interactive chat calls with priority 0 and the nightly batch with priority 10 in extra_body, "
             "but on vLLM the chat calls still queue behind the batch. As far as we can tell the priority is "
             "ignored completely.\n"}, None, "vllm"),
    ("sched26-sglang-priority-scheduling-off",
     {NOTES: "We moved our gateway from vLLM to sglang and now the priority field in requests does nothing: the "
             "interactive calls we mark as priority 0 still wait behind the batch jobs marked 10.\n"}, None, "sglang"),
    ("ovl26-vllm-ngram-async-off",
     {LOG: "INFO 11-20 10:00:01 [config.py:100] Resolved architecture: Qwen3ForCausalLM\n"
           "WARNING 11-20 10:00:02 [vllm.py:1606] Async scheduling not supported with ngram-based speculative "
           "decoding and will be disabled.\n"}, None, "vllm"),
    ("dr26-vllm-failed-to-infer-device-type",
     {LOG: "INFO 05-14 04:44:35 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n"
           "INFO 05-14 04:44:37 [api_server.py:1034] vLLM API server version 0.8.4\n"
           "RuntimeError: Failed to infer device type\n"}, None, "vllm"),
    ("sched26-sglang-hrrn-prefill-queue",
     {NOTES: "Our sglang prefill node gets a mix of chat turns of a few hundred tokens and document requests of 60k "
             "tokens. Mean TTFT at concurrency 100 is above 20 seconds, and most of it is the short turns queueing "
             "behind the big documents. We use the default fcfs policy.\n"}, None, "sglang"),
    ("cp26-sglang-mixed-chunk-decode-stall",
     {NOTES: "On sglang, every time a new user joins with a long prompt, the text streams of everyone else freeze "
             "for a moment until that prompt is done. The profile shows long runs of steps that only prefill while "
             "dozens of requests are ready to decode.\n"}, None, "sglang"),
]


def test_every_finding_of_the_file_has_a_case(shipped):
    ids = {f.id for f in shipped[0] if f.id.startswith(PREFIXES)}
    assert ids == {c[0] for c in CASES}


@pytest.mark.parametrize("finding_id,files,gpu,engine", CASES, ids=[c[0] for c in CASES])
def test_thin_evidence_ranks_the_findings_fix_in_the_top_3(shipped, tmp_path, finding_id, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert_in_top_3(dx, finding_id)


# healthy evidence of each kind these findings read: none of them may fire
QUIET = [
    ({LAUNCH: "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192\n"},
     "4x H100", None),
    ({LAUNCH: "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp-size 4 "
              "--context-length 8192\n"}, "4x H100", None),
    # a healthy vLLM start-up: the CUDA graph profiling line and the graph-address registration are routine
    ({LOG: "(EngineCore_DP0 pid=367) INFO 08-14 14:07:20 [gpu_worker.py:563] Available KV cache memory: 6.87 GiB\n"
           "(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:578] CUDA graph memory profiling is enabled "
           "(default since v0.21.0). The current --gpu-memory-utilization=0.8200 is equivalent to "
           "--gpu-memory-utilization=0.8048 without CUDA graph memory profiling. To maintain the same effective KV "
           "cache size as before, increase --gpu-memory-utilization to 0.8352. To disable, set "
           "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.\n"
           "(Worker_TP0 pid=1440) INFO 06-22 11:18:30 [custom_all_reduce.py:211] Registering 0 cuda graph addresses\n"
           "(APIServer pid=1) INFO 08-14 14:07:40 [api_server.py:1900] Starting vLLM API server 0 on "
           "http://0.0.0.0:8000\n"}, None, "vllm"),
    # a healthy sglang start-up log
    ({LOG: "[2025-11-02 18:11:28 TP0] Init torch distributed begin.\n"
           "[2025-11-02 18:11:30 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, "
           "avail mem=50.10 GB, "
           "mem usage=16.20 GB.\n"
           "[2025-11-02 18:11:40 TP0] Capture cuda graph end. Time elapsed: 21.30 s. mem usage=1.20 GB. "
           "avail mem=10.40 GB.\n"
           "[2025-11-02 18:11:42] The server is fired up and ready to roll!\n"}, None, "sglang"),
    ({NOTES: "Throughput on our 70B deployment looks as expected after the upgrade; latency percentiles are flat "
             "across the day and the queue never builds up.\n"}, None, None),
]


@pytest.mark.parametrize("files,gpu,engine", QUIET, ids=[f"quiet-{i}" for i in range(len(QUIET))])
def test_healthy_evidence_proposes_none_of_these_findings(shipped, tmp_path, files, gpu, engine):
    dx = _diagnose(shipped, tmp_path, files, gpu=gpu, engine=engine)
    assert not _ours(dx), _ours(dx)


# the same evidence with the fix already in the launch: the finding that proposed it is gone
FIXED = [
    ("sched26-sglang-lpm-cold-request-starvation",
     "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2 --schedule-policy fcfs\n"),
    ("sched26-vllm-priority-field-ignored", "vllm serve Qwen/Qwen3-8B --scheduling-policy priority\n"),
    ("sched26-sglang-priority-scheduling-off",
     "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --enable-priority-scheduling\n"),
    ("cp26-sglang-mixed-chunk-decode-stall",
     "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2 --enable-mixed-chunk\n"),
    ("sched26-sglang-hrrn-prefill-queue",
     "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp-size 2 --schedule-policy hrrn\n"),
    ("car26-vllm-expandable-segments-custom-ar",
     "vllm serve Qwen/Qwen3-32B-AWQ --tensor-parallel-size 2 --disable-custom-all-reduce\n"),
    ("car26-sglang-register-graph-buffers-invalid-argument",
     "python -m sglang.launch_server --model-path meta-llama/Llama-4-Scout-17B-16E-Instruct --tp-size 8 "
     "--disable-custom-all-reduce\n"),
    ("car26-vllm-graph-buffer-count-mismatch",
     "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --trust-remote-code --disable-custom-all-reduce\n"),
]


@pytest.mark.parametrize("finding_id,launch", FIXED, ids=[c[0] for c in FIXED])
def test_a_launch_with_the_fix_applied_is_not_told_to_apply_it(shipped, tmp_path, finding_id, launch):
    _, files, gpu, engine = next(c for c in CASES if c[0] == finding_id)
    evidence = {name: text for name, text in files.items() if name != LAUNCH}
    dx = _diagnose(shipped, tmp_path, {**evidence, LAUNCH: launch}, gpu=gpu, engine=engine)
    assert _position(dx, finding_id) is None, (finding_id, [r.rule for r in dx.recommendations])
