python3 -m sglang.launch_server --model-path nvidia/GLM-5-NVFP4 --tp 8 --quantization modelopt_fp4 --host 0.0.0.0 --port 30000
