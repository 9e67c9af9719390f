"""Which quantization a checkpoint's weights use, from `hf_quant_config.json`
(ModelOpt exports) or the `quantization_config` block of `config.json`."""

from __future__ import annotations

CONFIG = "config.json"
QUANT_CONFIG = "hf_quant_config.json"  # ModelOpt exports (nvidia/*-NVFP4, *-FP8)
GPTQ_CONFIG = "quantize_config.json"  # older AutoGPTQ checkpoints
NESTED = ("text_config", "llm_config", "language_config")  # multimodal wrappers

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def detect_quantization(cfg: dict, quant: dict | None, dtype: str | None) -> tuple[str | None, dict]:
    """(scheme, details). Scheme is one of nvfp4, fp8, mxfp4, awq, gptq,
    compressed-tensors, bitsandbytes, another method's own name, or the weight
    dtype (bf16/fp16/fp32) when nothing is quantized. Details keep what a rule
    might need: method, source file, bits, group size, block size, KV-cache format."""
    if quant is not None:
        if "quantization" in quant or "producer" in quant:  # ModelOpt hf_quant_config.json
            return _modelopt(_dict(quant.get("quantization")), quant.get("_file", QUANT_CONFIG),
                             _dict(quant.get("producer")).get("name", "modelopt"))
        if quant.get("_file") == GPTQ_CONFIG and not _quant_block(cfg):
            return _from_block({"quant_method": "gptq", **quant}, GPTQ_CONFIG)
    block = _quant_block(cfg)
    if block:
        return _from_block(block, CONFIG)
    return (_DTYPES.get(dtype or "", dtype), {}) if dtype else (None, {})


def _quant_block(cfg: dict) -> dict | None:
    """The quantization_config block: top level, or inside a wrapper's text_config."""
    for holder in (cfg, *(cfg.get(k) for k in NESTED)):
        q = holder.get("quantization_config") if isinstance(holder, dict) else None
        if isinstance(q, dict) and q:
            return q
    return None


def _modelopt(q: dict, source: str, producer: str) -> tuple[str, dict]:
    algo = str(q.get("quant_algo") or "").upper()
    details = {"method": producer, "source": source, "quant_algo": algo or None,
               "group_size": q.get("group_size") or _group_size(q), "kv_cache": _kv_cache(q)}
    excluded = q.get("exclude_modules") or q.get("ignore")
    if isinstance(excluded, list) and excluded:
        details["excluded_modules"] = len(excluded)
    if algo == "MIXED_PRECISION":  # per-layer algorithms: name the 4-bit one if any
        algos = sorted({str(v.get("quant_algo")).upper() for v in _dict(q.get("quantized_layers")).values()
                        if isinstance(v, dict)})
        details["layer_algos"] = algos
        algo = next((a for a in algos if "NVFP4" in a), next((a for a in algos if "FP8" in a), algo))
    scheme = "nvfp4" if "NVFP4" in algo else "fp8" if "FP8" in algo else "w4a8-awq" if algo == "W4A8_AWQ" \
        else algo.lower() or "modelopt"
    return scheme, {k: v for k, v in details.items() if v is not None}


def _from_block(q: dict, source: str) -> tuple[str, dict]:
    method = str(q.get("quant_method") or ("bitsandbytes" if _is_bnb(q) else "")).lower()
    details: dict = {"method": method or None, "source": source}
    for key in ("bits", "group_size", "weight_block_size", "activation_scheme", "fmt", "version",
                "zero_point", "desc_act", "sym", "checkpoint_format", "format"):
        if q.get(key) not in (None, [], {}):
            details[key] = q[key]
    if _kv_cache(q):
        details["kv_cache"] = _kv_cache(q)
    if method.startswith("modelopt"):
        scheme, more = _modelopt(q, source, "modelopt")
        return scheme, {**details, **more}
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8", details
    if method in ("awq", "gptq", "mxfp4"):
        return method, details
    if method == "bitsandbytes":
        details["bits"] = 4 if q.get("load_in_4bit") or q.get("_load_in_4bit") else 8
        if q.get("bnb_4bit_quant_type"):
            details["quant_type"] = q["bnb_4bit_quant_type"]
        return "bitsandbytes", details
    if method == "compressed-tensors":
        details["scheme"] = _ct_scheme(q)
        details.setdefault("group_size", _group_size(q))
        details["groups"] = _ct_groups(q)
        ignore = q.get("ignore")
        if isinstance(ignore, list):
            details["ignore"] = [p for p in ignore if isinstance(p, str)][:4096]
        return "compressed-tensors", details
    return method or "unknown", details


def _kv_cache(q: dict) -> str | None:
    """KV-cache format: ModelOpt's `kv_cache_quant_algo`, or a compressed-tensors
    style `kv_cache_scheme` ({"type": "float", "num_bits": 8} → FP8)."""
    kv = q.get("kv_cache_quant_algo") or q.get("kv_cache_scheme")
    if isinstance(kv, dict):
        kind, bits = kv.get("type"), kv.get("num_bits")
        return f"FP{bits}" if kind == "float" and bits else f"INT{bits}" if bits else None
    return str(kv).upper() if kv else None


def _group_size(q: dict) -> int | None:
    for g in _dict(q.get("config_groups")).values():
        if isinstance(g, dict) and isinstance(g.get("weights"), dict) and g["weights"].get("group_size"):
            return g["weights"]["group_size"]
    return None


def _is_bnb(q: dict) -> bool:
    return any(k in q for k in ("load_in_4bit", "load_in_8bit", "_load_in_4bit", "bnb_4bit_quant_type"))


def _ct_scheme(q: dict) -> str | None:
    """compressed-tensors weight scheme: nvfp4, mxfp4, fp8, w4a16, w8a8, ..."""
    groups = [g for g in _dict(q.get("config_groups")).values() if isinstance(g, dict)]
    fmt = q.get("format") if isinstance(q.get("format"), str) else None
    if not groups:
        return fmt
    w = _dict(groups[0].get("weights"))
    a = _dict(groups[0].get("input_activations"))
    bits, kind = w.get("num_bits"), w.get("type")
    if kind == "float" and bits == 4:  # NVFP4 scales every 16 values, MXFP4 every 32
        return "mxfp4" if w.get("group_size") == 32 else "nvfp4"
    if kind == "float" and bits == 8:
        return "fp8"
    if kind == "int" and bits:
        return f"w{bits}a{a.get('num_bits') or 16}"
    return fmt


def _ct_groups(q: dict) -> list[dict]:
    """compressed-tensors `config_groups`, reduced to what sizing needs: the weights'
    bits, type, strategy and group size, and the module targets the group covers."""
    out = []
    for g in _dict(q.get("config_groups")).values():
        if not isinstance(g, dict):
            continue
        w = _dict(g.get("weights"))
        targets = [t for t in g.get("targets") or [] if isinstance(t, str)] if isinstance(g.get("targets"),
                                                                                          list) else []
        bits = w.get("num_bits")
        if isinstance(bits, int) and 0 < bits <= 32:
            size = w.get("group_size")
            out.append({"bits": bits, "type": str(w.get("type") or "int"), "strategy": str(w.get("strategy") or ""),
                        "group_size": size if isinstance(size, int) and size > 0 else None,
                        "symmetric": w.get("symmetric") is not False, "targets": targets[:256]})
    return out


def _dict(v) -> dict:
    """A sub-block that should be an object; anything else (a damaged file) reads as empty."""
    return v if isinstance(v, dict) else {}


class HfQuantConfigReader:
    """ingest/base.py JsonReader: a ModelOpt `hf_quant_config.json` named on its own. It
    yields nothing by itself (hf_config reads it with the config.json beside it), so it
    claims the document with an empty list: recognised, not an unknown file."""

    kind = "hf-quant-config"

    def read(self, doc, path: str, line: int | None) -> list | None:
        if line is None and isinstance(doc, dict) and ("quantization" in doc or "producer" in doc):
            return []
        return None
