"""Build the derived Prometheus fixtures from the two real recordings
(tests/data/samples/prometheus/vllm-0.32.0_cap8_{load,idle}.json, written by
`KB_RECORD_PROMETHEUS=tests/data/samples/prometheus pytest tests/live/test_live_prometheus.py`):

- fleet-2x-vllm_router.json: replica-a:8000 = the loaded window, replica-b:8000 = the idle
  window moved onto the loaded window's start (relabelled `instance`, shifted timestamps);
- sglang-0.5.23_names.json: the loaded window re-keyed under sglang's metric names, the
  names listed from sglang 0.5.23's own metrics collector (read from the engines venv),
  start-up constants taken from the same vLLM server's cache_config_info.

    python scripts/build_prometheus_fixtures.py [--sglang-src PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from promfake import SAMPLES, fleet, renamed  # noqa: E402

from ingest.prometheus import NAMES  # noqa: E402

SGLANG_SRC = Path("/root/.cache/kb/engines-venv/lib/python3.11/site-packages/sglang/srt/observability/"
                  "metrics_collector.py")


def sglang_names(src: Path) -> list[str]:
    """Every sample name sglang 0.5.23 exports, as stored in Prometheus (prometheus_client
    adds _total to a counter, _bucket/_sum/_count to a histogram)."""
    text = src.read_text()
    out = set()
    metric = r"\b(Counter|Gauge|Histogram|Summary)\(\s*(?:#[^\n]*\n\s*)*name=\"(sglang:[a-zA-Z0-9_]+)\""
    for kind, name in re.findall(metric, text):
        if kind == "Counter":
            out.add(name if name.endswith("_total") else name + "_total")
        elif kind == "Histogram":
            out |= {name + "_bucket", name + "_sum", name + "_count"}
        elif kind == "Summary":
            out |= {name + "_sum", name + "_count"}
        else:
            out.add(name)
    return sorted(out)


def _vector(instance: str, at: float, value: str) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": instance}, "value": [at, value]}]}}, separators=(",", ":"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglang-src", type=Path, default=SGLANG_SRC)
    opts = ap.parse_args()
    load = json.loads((SAMPLES / "vllm-0.32.0_cap8_load.json").read_text())
    idle = json.loads((SAMPLES / "vllm-0.32.0_cap8_idle.json").read_text())

    two = fleet(load, [(load, "replica-a:8000"), (idle, "replica-b:8000")])
    (SAMPLES / "fleet-2x-vllm_router.json").write_text(json.dumps(two, indent=1) + "\n")

    # vLLM name → sglang name, figure by figure (ingest/prometheus.NAMES, first candidates)
    v, s = NAMES["vllm"], NAMES["sglang"]
    mapping = {v[f][0]: s[f][0] for f in ("running", "waiting", "kv_cache_usage", "preemptions", "prompt_tokens",
                                          "generation_tokens", "requests", "ttft", "tpot", "itl", "e2e")}
    instance = next(json.loads(r["body"])["data"]["result"][0]["metric"]["instance"] for r in load["answers"]
                    if "count by (instance, model_name)" in r["params"].get("query", ""))
    info = next(json.loads(r["body"])["data"]["result"][0]["metric"] for r in load["answers"]
                if "vllm:cache_config_info" in r["params"].get("query", ""))
    ratio = next(r for r in load["answers"] if "vllm:prefix_cache_hits_total" in r["params"].get("query", ""))
    rng = re.search(r"\[(\d+s)\]", ratio["params"]["query"]).group(1)
    sel = load["args"]["selector"][1:-1]
    end = round(load["args"]["end"], 3)
    new_inst = "127.0.0.1:30000"
    extra = {
        # sglang:cache_hit_rate is a gauge: the hit rate vLLM's counters gave over the same range
        f"max by (instance) (avg_over_time(sglang:cache_hit_rate{{{sel}}}[{rng}]))":
            ratio["body"].replace(f'"instance":"{instance}"', f'"instance":"{new_inst}"'),
        # start-up constants: the same server's KV size in tokens and block size, and its --max-model-len 512
        f"max by (instance) (last_over_time(sglang:max_total_num_tokens{{{sel}}}[{rng}]))":
            _vector(new_inst, end, info["kv_cache_size_tokens"]),
        f"max by (instance) (last_over_time(sglang:page_size{{{sel}}}[{rng}]))":
            _vector(new_inst, end, info["block_size"]),
        f"max by (instance) (last_over_time(sglang:context_len{{{sel}}}[{rng}]))": _vector(new_inst, end, "512"),
    }
    sg = renamed(load, mapping, ('job="vllm"', 'job="sglang"'), (instance, new_inst), sglang_names(opts.sglang_src),
                 extra)
    (SAMPLES / "sglang-0.5.23_names.json").write_text(json.dumps(sg, indent=1) + "\n")
    print(f"wrote {len(two['answers'])} fleet answers, {len(sg['answers'])} sglang answers")


if __name__ == "__main__":
    main()
