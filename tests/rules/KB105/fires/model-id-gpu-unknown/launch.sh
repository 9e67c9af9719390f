python3 -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 2 --port 30000
