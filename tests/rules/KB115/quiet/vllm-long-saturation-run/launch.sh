vllm serve Qwen/Qwen3-8B --max-num-batched-tokens 8192
