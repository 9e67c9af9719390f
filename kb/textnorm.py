"""How engineers say things → the concepts kb indexes.

The same expansion runs over findings (at index time) and questions (at query
time), so "tok/s", "tokens per second" and "throughput" meet, and "stops scaling"
finds "plateau". Expansion appends concept words; it never removes the original.
"""

from __future__ import annotations

import re

# (pattern, concept words appended when it matches)
CONCEPTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.I), c)
    for p, c in [
        (r"\btok(?:en)?s?\s*/\s*s(?:ec)?\b|\btokens? (?:per|a) sec(?:ond)?\b|\btps\b|\bt/s\b|\btput\b|\bthruput\b", "throughput"),
        (r"\bplateau\w*|\bflat\b|\bflatten\w*|stops? scaling|(?:does ?n[o']?t|not|no longer) scal\w*|saturat\w*|\bcapped\b|"
         r"\bceiling\b|\bstall\w*|\bstuck\b|\bknee\b|diminishing", "plateau"),
        (r"\btp\s?\d*\b|tensor[- ]parallel\w*|tp[-_]size", "tensorparallel"),
        (r"\bpp\s?\d*\b|pipeline[- ]parallel\w*|pp[-_]size", "pipelineparallel"),
        (r"\bep\s?\d*\b|expert[- ]parallel\w*|ep[-_]size|deepep|eplb", "expertparallel"),
        (r"\bdp[- ]?attention\b|\bdp[- ]attn\b|data[- ]parallel attention|enable-dp-attention", "dpattention"),
        (r"\bmoe\b|mixture[- ]of[- ]experts|\bexperts?\b|fused[-_ ]moe", "moe"),
        (r"\bkv\b|kv[- _]?cache|kv pool|token usage", "kvcache"),
        (r"\bttft\b|time[- ]to[- ]first[- ]token|first token", "ttft"),
        (r"\bitl\b|inter[- ]token|\btpot\b|time per output token|per[- ]token latency", "itl"),
        (r"concurren\w*|parallel requests|simultaneous requests|\bin[- ]flight\b|\bc\s*=\s*\d+", "concurrency"),
        (r"single[- ]?(?:stream|user|request)|\bbs\s*=?\s*1\b|batch size (?:of )?1\b|one request at a time|\bc\s*=\s*1\b", "singlestream"),
        (r"cuda[- _]?graphs?|cudagraph\w*", "cudagraph"),
        (r"\boom\b|out of memory|outofmemory", "oom"),
        (r"speculative|spec(?:ulative)?[- ]decod\w*|\bmtp\b|\beagle3?\b|nextn|draft model|n-?gram", "speculative"),
        (r"\bslow\w*|crawl\w*|sluggish|\blow (?:tok|throughput|speed)", "slow"),
        (r"max[-_ ]running[-_ ]requests|max[-_ ]num[-_ ]seqs|#running-req|running requests|running: \d+ reqs", "runningcap"),
        (r"#queue-req|waiting: \d+|queue\w*|pending", "queue"),
        (r"retract\w*|preempt\w*", "preemption"),
        (r"nvfp4|modelopt_fp4|\bfp4\b", "nvfp4"),
        (r"blackwell|sm_?120|sm_?100|rtx pro 6000|rtx 5090|b200|gb200", "blackwell"),
        (r"all[- ]?reduce|allreduce", "allreduce"),
        (r"\bp2p\b|peer[- ]to[- ]peer", "p2p"),
        (r"\bgpus? (?:are |at )?(?:idle|0 ?%)|low (?:gpu )?util\w*|underutili[sz]\w*", "gpuidle"),
        (r"chunked[- _]prefill|max[-_ ]num[-_ ]batched[-_ ]tokens", "chunkedprefill"),
        (r"\bnccl\b", "nccl"),
    ]
]

_NUMBER_UNIT = re.compile(
    r"(?P<n>\d[\d,]*(?:\.\d+)?)\s*(?P<u>k\b)?\s*(?P<unit>tok(?:en)?s?\s*/\s*s(?:ec)?|tokens? per second|tps|t/s|"
    r"concurrency|concurrent|users|streams|reqs?|requests|ms|s\b|gb\b|gib\b|%)?",
    re.I,
)


def concepts(text: str) -> list[str]:
    return [c for rx, c in CONCEPTS if rx.search(text)]


def expand(text: str) -> str:
    """Text plus the concept words it mentions (for indexing findings)."""
    found = concepts(text)
    return f"{text} {' '.join(found)}" if found else text


def understand_query(question: str) -> str:
    """A question rewritten for search: concepts added, bare numbers turned into what
    they mean ("11 tok/s" alone is a slow stream; "128 concurrency" is load)."""
    extra: list[str] = []
    for m in _NUMBER_UNIT.finditer(question):
        unit = (m.group("unit") or "").lower()
        try:
            n = float(m.group("n").replace(",", "")) * (1000 if m.group("u") else 1)
        except ValueError:
            continue
        if unit.startswith(("tok", "tps", "t/s")) or "per second" in unit:
            if n < 60 and not re.search(r"concurren|\bc\s*=", question, re.I):
                extra += ["singlestream", "slow", "decode"]
        elif unit.startswith(("concurren", "user", "stream", "req")):
            extra += ["concurrency"] + (["singlestream"] if n <= 1 else [])
    # numbers carry no words of their own: drop them so they cannot match stray figures
    text = _NUMBER_UNIT.sub(lambda m: f" {m.group('unit') or ''} ", question)
    return " ".join([expand(text)] + extra)
