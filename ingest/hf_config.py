"""A Hugging Face checkpoint's `config.json` (plus `hf_quant_config.json` beside it)
→ ModelProfile.

Works offline only: a repo id is looked up in the local hub cache, never fetched.
Dense and MoE models, multimodal wrappers (the language model under `text_config`),
and the quantization schemes serving engines care about are recognised.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ingest.hf_quant import CONFIG, GPTQ_CONFIG, NESTED, QUANT_CONFIG, detect_quantization
from kb.errors import InputError, NotFoundError
from kb.records import ModelProfile
from kb.textfile import read_text

FIND_DEPTH = 3  # how deep a directory is searched for a flat config.json

# The same fact under the names different model families use, first match wins.
EXPERTS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
TOP_K = ("num_experts_per_tok", "moe_topk", "experts_per_token", "num_experts_per_token")
MTP = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")
# Families whose MLP is a plain up/down projection rather than gated (SwiGLU/GeGLU).
UNGATED = {"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "opt", "bloom", "falcon", "phi", "starcoder2", "mpt"}
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
# Settings the arithmetic reads as whole numbers, with the largest value taken as real
# (a layer count is iterated over, so it is held to far less than a width).
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
SIZE_KEYS = ("hidden_size", "d_model", "num_attention_heads", "n_head", "num_key_value_heads", "head_dim",
             "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank", "q_lora_rank",
             "intermediate_size", "intermediate_size_mlp", "ffn_dim", "moe_intermediate_size",
             "shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts", "vocab_size",
             "max_position_embeddings", "n_positions", "seq_length", "first_k_dense_replace",
             "decoder_sparse_step", "interleave_moe_layer_step", *EXPERTS, *TOP_K, *MTP)
MAX_LAYERS = 100_000
MAX_SIZE = 2**40


# ------------------------------------------------------------------ locating


def hub_cache_dirs() -> list[Path]:
    """The hub caches to search, in huggingface_hub's order of precedence. Read at
    call time (not import time) so HF_HUB_CACHE / HF_HOME set later still count."""
    from huggingface_hub import constants

    dirs = [os.environ.get("HF_HUB_CACHE"), os.environ.get("HUGGINGFACE_HUB_CACHE")]
    if os.environ.get("HF_HOME"):
        dirs.append(os.path.join(os.environ["HF_HOME"], "hub"))
    dirs += [constants.HF_HUB_CACHE, os.path.expanduser("~/.cache/huggingface/hub")]
    out: list[Path] = []
    for d in dirs:
        if d and Path(d).expanduser() not in out:
            out.append(Path(d).expanduser())
    return out


def locate_config(spec: str | Path) -> Path:
    """config.json for a path to the file, a model directory (flat or hub-cache
    layout, searched a few levels down) or a repo id `org/name` in the local hub
    cache. NotFoundError lists every place looked."""
    p = Path(spec).expanduser()
    looked: list[str] = []
    if p.is_file():
        return p
    if p.is_dir():
        found = _in_dir(p, looked)
        if found:
            return found
    elif p.exists():
        looked.append(f"{p} (not a regular file: a FIFO, device or socket is never read)")
    else:
        looked.append(f"{p} (no such file or directory)")
    if _REPO_ID.match(str(spec)):
        found = _in_hub_cache(str(spec), looked)
        if found:
            return found
    raise NotFoundError(f"no {CONFIG} for {spec!r}; looked in: " + "; ".join(looked))


def _in_dir(d: Path, looked: list[str]) -> Path | None:
    if (d / CONFIG).is_file():
        return d / CONFIG
    looked.append(str(d / CONFIG))
    if d.name.startswith("models--"):  # a hub-cache repo folder
        repo_id = d.name[len("models--"):].replace("--", "/", 1)
        found = _cached(repo_id, d.parent, looked)
        if found:
            return found
    found = _find_below(d, looked)
    return found


def is_repo_id(spec: str) -> bool:
    """`org/name`, the form a Hugging Face repo id takes."""
    return bool(_REPO_ID.match(spec))


def locate_in_hub_cache(repo_id: str) -> Path | None:
    """config.json of a repo id in the local hub cache only (no local path, never fetched)."""
    return _in_hub_cache(repo_id, []) if is_repo_id(repo_id) else None


def _in_hub_cache(repo_id: str, looked: list[str]) -> Path | None:
    for cache in hub_cache_dirs():
        found = _cached(repo_id, cache, looked)
        if found:
            return found
    return None


def _cached(repo_id: str, cache: Path, looked: list[str]) -> Path | None:
    """The snapshot refs/main points at; else the newest snapshot holding a config."""
    from huggingface_hub import try_to_load_from_cache

    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    looked.append(f"hub cache {repo_dir} (refs/main)")
    try:
        hit = try_to_load_from_cache(repo_id, CONFIG, cache_dir=cache)
    except ValueError:  # huggingface_hub rejects ids such as "a--b/c" (HFValidationError)
        hit = None
    if isinstance(hit, str):
        return Path(hit)
    snapshots = sorted(repo_dir.glob(f"snapshots/*/{CONFIG}"), key=lambda q: q.stat().st_mtime, reverse=True)
    if snapshots:
        return snapshots[0]
    looked.append(f"{repo_dir}/snapshots/*/{CONFIG}")
    return None


def _find_below(d: Path, looked: list[str]) -> Path | None:
    """A flat layout one to FIND_DEPTH levels down; refuse to guess among several."""
    found: list[Path] = []
    for root, dirs, files in os.walk(d):
        depth = len(Path(root).relative_to(d).parts)
        dirs[:] = [x for x in dirs if not x.startswith(".")] if depth < FIND_DEPTH else []
        if CONFIG in files and Path(root) != d:
            found.append(Path(root) / CONFIG)
    looked.append(f"{d}/**/{CONFIG} (up to {FIND_DEPTH} levels)")
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        names = ", ".join(str(f) for f in sorted(found)[:5])
        raise NotFoundError(f"several {CONFIG} files below {d} ({names}); name the model directory")
    return None


# ------------------------------------------------------------------- reading


def load_profile(spec: str | Path) -> ModelProfile:
    """Locate, read and interpret a checkpoint's configuration."""
    path = locate_config(spec)
    name = str(spec) if _REPO_ID.match(str(spec)) and not Path(spec).exists() else _name_from_path(path)
    return profile_from_config(_read_json(path), quant=read_quant_beside(path), source=str(path), name=name)


def read_quant_beside(config: Path) -> dict | None:
    """hf_quant_config.json (or an old GPTQ quantize_config.json) beside config.json,
    with `_file` naming which; for renamed copies such as `org--name_config.json`
    also `org--name_hf_quant_config.json`."""
    stem = config.name[: -len(CONFIG)] if config.name.endswith(CONFIG) else ""
    paths = [config.with_name(stem + QUANT_CONFIG)] if stem else []
    for q in paths + [config.with_name(QUANT_CONFIG), config.with_name(GPTQ_CONFIG)]:
        if q.is_file():
            return {**_read_json(q), "_file": q.name}
    return None


def _read_json(path: Path) -> dict:
    text = read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", line=e.lineno) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply to be a config") from None
    except ValueError as e:  # an integer of more than 4300 digits
        raise InputError(path, f"not valid JSON ({str(e)[:80]})") from None
    if not isinstance(doc, dict):
        raise InputError(path, "expected a JSON object")
    return doc


def _name_from_path(path: Path) -> str:
    for part in reversed(path.parts):
        if part.startswith("models--"):
            return part[len("models--"):].replace("--", "/", 1)
    if path.name == CONFIG:
        return path.parent.name
    return re.sub(r"[._-]?config\.json$", "", path.name) or path.stem


# ------------------------------------------------------------- interpreting


def text_config(cfg: dict) -> dict:
    """The language model's settings: a multimodal wrapper's `text_config` (or
    `llm_config`/`language_config`) over the outer keys it does not repeat."""
    for key in NESTED:
        inner = cfg.get(key)
        if isinstance(inner, dict) and inner:
            outer = {k: v for k, v in cfg.items() if not k.endswith("_config")}
            return {**outer, **inner}
    return cfg


def _first(t: dict, names: tuple[str, ...]) -> Any:
    for n in names:
        if t.get(n) not in (None, 0, []):
            return t[n]
    return None


def check_fields(cfg: Any, where: str) -> None:
    """InputError naming the field when a setting kb computes with has the wrong type
    or an impossible size (a hand-edited or damaged config.json)."""
    if not isinstance(cfg, dict):
        raise InputError(where, "expected a JSON object")
    t = text_config(cfg)
    for key in (*LAYER_KEYS, *SIZE_KEYS):
        v = t.get(key)
        if v is None:
            continue
        top = MAX_LAYERS if key in LAYER_KEYS else MAX_SIZE
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= top:
            raise InputError(where, f"field {key!r}: expected a whole number from 0 to {top:,}, got {_show(v)}")
    layers = t.get("mlp_only_layers")
    if layers is not None and not (isinstance(layers, list) and all(type(x) is int for x in layers)):
        raise InputError(where, f"field 'mlp_only_layers': expected a list of layer numbers, got {_show(layers)}")
    freq = t.get("moe_layer_freq")
    if freq is not None and (isinstance(freq, bool) or not isinstance(freq, (int, list))):
        raise InputError(where, f"field 'moe_layer_freq': expected a number or a list, got {_show(freq)}")


def _show(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def profile_from_config(cfg: dict, quant: dict | None = None, source: str | None = None,
                        name: str | None = None) -> ModelProfile:
    """A ModelProfile from a decoded config.json; InputError (naming `source`) for a
    config whose settings have the wrong types."""
    where = source or CONFIG
    check_fields(cfg, where)
    t = text_config(cfg)
    model_type = str(cfg.get("model_type") or t.get("model_type") or "") or None
    inner_type = str(t.get("model_type") or model_type or "")
    heads = t.get("num_attention_heads") or t.get("n_head")
    kv_heads = t.get("num_key_value_heads") or (1 if t.get("multi_query") else heads)
    hidden = t.get("hidden_size") or t.get("d_model")
    layers = t.get("num_hidden_layers") or t.get("n_layer") or t.get("num_layers")
    experts = _first(t, EXPERTS)
    moe = bool(experts and experts > 1)
    shape = _moe_shape(t, inner_type) if moe else {}
    mla = bool(t.get("kv_lora_rank"))
    # MLA: the query/key head is nope + rope wide (GLM-5's `head_dim` names the rope part only)
    head_dim = ((t.get("qk_nope_head_dim") or 0) + (t.get("qk_rope_head_dim") or 0) if mla else 0) \
        or t.get("head_dim") or (hidden // heads if hidden and heads else None)
    total, active = estimate_params(t)
    groups = param_groups(t)
    dtype = str(t.get("torch_dtype") or t.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype") or "") or None
    quantization, details = detect_quantization(cfg, quant, dtype)
    archs = cfg.get("architectures") or t.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    path_name = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else None
    try:
        return ModelProfile(
            name=name or path_name or None, architecture=arch, model_type=model_type,
            family=_family(model_type or inner_type), is_moe=moe,
            experts=experts if moe else None, experts_per_token=_first(t, TOP_K) if moe else None,
            expert_intermediate_size=shape.get("expert_inter"), shared_experts=shape.get("shared"),
            dense_layers=shape.get("dense_layers"),
            attention="MLA" if mla else _attention(heads, kv_heads),
            layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, hidden_size=hidden,
            intermediate_size=t.get("intermediate_size_mlp") or t.get("intermediate_size") or t.get("ffn_dim"),
            vocab_size=t.get("vocab_size"), context_len=context_length(t),
            kv_lora_rank=t.get("kv_lora_rank"), qk_rope_head_dim=t.get("qk_rope_head_dim"),
            qk_nope_head_dim=t.get("qk_nope_head_dim"), v_head_dim=t.get("v_head_dim"),
            mtp_layers=int(_first(t, MTP) or 0), quantization=quantization, quant_details=details,
            dtype=dtype, params_b=total, active_params_b=active,
            param_groups_b={k: round(v / 1e9, 4) for k, v in groups.items()}, source=source)
    except ValidationError as e:  # a value of a type no check above foresaw: still name the file
        err = e.errors()[0]
        raise InputError(where, f"field {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def _attention(heads: int | None, kv_heads: int | None) -> str | None:
    if not heads:
        return None
    if kv_heads == 1:
        return "MQA"
    return "GQA" if kv_heads and kv_heads < heads else "MHA"


def _family(model_type: str) -> str | None:
    """`deepseek_v3` → deepseek, `kimi_k2` → kimi, `glm4_moe` → glm, `gpt_oss` → gpt-oss."""
    if model_type.startswith("gpt_oss"):
        return "gpt-oss"
    m = re.match(r"[a-z]+", model_type.lower())
    return m.group(0) if m else None


def context_length(t: dict) -> int | None:
    """max_position_embeddings, or more when YaRN-style rope scaling stretches the
    original window further (Qwen ships `factor: 4` over a 32k base)."""
    n = t.get("max_position_embeddings") or t.get("n_positions") or t.get("seq_length")
    rope = t.get("rope_scaling") or t.get("rope_parameters") or {}
    if isinstance(rope, dict):
        factor, base = rope.get("factor"), rope.get("original_max_position_embeddings")
        if _positive(factor) and _positive(base):
            n = max(n or 0, int(min(base * factor, MAX_SIZE)))
    return n


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _moe_shape(t: dict, model_type: str) -> dict:
    """Expert and shared-expert sizes and the dense-layer count of a MoE model.
    Without `moe_intermediate_size` (Mixtral, gpt-oss, Llama 4) `intermediate_size`
    is the expert's; Llama 4 also runs one shared expert of that size."""
    expert_inter = t.get("moe_intermediate_size") or t.get("intermediate_size")
    shared = t.get("n_shared_experts") or t.get("num_shared_experts")
    shared_inter = t.get("shared_expert_intermediate_size")
    if model_type.startswith("llama4"):
        shared, shared_inter = 1, expert_inter
    if shared_inter and not shared:
        shared = 1
    if shared and not shared_inter:
        shared_inter = shared * (expert_inter or 0)
    layers = t.get("num_hidden_layers") or 0
    flags = moe_layers(t)
    return {"expert_inter": expert_inter, "shared": shared or 0, "shared_inter": shared_inter or 0,
            "dense_layers": layers - sum(flags) if layers else None}


def moe_layers(t: dict) -> list[bool]:
    """Which layers carry experts: DeepSeek/GLM/Kimi start with `first_k_dense_replace`
    dense layers; Qwen lists `mlp_only_layers` and `decoder_sparse_step`; Llama 4
    interleaves every `interleave_moe_layer_step`-th layer."""
    n = t.get("num_hidden_layers") or 0
    first_dense = t.get("first_k_dense_replace") or 0
    dense_set = set(t.get("mlp_only_layers") or [])
    freq = t.get("moe_layer_freq") if isinstance(t.get("moe_layer_freq"), int) else 1
    step = t.get("decoder_sparse_step") or t.get("interleave_moe_layer_step") or 1
    if isinstance(t.get("moe_layer_freq"), list):  # some configs spell out one flag per layer
        return [bool(x) for x in t["moe_layer_freq"]][:n]
    return [i >= first_dense and i not in dense_set and i % (freq or 1) == 0 and (i + 1) % step == 0
            for i in range(n)]


def estimate_params(t: dict) -> tuple[float | None, float | None]:
    """(total, active) parameters in billions, from the shapes alone (see param_groups)."""
    groups = param_groups(t)
    if not groups:
        return None, None
    active = sum(v for k, v in groups.items() if k not in ("embed", "experts"))  # experts_active stands in for experts
    total = sum(v for k, v in groups.items() if k != "experts_active")
    return round(total / 1e9, 2), round(active / 1e9, 2)


def param_groups(t: dict) -> dict[str, int]:
    """Parameters per kind of module, the unit weight-only quantization schemes target
    (compressed-tensors `targets`/`ignore`, ModelOpt `exclude_modules`).

    embed  = vocab × hidden; lm_head the same unless tied
    attention (all layers), GQA/MHA: q and o are hidden × heads·head_dim; k and v hidden × kv_heads·head_dim.
      MLA: q_a (hidden × q_lora) + q_b (q_lora × heads·(nope+rope))
           [or one hidden × heads·(nope+rope) without q_lora]
           + kv_a (hidden × (kv_lora+rope)) + kv_b (kv_lora × heads·(nope+v)) + o (heads·v × hidden).
    dense_mlp: 3 × hidden × intermediate per dense layer when gated (SwiGLU), else 2 ×;
    experts (routed, all) and experts_active (top-k of them), shared_experts, router (hidden × experts).
    total = every group but experts_active; active = total − the routed experts a token
    does not use − the input embedding (a row lookup, no matmul — as DeepSeek and OpenAI
    count; Qwen's published "activated" figure includes it).
    Norms, biases, MTP/draft layers and vision towers are left out, so published
    totals (which also exclude MTP) match within a few percent.
    """
    hidden, layers, vocab = t.get("hidden_size"), t.get("num_hidden_layers"), t.get("vocab_size")
    heads = t.get("num_attention_heads")
    if not (hidden and layers and vocab and heads):
        return {}
    attn = _attention_params(t, hidden, heads)
    mlp_mult = 2 if str(t.get("model_type")) in UNGATED else 3
    experts = _first(t, EXPERTS) or 0
    dense_inter = t.get("intermediate_size_mlp") or t.get("intermediate_size") or 4 * hidden
    embed = vocab * hidden
    groups = {"embed": embed, "lm_head": 0 if t.get("tie_word_embeddings") else embed, "attention": layers * attn}
    if experts > 1:
        shape = _moe_shape(t, str(t.get("model_type") or ""))
        expert = mlp_mult * hidden * (shape["expert_inter"] or 0)
        top_k = _first(t, TOP_K) or 1
        n_moe = sum(moe_layers(t))
        groups.update(experts=n_moe * experts * expert, experts_active=n_moe * top_k * expert,
                      shared_experts=n_moe * mlp_mult * hidden * shape["shared_inter"],
                      router=n_moe * hidden * experts)
        n_dense = layers - n_moe
    else:
        n_dense = layers
    groups["dense_mlp"] = n_dense * mlp_mult * hidden * dense_inter
    return groups


def _attention_params(t: dict, hidden: int, heads: int) -> int:
    if t.get("kv_lora_rank"):
        nope, rope = t.get("qk_nope_head_dim") or 0, t.get("qk_rope_head_dim") or 0
        v, kv_lora, q_lora = t.get("v_head_dim") or nope, t["kv_lora_rank"], t.get("q_lora_rank")
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        return q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v) + heads * v * hidden
    head_dim = t.get("head_dim") or hidden // heads
    kv = t.get("num_key_value_heads") or heads
    return 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim


# ----------------------------------------------------------- JsonReader shape


class HfConfigReader:
    """ingest/base.py JsonReader: a config.json document → [ModelProfile]."""

    kind = "hf-config"

    def read(self, doc: Any, path: str, line: int | None) -> list[ModelProfile] | None:
        if line is not None or not isinstance(doc, dict):
            return None
        t = text_config(doc)
        if not (doc.get("architectures") or doc.get("model_type")) or not t.get("num_hidden_layers"):
            return None
        p = Path(path)
        return [profile_from_config(doc, quant=read_quant_beside(p), source=path, name=_name_from_path(p))]
