vllm serve Qwen/Qwen3-8B --max-num-seqs 64 --port 8000
