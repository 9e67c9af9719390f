python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1 --max-running-requests 64 --cuda-graph-max-bs 128 --port 30000
