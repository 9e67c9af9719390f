python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1 --max-running-requests 256 --cuda-graph-max-bs 32 --port 30000
