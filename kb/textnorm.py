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
        (r"\btok(?:en)?s?\s*/\s*s(?:ec)?\b|\btokens? (?:per|a) sec(?:ond)?\b|\btps\b|\bt/s\b|\btput\b|\bthpt\b|"
         r"\bthr(?:u|ou|ough?t?|oug?h)put\b|\bthoughput\b", "throughput"),
        (r"\bplateau\w*|\bflat\b|\bflatten\w*|stops? scaling|(?:does ?n[o']?t|not|no longer) "
         r"scal\w*|saturat\w*|\bcapped\b|"
         r"\bceiling\b|\bstall\w*|\bstuck\b|\bknee\b|diminishing", "plateau"),
        (r"\btp\s?\d*\b|tensor[- ]parallel\w*|tp[-_]size", "tensorparallel"),
        (r"\bpp\s?\d*\b|pipeline[- ]parallel\w*|pp[-_]size", "pipelineparallel"),
        (r"\bep\s?\d*\b|expert[- ]parallel\w*|ep[-_]size|deepep|eplb", "expertparallel"),
        (r"\bdp[- ]?attention\b|\bdp[- ]attn\b|data[- ]parallel attention|enable-dp-attention", "dpattention"),
        (r"\bmoe\b|mixture[- ]of[- ]experts|\bexperts?\b|fused[-_ ]moe", "moe"),
        (r"\bkv\b|kv[- _]?cache|kv pool|token usage", "kvcache"),
        (r"\bttft\b|time[- ]to[- ]first[- ]token|first token", "ttft"),
        (r"\bitl\b|inter[- ]token|\btpot\b|time per output token|per[- ]token latency", "itl"),
        (r"\bconcurr?[ae]n\w*|\bconc\b|parallel requests|simultaneous requests|\bin[- ]flight\b|\bc\s*=\s*\d+",
         "concurrency"),
        (r"single[- ]?(?:stream|user|request)|\bbs\s*=?\s*1\b|batch size (?:of )?1\b|one request at a "
         r"time|\bc\s*=\s*1\b", "singlestream"),
        (r"cuda[- _]?graphs?|cudagraph\w*", "cudagraph"),
        (r"\boom\b|out of memory|outofmemory", "oom"),
        (r"speculative|spec(?:ulative)?[- ]decod\w*|\bmtp\b|\beagle3?\b|nextn|draft model|n-?gram", "speculative"),
        (r"\bslow\w*|crawl\w*|sluggish|\blow (?:tok|throughput|speed)", "slow"),
        (r"max[-_ ]running[-_ ]requests|max[-_ ]num[-_ ]seqs|#running-req|running requests|running: \d+ reqs",
         "runningcap"),
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

# Shorthand engineers type, and the words the findings use for it. The expansion is
# appended to the question (the shorthand stays), so both spellings are searched.
ABBREVIATIONS: dict[str, str] = {
    "conc": "concurrency", "concurency": "concurrency", "concurent": "concurrent", "concurrancy": "concurrency",
    "tput": "throughput", "thruput": "throughput", "thpt": "throughput", "throughtput": "throughput",
    "througput": "throughput", "thoughput": "throughput",
    "ctx": "context", "attn": "attention", "bw": "bandwidth", "mem": "memory", "perf": "performance",
    "util": "utilization", "quant": "quantization", "cfg": "config", "conf": "config", "seqs": "sequences",
    "reqs": "requests", "req": "request", "toks": "tokens", "bs": "batch size", "spec": "speculative",
    "grpah": "graph", "latncy": "latency", "latecy": "latency",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")

# A quantity: a number standing alone, with its unit if it has one. A number that is
# part of a name (A100, H200, sm120, TP8, fp8_w8a8, Qwen3-235B, GLM-5, r1, 8x7B,
# E=8,N=2048) is not one: it is kept, as the identifier it is.
_QUANTITY = re.compile(
    r"(?<![\w.\-/=,+])(?P<n>\d[\d,]*(?:\.\d+)?)(?P<u>k)?\s*"
    r"(?P<unit>tok(?:en)?s?\s*/\s*s(?:ec)?|tokens? per second|tps|t/s|"
    r"concurr?[ae]n\w*|conc|users?|streams?|reqs?|requests?|seqs?|sequences?|ms|s|gb/s|gib|gb|%)?"
    r"(?![\w.\-/])",
    re.I,
)
# key=value load levels: "c=256", "bs=1", "conc=64"
_LOAD_LEVEL = re.compile(r"\b(?P<key>c|bs|conc|concurrency|batch[-_ ]?size)\s*=\s*(?P<n>\d+)\b", re.I)


def concepts(text: str) -> list[str]:
    return [c for rx, c in CONCEPTS if rx.search(text)]


# A round count written out ("32000 input tokens", "131,072") and the way engineers
# say it ("32k", "128k"): both spellings are indexed so either finds the other.
_ROUND = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d{4,7})(?![\w.,]\d)")


def thousands(text: str) -> list[str]:
    """"32k" for 32000 and "128k" for 131072 (1024-based, as context lengths are)."""
    out = []
    for m in _ROUND.finditer(text):
        n = int(m.group(1).replace(",", ""))
        for base in (1000, 1024):
            if n >= base and n % base == 0:
                out.append(f"{n // base}k")
                break
    return list(dict.fromkeys(out))


def expand(text: str) -> str:
    """Text plus the concept words it mentions and the "Nk" names of its round counts
    (for indexing findings and reading questions)."""
    found = concepts(text) + thousands(text)
    return f"{text} {' '.join(found)}" if found else text


def _meaning(n: float, unit: str, question: str) -> list[str]:
    if unit.startswith(("tok", "tps", "t/s")) or "per second" in unit:
        if n < 60 and not re.search(r"concurr?[ae]n|\bconc\b|\bc\s*=", question, re.I):
            return ["singlestream", "slow", "decode"]
    elif unit.startswith(("conc", "user", "stream", "req", "seq")):
        return ["concurrency"] + (["singlestream"] if n <= 1 else [])
    return []


def understand_query(question: str) -> str:
    """A question rewritten for search: shorthand spelled out, concepts added, and
    quantities turned into what they mean ("11 tok/s" alone is a slow stream; "128
    concurrency" is load). A quantity's number is dropped (it would only match stray
    figures); numbers inside names (A100, Qwen3-235B, fp8_w8a8) are kept whole."""
    extra: list[str] = []

    def quantity(m: re.Match) -> str:
        unit = (m.group("unit") or "").lower()
        if not unit or unit.lower() in ("gb", "gib"):
            return m.group(0)  # a bare number ("error 3", "rtx pro 6000") or a size ("A100 80GB"): kept
        try:
            n = float(m.group("n").replace(",", "")) * (1000 if m.group("u") else 1)
        except ValueError:
            return m.group(0)
        extra.extend(_meaning(n, unit, question))
        return f" {m.group('unit')} "

    def load_level(m: re.Match) -> str:
        extra.append("concurrency" if m.group("key").lower().startswith("c") else "batch")
        if int(m.group("n")) <= 1:
            extra.append("singlestream")
        return f" {m.group('key')} "

    text = _QUANTITY.sub(quantity, _LOAD_LEVEL.sub(load_level, question))
    for w in _WORD.findall(question):
        full = ABBREVIATIONS.get(w.lower())
        if full and full not in extra:
            extra.append(full)
    return " ".join([expand(text)] + extra)
