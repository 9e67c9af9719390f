vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --random-input-len 1024 --random-output-len 128 --num-prompts 50 --max-concurrency 64
