vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --async-scheduling --port 8000
