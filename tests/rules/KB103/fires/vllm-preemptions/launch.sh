vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.90 --port 8000
