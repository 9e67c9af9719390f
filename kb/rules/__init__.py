"""Rules: one module per rule, registered in one explicit table (`RULES`)."""

from kb.rules import (
    async_scheduling,
    cuda_graph_ceiling,
    data_parallel_replicas,
    dp_attention,
    dp_attention_low_load,
    eager_mode,
    fp8_checkpoint,
    kv_cache_capacity,
    moe_kernel_config,
    moe_runner_backend,
    pcie_topology,
    running_request_cap,
    scheduler_policy,
    speculative_decoding,
)

RULES = [
    running_request_cap.RULE,
    cuda_graph_ceiling.RULE,
    kv_cache_capacity.RULE,
    scheduler_policy.RULE,
    moe_kernel_config.RULE,
    moe_runner_backend.RULE,
    dp_attention.RULE,
    pcie_topology.RULE,
    speculative_decoding.RULE,
    eager_mode.RULE,
    async_scheduling.RULE,
    data_parallel_replicas.RULE,
    dp_attention_low_load.RULE,
    fp8_checkpoint.RULE,
]
