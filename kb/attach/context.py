"""A finding's context and provenance from the runs: engine, model, GPU (named as
findings name it), the server arguments that changed, and the files it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from kb.evidence import RunEvidence
from kb.hardware import lookup_gpu
from kb.records import BenchRun, Context, Source
from kb.redact import redact

# Server arguments that differ between runs without being a setting anyone tuned.
NOT_SETTINGS = {"bench", "random_seed", "port", "host", "nccl_port", "dist_init_addr", "status",
                "max_total_num_tokens", "version"}


def _first(evs: list[RunEvidence], get: Callable[[RunEvidence], object]):
    return next((v for ev in evs if (v := get(ev)) is not None), None)


def context(evs: list[RunEvidence]) -> tuple[Context, list[str]]:
    """The finding's context from the runs (after side first) and what is missing."""
    model, hw = _first(evs, lambda e: e.model), _first(evs, lambda e: e.hardware)
    name = (model.name if model else None) or _first(evs, lambda e: e.model_path)
    ctx = Context(engine=_first(evs, lambda e: e.engine), engine_version=_first(evs, lambda e: e.engine_version),
                  model=str(name).rstrip("/").rsplit("/", 1)[-1] if name else None)
    if hw:
        spec = lookup_gpu(hw.gpu)  # "NVIDIA H100 NVL" as nvidia-smi says it → "H100 NVL" as findings name it
        ctx = ctx.model_copy(update={"gpu": spec.name if spec else hw.gpu, "gpu_arch": hw.arch, "gpu_count": hw.count,
                                     "interconnect": hw.interconnect})
    if model:
        ctx = ctx.model_copy(update={"model_family": model.family, "experts": model.experts,
                                     "experts_per_token": model.experts_per_token,
                                     "expert_intermediate_size": model.expert_intermediate_size,
                                     "quantization": model.quantization,
                                     "params_b": round(model.params_b, 2) if model.params_b else None})
    missing = []
    if not ctx.engine:
        missing.append("engine unknown: give the engine")
    if not hw:
        missing.append("GPU unknown: give the gpu (or put nvidia-smi output in the run directory)")
    if not model:
        missing.append("model config unknown (family, experts, quantization): give the config")
    return ctx, missing


def _flag_value(v) -> str:
    if v is None:
        return "(unset)"
    if isinstance(v, bool):
        return "on" if v else "off"
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def changed_args(before: RunEvidence, after: RunEvidence) -> list[str]:
    """`--flag old → new` for every server argument that differs (credentials hidden)."""
    if not before.server_args or not after.server_args:
        return []
    out = []
    for key in sorted((set(before.server_args) | set(after.server_args)) - NOT_SETTINGS):
        old, new = (redact(key, ev.server_args.get(key)) for ev in (before, after))
        if old != new:
            out.append(f"`--{key.replace('_', '-')} {_flag_value(old)} → {_flag_value(new)}`")
    if before.engine_version and after.engine_version and before.engine_version != after.engine_version:
        out.append(f"{after.engine or 'engine'} {before.engine_version} → {after.engine_version}")
    return out


def sources(evs: list[RunEvidence], used: list[BenchRun]) -> list[Source]:
    """The runs compared, with their line ranges, then the other files that gave context."""
    lines: dict[str, list[int]] = {}
    for r in used:
        if r.source:
            lines.setdefault(str(Path(r.source.path).resolve()), []).extend([r.source.line] if r.source.line else [])
    out = []
    for path, nums in lines.items():
        ranges = [Source(path=path, line_start=s, line_end=e) for s, e in _ranges(sorted(set(nums)))]
        out += ranges or [Source(path=path)]
    for ev in evs:
        for f in ev.files:
            p = str(Path(f["path"]).resolve())
            if "kind" in f and p not in lines and Source(path=p) not in out:
                out.append(Source(path=p))
    return out


def _ranges(nums: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(s, e) for s, e in out]
