vllm serve zai-org/GLM-4.6 --tensor-parallel-size 8
