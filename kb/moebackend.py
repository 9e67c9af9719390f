"""Which MoE kernel backend suits a Blackwell GPU and a checkpoint's weight format.

Blackwell has native FP4 tensor cores that the FlashInfer MoE kernels use (CUTLASS on
SM120, TRT-LLM on SM100/SM103; MXFP4 has its own FlashInfer path); the generic Triton
path leaves them idle. `kb launch` sets the backend from this table and rule KB106
(moe-runner-backend) proposes it for a running server.
"""

from __future__ import annotations

from kb.records import Hardware, ModelProfile

BLACKWELL = ("SM100", "SM103", "SM120", "SM121")


def pick_backend(arch: str, quant: str | None) -> str | None:
    """The FlashInfer MoE backend for this architecture and weight format, or None."""
    if arch in ("SM120", "SM121"):
        return "flashinfer_cutlass" if quant == "nvfp4" else None
    if quant == "mxfp4":
        return "flashinfer_mxfp4"
    return "flashinfer_trtllm" if quant in ("nvfp4", "fp8") else None


def backend_for(m: ModelProfile, hw: Hardware) -> str | None:
    """The backend a MoE model on this hardware should run, or None (not MoE, not Blackwell)."""
    return pick_backend(hw.arch, m.quantization) if m.is_moe and hw.arch in BLACKWELL else None
