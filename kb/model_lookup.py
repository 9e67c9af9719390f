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

from pathlib import Path

from ingest.hf_config import hub_cache_dirs, is_repo_id, load_profile, locate_in_hub_cache
from kb.errors import InputError, NotFoundError
from kb.evidence import RunEvidence

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


def fill_model(ev: RunEvidence) -> None:
    """Give `ev` the named model's profile when it has none, and say where it came from
    on a Files entry (path "config.json"; its `model_config` key for --json). A damaged
    cached config is a warning, and kb's copy (if any) is used instead."""
    repo = ev.model_path
    if ev.model is not None or not repo:
        return
    for path, origin in candidates(repo):
        try:
            profile = load_profile(path)
        except (InputError, NotFoundError) as e:
            ev.warnings.append(f"config.json for {repo} in {ORIGIN_TEXT[origin]} not used: {e}")
            continue
        ev.model = m = profile.model_copy(update={"name": repo})
        shown = f"kb/data/model_configs/{path.name}" if origin == SHIPPED else str(path)
        shape = f"MoE {m.experts}×top-{m.experts_per_token}" if m.is_moe else "dense"
        ev.files.append({
            "path": "config.json", "kind": f"{repo} from {ORIGIN_TEXT[origin]}",
            "yielded": f"model config: {shape}, {m.quantization or 'quantization unstated'} ({shown})",
            "model_config": {"repo_id": repo, "from": origin, "file": str(path)},
        })
        return
