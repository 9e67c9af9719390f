vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4 --max-num-seqs 256
