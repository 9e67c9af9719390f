docker run --gpus all --shm-size 32g -p 30000:30000 --entrypoint python3 lmsysorg/sglang:v0.5.4-cu129 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0 --port 30000
