vllm serve Qwen/Qwen3-8B --enforce-eager --port 8000
