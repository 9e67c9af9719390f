python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B --tp 1 --host 0.0.0.0 --port 30000
