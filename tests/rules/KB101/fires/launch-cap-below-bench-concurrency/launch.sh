vllm serve Qwen/Qwen3-30B-A3B --max-num-seqs 64
