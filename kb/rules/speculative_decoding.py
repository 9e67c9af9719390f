"""KB109 speculative-decoding

What it flags: slow single-stream decode (one request at a time well under
what an interactive user expects).

Why it matters: at batch 1 decode is bound by reading the weights once per
token; speculative decoding verifies several drafted tokens per weight read.
It pays at low batch and can cost throughput at large batch, where the GPU is
already busy.

Evidence: the concurrency-1 benchmark (TPOT or output tok/s); MTP/NextN draft
layers in config.json (`num_nextn_predict_layers`).

Fix: with draft layers in the checkpoint, sglang EAGLE/NEXTN (MTP) or vLLM's
`mtp` method; otherwise n-gram speculation for repetitive outputs.
"""

import json

from kb.rules.base import Proposal, Rule, RuleContext, change


def check(ctx: RuleContext) -> Proposal | None:
    sig = ctx.signals.get("low-single-stream-decode")
    if not sig:
        return None
    m = ctx.model
    mtp = bool(m and m.mtp_layers)
    if ctx.arg("speculative_algorithm") or ctx.arg("speculative_config"):
        return None
    changes = []
    if ctx.engine == "sglang":
        algo = "EAGLE" if mtp else "NGRAM"
        choices = ctx.catalog.choices("--speculative-algorithm")
        if choices and algo not in choices:
            return None
        changes.append(change(ctx, "speculative_algorithm", algo,
                              "draft with the checkpoint's MTP layers" if mtp else "n-gram drafts from the prompt"))
        if mtp:
            changes += [change(ctx, "speculative_num_steps", 3, "three draft steps"),
                        change(ctx, "speculative_eagle_topk", 1, "one candidate per step"),
                        change(ctx, "speculative_num_draft_tokens", 4, "steps + 1 tokens verified per pass")]
    else:
        cfg = {"method": "mtp", "num_speculative_tokens": 1} if mtp else \
              {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
        changes.append(change(ctx, "speculative_config", json.dumps(cfg, separators=(",", ":")),
                              "MTP draft layers" if mtp else "n-gram drafts"))
    changes = [c for c in changes if c]
    if not changes:
        return None
    return Proposal(title=("Speculative decoding with the checkpoint's MTP layers" if mtp
                           else "N-gram speculative decoding for single-stream speed"),
                    severity=sig.severity if mtp else "low",
                    rationale=sig.summary + "; speculation emits several tokens per weight read at low batch.",
                    changes=changes, evidence=sig.evidence, supporting=["low-single-stream-decode"],
                    notes=["speculation can lower throughput at large batch: keep it for latency-bound serving"])


RULE = Rule(id="KB109", name="speculative-decoding", title="Slow single-stream decode",
            fix_class="speculative-decoding", signals=("low-single-stream-decode",),
            needs=("benchmark",), severity="severe",
            reads="a concurrency-1 benchmark; config.json for draft (MTP) layers",
            example=("a concurrency-1 benchmark decoding 25 tok/s (TPOT 40 ms) for a model without MTP layers → "
                     "--speculative-algorithm NGRAM (tests/rules/KB109/fires)"),
            check=check, doc=__doc__)
