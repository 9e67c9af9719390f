vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --random-input-len 1024 --random-output-len 128 \
  --ignore-eos --num-prompts 640 --max-concurrency 64 --num-warmups 128
