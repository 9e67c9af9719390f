"""The model's config.json when the evidence only names it: a launch command or log says
`vllm serve Qwen/Qwen3-30B-A3B` and no config.json was given, yet the MoE kernel-config,
data-parallel and FP8 rules and findings' `model:` conditions all need the model's shape.

Looked up by the exact repo id (case-insensitive), offline: first the local Hugging Face hub
cache (the user's own download), then kb's shipped copies of real configs of popular serving
models (kb/data/model_configs, sourced in SOURCES.md there). A quantized upload whose own
config is neither cached nor shipped gets nothing: its base model's config would state the
wrong quantization and weight size. A config the user gave (or one among the files) always wins.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.hf_config import hub_cache_dirs, is_repo_id, load_profile, locate_in_hub_cache
from kb.errors import InputError, NotFoundError
from kb.evidence import RunEvidence
from kb.vocab import quantization_in

SHIPPED_DIR = Path(__file__).parent / "data" / "model_configs"
HUB = "hub"
SHIPPED = "shipped"
ORIGIN_TEXT = {HUB: "the local hub cache", SHIPPED: "kb's shipped copy"}


def shipped_config(repo_id: str) -> Path | None:
    """kb's copy of `org/name`'s config.json, named `org--name_config.json`."""
    want = repo_id.replace("/", "--", 1).lower() + "_config.json"
    return next((p for p in sorted(SHIPPED_DIR.glob("*_config.json")) if p.name.lower() == want), None)


def _hub_config(repo_id: str) -> Path | None:
    """The hub cache keeps the id's own spelling (`models--Qwen--Qwen3-30B-A3B`): try it,
    then a cached repo whose id differs only in case."""
    found = locate_in_hub_cache(repo_id)
    if found:
        return found
    want = "models--" + repo_id.replace("/", "--", 1).lower()
    for cache in hub_cache_dirs():
        if not cache.is_dir():
            continue
        for d in cache.glob("models--*"):
            if d.name.lower() == want and d.name != want:
                cased = d.name[len("models--"):].replace("--", "/", 1)
                return locate_in_hub_cache(cased)
    return None


def candidates(repo_id: str) -> list[tuple[Path, str]]:
    """(config.json, HUB or SHIPPED) for an exact repo id, in order of precedence."""
    if not is_repo_id(repo_id):
        return []
    found = [(_hub_config(repo_id), HUB), (shipped_config(repo_id), SHIPPED)]
    return [(p, origin) for p, origin in found if p]


def find_config(repo_id: str) -> tuple[Path, str] | None:
    return next(iter(candidates(repo_id)), None)


# the weight format as the last part of a publisher's upload name (Qwen3-8B-FP8, -AWQ, -GPTQ-Int4)
QUANT_SUFFIX = re.compile(r"[-_](?:FP8(?:[-_](?:Dynamic|Static|Block))?|AWQ|GPTQ(?:[-_]Int[48])?|Int[48]|NVFP4|MXFP4|"
                          r"W4A16|W8A8)$", re.I)


def base_of(repo_id: str) -> tuple[str, str] | None:
    """(base repo id, quantization) of a publisher's quantized upload, by its name suffix."""
    m = QUANT_SUFFIX.search(repo_id) if is_repo_id(repo_id) else None
    quant = quantization_in(m.group(0).replace("_", "-").strip("-")) if m else None
    return (repo_id[:m.start()], quant) if m and quant else None


def fill_model(ev: RunEvidence) -> None:
    """Give `ev` the named model's profile when it has none, and say where it came from
    on a Files entry (path "config.json"; its `model_config` key for --json). A damaged
    cached config is a warning, and kb's copy (if any) is used instead."""
    repo = ev.model_path
    if ev.model is not None or not repo or not isinstance(repo, str):
        return
    found = [(p, o, None) for p, o in candidates(repo)]
    sibling = base_of(repo) if not found else None
    if sibling:
        found = [(p, o, sibling) for p, o in candidates(sibling[0])]
    for path, origin, base in found:
        try:
            profile = load_profile(path)
        except (InputError, NotFoundError) as e:
            ev.warnings.append(f"config.json for {base[0] if base else repo} in {ORIGIN_TEXT[origin]} not used: {e}")
            continue
        update = {"name": repo}
        if base and profile.quantization in (None, "bf16", "fp16"):
            update.update(quantization=base[1], quant_details={},
                          source=f"{base[0]}'s config.json; weights as {base[1]} by the name {repo}")
        ev.model = m = profile.model_copy(update=update)
        shown = f"kb/data/model_configs/{path.name}" if origin == SHIPPED else str(path)
        shape = f"MoE {m.experts}×top-{m.experts_per_token}" if m.is_moe else "dense"
        kind = f"{repo} from {ORIGIN_TEXT[origin]}" if not base else \
            f"{repo}: the shape of {base[0]} from {ORIGIN_TEXT[origin]}, {m.quantization} weights by its name"
        ev.files.append({
            "path": "config.json", "kind": kind,
            "yielded": f"model config: {shape}, {m.quantization or 'quantization unstated'} ({shown})",
            "model_config": {"repo_id": base[0] if base else repo, "from": origin, "file": str(path)},
        })
        return
