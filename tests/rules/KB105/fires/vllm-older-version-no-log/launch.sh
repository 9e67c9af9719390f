vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 4
