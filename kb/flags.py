"""Per-version catalogs of sglang and vLLM server flags (kb/data/flags/*.json,
generated from the engines' own argument parsers by scripts/gen_flag_catalog.py).

Rules and `kb launch` never hard-code a flag spelling: they ask for a *setting*
("cuda_graph_max_bs") and get the flag this engine version accepts: sglang's
`--cuda-graph-max-bs` up to 0.5.8, `--cuda-graph-max-bs-decode` from 0.5.15 (the old
name is a deprecated alias in 0.5.15-0.5.19 and ambiguous from 0.5.20). vLLM 0.10/0.11
take `--cuda-graph-sizes N` (one value = the largest size), 0.32 `--max-cudagraph-capture-size`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kb.flagdata import load, version_key, versions

# setting → flag spellings, preferred first; the first one the catalog has wins
SETTINGS: dict[str, dict[str, list[str]]] = {
    "sglang": {
        "model": ["--model-path"],
        "tp": ["--tp-size"],
        "pp": ["--pp-size"],
        "dp": ["--dp-size"],
        "ep": ["--ep-size"],
        "max_running_requests": ["--max-running-requests"],
        "cuda_graph_max_bs": ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"],
        "mem_fraction": ["--mem-fraction-static"],
        "kv_cache_dtype": ["--kv-cache-dtype"],
        "chunked_prefill": ["--chunked-prefill-size"],
        "schedule_conservativeness": ["--schedule-conservativeness"],
        "moe_runner_backend": ["--moe-runner-backend"],
        "attention_backend": ["--attention-backend"],
        "quantization": ["--quantization"],
        "dp_attention": ["--enable-dp-attention"],
        "disable_cuda_graph": ["--disable-cuda-graph"],
        "disable_custom_all_reduce": ["--disable-custom-all-reduce"],
        "speculative_algorithm": ["--speculative-algorithm"],
        "speculative_num_steps": ["--speculative-num-steps"],
        "speculative_eagle_topk": ["--speculative-eagle-topk"],
        "speculative_num_draft_tokens": ["--speculative-num-draft-tokens"],
        "context_length": ["--context-length"],
        "trust_remote_code": ["--trust-remote-code"],
        "host": ["--host"],
        "port": ["--port"],
    },
    "vllm": {
        "model": ["--model"],
        "tp": ["--tensor-parallel-size"],
        "pp": ["--pipeline-parallel-size"],
        "dp": ["--data-parallel-size"],
        "ep": ["--enable-expert-parallel"],
        "max_running_requests": ["--max-num-seqs"],
        "cuda_graph_max_bs": ["--max-cudagraph-capture-size", "--cuda-graph-sizes"],
        "mem_fraction": ["--gpu-memory-utilization"],
        "kv_cache_dtype": ["--kv-cache-dtype"],
        "chunked_prefill": ["--max-num-batched-tokens"],
        "moe_runner_backend": ["--moe-backend"],
        "attention_backend": ["--attention-backend"],
        "quantization": ["--quantization"],
        "disable_cuda_graph": ["--enforce-eager"],
        "disable_custom_all_reduce": ["--disable-custom-all-reduce"],
        "speculative_config": ["--speculative-config"],
        "context_length": ["--max-model-len"],
        "trust_remote_code": ["--trust-remote-code"],
        "host": ["--host"],
        "port": ["--port"],
    },
}


@dataclass(frozen=True)
class Catalog:
    engine: str
    version: str
    requested: str | None  # the version asked for, when it differs (nearest known used)
    flags: dict
    inferred: str | None = None  # why this version was chosen from the user's own flags

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def choices(self, flag: str) -> list[str] | None:
        return (self.flags.get(flag) or {}).get("choices")

    def flag_for(self, setting: str) -> str | None:
        for flag in SETTINGS[self.engine].get(setting, []):
            if flag in self.flags:
                return flag
        return None

    def check(self, flag: str, value=None) -> str | None:
        """Why `flag value` is not valid for this version, or None when it is."""
        flag = as_parsed(self.engine, flag) if flag not in self.flags else flag
        if flag not in self.flags:
            return f"{flag} is not a {self.engine} {self.version} flag"
        ch = self.choices(flag)
        kind = (self.flags[flag] or {}).get("type")
        if value is not None and value is not True and kind in ("int", "float"):
            try:
                (int if kind == "int" else float)(str(value))
            except ValueError:  # e.g. a placeholder "N" taken from prose
                return f"{flag} {value} is not a{'n' if kind == 'int' else ''} {kind}"
        if ch and value is not None and value is not True and str(value) not in map(str, ch):
            return f"{flag} {value} is not one of {', '.join(map(str, ch))}"
        return None

    def note(self) -> str | None:
        if self.inferred:
            return f"{self.engine} version unknown: the command targets {self.version}, {self.inferred}"
        if self.requested and self.requested != self.version:
            return f"no flag catalog for {self.engine} {self.requested}: using the nearest known version {self.version}"
        return None

    def resolve(self, flag: str) -> tuple[str | None, str | None]:
        """(the spelling this version takes, a note when it differs) or (None, why not): a
        renamed setting, the other engine's spelling, or the flag's destination in another
        catalogued version of this engine."""
        if self.has(flag):
            return flag, None
        for table in SETTINGS.values():
            for setting, names in table.items():
                if flag in names:
                    new = self.flag_for(setting)
                    if new:
                        return new, f"{flag} is spelled {new} in {self.engine} {self.version}"
        for v in reversed(versions(self.engine)):
            info = load(self.engine, v).get(flag)
            if info and info.get("dest"):
                same = [f for f, i in self.flags.items() if i.get("dest") == info["dest"]]
                if same:
                    return same[0], f"{flag} ({self.engine} {v}) is {same[0]} in {self.engine} {self.version}"
                break
        return None, f"{flag} is not a {self.engine} {self.version} flag"

    def spellings(self, flag: str) -> list[str]:
        """Every other spelling of `flag`'s setting, in any catalogued version: this version's
        aliases (`--tp` for `--tp-size`) and the setting's names in other versions
        (`--cuda-graph-max-bs` for `--cuda-graph-max-bs-decode`). A change replaces all of
        them, so a command never carries one setting twice (sglang 0.5.20+ rejects the old
        `--cuda-graph-max-bs` as an ambiguous prefix)."""
        info = self.flags.get(flag) or {}
        dest = info.get("dest")
        same = [f for f, i in self.flags.items() if dest and i.get("dest") == dest and f != flag]
        out = same + [a for a in info.get("aliases") or [] if a != flag and a not in same]
        for names in SETTINGS.get(self.engine, {}).values():
            if flag in names:
                out += [n for n in names if n != flag and n not in out]
        return out


def infer_version(engine: str, flags: list[str]) -> tuple[str, str] | None:
    """(version, why) when the user's own flags pin the version: the newest catalogued
    version that has every one of them, if that is not the newest overall (a flag that
    exists only in older versions, e.g. sglang's `--cuda-graph-max-bs` before 0.5.20).
    None when the newest version takes them all or none takes them all."""
    known = versions(engine)
    wanted = [f for f in dict.fromkeys(flags) if f.startswith("--")]
    if not known or not wanted:
        return None
    fits = [v for v in known if all(_knows(engine, v, f) for f in wanted)]
    if not fits or fits[-1] == known[-1]:
        return None
    newer = known[known.index(fits[-1]) + 1]
    missing = [f for f in wanted if not _knows(engine, newer, f)]
    return fits[-1], f"the newest that accepts {', '.join(missing[:3])} (gone in {newer})"


def as_parsed(engine: str, flag: str) -> str:
    """The spelling the engine's parser reads: vLLM's FlexibleArgumentParser rewrites `_` to
    `-` in a long option's name (`--max_num_batched_tokens`); sglang's argparse does not."""
    if engine == "vllm" and flag.startswith("--"):
        name, eq, value = flag.partition("=")
        return name[:2] + name[2:].replace("_", "-") + eq + value
    return flag


def _knows(engine: str, version: str, flag: str) -> bool:
    """The flag as the user spelled it, by any of its names in that version."""
    return as_parsed(engine, flag) in _spellings(engine, version)


@lru_cache(maxsize=None)
def _spellings(engine: str, version: str) -> frozenset[str]:
    out = set()
    for flag, spec in load(engine, version).items():
        out.update([flag, *(spec.get("aliases") or [])])
    return frozenset(out)


def nearest_version(known: list[str], version: str) -> str:
    """Of the catalogued versions on either side of `version`, the closer one by major, then
    minor, then patch distance (ties to the older): vLLM 0.28 is read with the 0.32 catalog,
    not 0.11's, which lacks seventeen releases of flags."""
    want = version_key(version)
    older = [v for v in known if version_key(v) <= want]
    newer = [v for v in known if version_key(v) > want]
    sides = older[-1:] + newer[:1]

    def distance(v: str) -> tuple:
        return tuple(abs(a - b) for a, b in zip(version_key(v), want, strict=True))
    return min(sides, key=distance)


def catalog(engine: str, version: str | None = None, flags: list[str] | None = None) -> Catalog:
    """The catalog for this engine version, or the nearest known one; with the version
    unknown, the one the user's own `flags` pin (infer_version), else the newest."""
    if not version and flags:
        hit = infer_version(engine, flags)
        if hit:
            return Catalog(engine, hit[0], None, load(engine, hit[0]), inferred=hit[1])
    known = versions(engine)
    if not known:
        raise ValueError(f"no flag catalogs for {engine}")
    if version and version in known:
        chosen = version
    elif version:
        chosen = nearest_version(known, version)
    else:
        chosen = known[-1]
    return Catalog(engine, chosen, version, load(engine, chosen))
