"""The "Applies when" grammar of findings/FORMAT.md: one condition is `key: value`.

`parse` turns a written condition into a checkable form or raises ValueError
saying what was expected (the markdown reader adds the file and line). `infer`
gives a finding that states no conditions the ones its own record implies: its
engine, MoE when it names experts, and the log lines its symptoms quote. Nothing
here reads a run: kb/match.py evaluates conditions against the evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from kb.hardware import PLATFORMS, arch_platform, gpu_platform, platform_name, platforms_named
from kb.records import Condition, Finding

CONTEXT_KEYS = ("engine", "platform", "gpu", "gpu arch", "gpu count", "interconnect", "model", "model family",
                "experts", "quantization", "params", "context", "setting")
EVIDENCE_KEYS = ("signal", "log", "log regex", "text")
KEYS = CONTEXT_KEYS + EVIDENCE_KEYS
NUMERIC_KEYS = ("gpu count", "experts", "params", "context")
ENGINES = ("sglang", "vllm", "trtllm", "any")
TRAITS = ("moe", "dense", "mla", "hybrid", "multimodal")
OPS = ("<=", ">=", "!=", "==", "<", ">", "=")

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_.+-]*$")
_CMP = re.compile(r"^(<=|>=|!=|==|<|>|=)?\s*([0-9][0-9.]*)\s*([kKmMbBtT]?)$")
_VERSION = re.compile(r"^(<=|>=|!=|==|<|>|=)?\s*v?(\d+(?:\.\d+){0,3}(?:\.?post\d+|rc\d+)?)$")
_QUOTED = re.compile(r'^"(.+)"$', re.S)
_TICKED = re.compile(r"^`(.+)`$", re.S)
_SETTING = re.compile(r"^--?(?P<name>[a-z0-9][a-z0-9_-]*)\s*(?P<rest>.*)$"
                      r"|^(?P<name2>[a-z0-9][a-z0-9_-]*)\s*(?P<rest2>.*)$", re.I)


@dataclass(frozen=True)
class Parsed:
    key: str
    names: tuple[str, ...] = ()  # any-of names (engine, gpu, arch, family, quantization, signal); all-of traits
    compare: tuple[tuple[str, float], ...] = ()  # numeric comparisons, all must hold
    versions: tuple[tuple[str, str, str], ...] = ()  # (engine, comparison, version), all must hold
    setting: str | None = None  # canonical setting name, e.g. max-running-requests
    op: str | None = None  # present, absent, <, <=, >, >=, =, !=
    operand: str | None = None
    pattern: str | None = None  # log / text literal, or regex source
    regex: re.Pattern | None = field(default=None, compare=False)

    @property
    def evidence(self) -> bool:
        return self.key in EVIDENCE_KEYS


def _names(value: str, what: str) -> tuple[str, ...]:
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise ValueError(f"expected {what}")
    return names


def _compare(key: str, value: str) -> tuple[tuple[str, float], ...]:
    out = []
    for part in [p.strip() for p in value.split(",") if p.strip()]:
        m = _CMP.match(part.replace(" ", ""))
        unit = (m.group(3) if m else "").lower()
        ok = m and (unit == "" or (key == "params" and unit in "bmt") or (key == "context" and unit in "km"))
        if not ok:
            hint = "params in billions, e.g. >=100B" if key == "params" else "e.g. >=4 or >=64,<=512"
            raise ValueError(f"{key}: expected a number or comparisons ({hint}), got {part!r}")
        try:
            n = float(m.group(2))
        except ValueError:
            raise ValueError(f"{key}: expected a number, got {part!r}") from None
        n *= {"k": 1024 if key == "context" else 1, "m": 1e-3 if key == "params" else 2**20,
              "t": 1000, "b": 1, "": 1}[unit]
        out.append(("==" if m.group(1) in (None, "=") else m.group(1), n))
    if not out:
        raise ValueError(f"{key}: expected a number or comparisons, e.g. >=4")
    return tuple(out)


def _engine(value: str) -> Parsed:
    """`sglang`, `vllm, sglang`, `sglang >=0.5.0,<0.5.10`, or a range per engine:
    `vllm >=0.10.2, sglang >=0.5.8` (comparisons belong to the engine named before them)."""
    names: list[str] = []
    versions: list[tuple[str, str, str]] = []
    for part in [p.strip() for p in value.split(",") if p.strip()]:
        m = re.match(r"^([A-Za-z][\w-]*)\s*(.*)$", part)
        if m and not re.match(r"^v?\d", part):
            name, rest = m.group(1).lower(), m.group(2).strip()
            if name not in ENGINES:
                raise ValueError(f"engine: expected sglang, vllm or trtllm (comma-separated), each optionally "
                                 f"followed by a version range like >=0.5.0,<0.5.10; got {part!r}")
            names.append(name)
            part = rest
            if not part:
                continue
        if not names:
            raise ValueError(f"engine: expected an engine name before the version range, got {value!r}")
        vm = _VERSION.match(part.replace(" ", ""))
        if not vm:
            raise ValueError(f"engine: expected version comparisons like >=0.5.0,<0.5.10, got {part!r}")
        versions.append((names[-1], "==" if vm.group(1) in (None, "=") else vm.group(1), vm.group(2)))
    if not names:
        raise ValueError(f"engine: expected sglang, vllm or trtllm, got {value!r}")
    return Parsed("engine", names=tuple(names), versions=tuple(versions))


def _setting(value: str) -> Parsed:
    m = _SETTING.match(value.strip())
    if not m:
        raise ValueError("setting: expected a setting name then present, absent, a comparison or '= value', got "
                         f"{value!r}")
    name = (m.group("name") or m.group("name2")).lower().replace("_", "-")
    rest = (m.group("rest") if m.group("name") else m.group("rest2")).strip()
    if rest.lower() in ("present", "absent", "on", "off"):
        op = {"on": "present", "off": "absent"}.get(rest.lower(), rest.lower())
        return Parsed("setting", setting=name, op=op)
    om = re.match(r"^(<=|>=|!=|==|<|>|=)\s*(\S.*)$", rest)
    if not om:
        raise ValueError(f"setting {name}: expected present, absent, a comparison (<256, >=0.9) or '= value', "
                         f"got {rest or 'nothing'!r}")
    op = "=" if om.group(1) == "==" else om.group(1)
    operand = om.group(2).strip().strip('"`')
    if op in ("<", "<=", ">", ">="):
        try:
            float(operand)
        except ValueError:
            raise ValueError(f"setting {name}: {op} needs a number, got {operand!r}") from None
    return Parsed("setting", setting=name, op=op, operand=operand)


@lru_cache(maxsize=4096)
def parse(key: str, value: str) -> Parsed:
    """A checkable condition, or ValueError naming what was expected."""
    key = " ".join(key.lower().split())
    value = value.strip()
    if key not in KEYS:
        raise ValueError(f"unknown condition key {key!r}; expected one of: {', '.join(KEYS)}")
    if not value:
        raise ValueError(f"{key}: expected a value")
    if key == "engine":
        return _engine(value)
    if key in NUMERIC_KEYS:
        return Parsed(key, compare=_compare(key, value))
    if key == "setting":
        return _setting(value)
    if key == "model":
        traits = tuple(t.lower() for t in _names(value, "model traits"))
        bad = [t for t in traits if t not in TRAITS]
        if bad:
            raise ValueError(f"model: expected traits among {', '.join(TRAITS)}, got {', '.join(bad)}")
        return Parsed(key, names=traits)
    if key in ("log", "text"):
        m = _QUOTED.match(value)
        if not m or not m.group(1).strip():
            raise ValueError(f'{key}: expected a text in double quotes, e.g. "Using default MoE kernel config"')
        return Parsed(key, pattern=m.group(1))
    if key == "log regex":
        m = _TICKED.match(value)
        if not m:
            raise ValueError(r"log regex: expected a Python regular expression in backticks, e.g. `KV cache pool is "
                             r"full\.`")
        try:
            rx = re.compile(m.group(1), re.I)
        except re.error as e:
            raise ValueError(f"log regex: not a valid regular expression ({e})") from None
        return Parsed(key, pattern=m.group(1), regex=rx)
    if key == "platform":
        names = _names(value, "platforms like rocm, npu")
        bad = [n for n in names if not platform_name(n)]
        if bad:
            raise ValueError(f"platform: expected {', '.join(PLATFORMS)} (comma-separated), got {', '.join(bad)}")
        return Parsed(key, names=tuple(dict.fromkeys(platform_name(n) for n in names)))
    if key == "gpu arch":
        names = _names(value, "architectures like SM90, SM120, gfx942")
        bad = [n for n in names if not re.match(r"^(sm\d{2,3}|gfx\d{3}[a-z]?)$", n, re.I)]
        if bad:
            raise ValueError(f"gpu arch: expected SM90, SM100, SM120, gfx942, ...; got {', '.join(bad)}")
        return Parsed(key, names=tuple(n.upper() if n.lower().startswith("sm") else n.lower() for n in names))
    if key in ("signal", "model family", "quantization"):
        names = tuple(n.lower() for n in _names(value, f"{key} names"))
        bad = [n for n in names if not _SLUG.match(n)]
        if bad:
            raise ValueError(f"{key}: expected slugs like {'throughput-plateau' if key == 'signal' else 'fp8'}, "
                             f"got {', '.join(bad)}")
        return Parsed(key, names=names)
    return Parsed(key, names=_names(value, f"{key} names"))  # gpu, interconnect


# ------------------------------------------------------------------ inferred conditions

# a quoted log text: a warning or error the engine prints (not a flag, not a number)
_LOG_WORDS = re.compile(r"warn|error|exception|fail|not found|fall(?:ing)? ?back|default|disabled|not supported|"
                        r"deprecat|out of memory|oom|timeout|retract|preempt|using |cannot|unable|invalid|"
                        r"does not|doesn't|sub-?optimal|degrad|not enough|exceed", re.I)
_QUOTE_IN_TEXT = re.compile(r'"([^"]{12,300})"|`([^`]{12,300})`')
_MOE_FAMILIES = {"deepseek", "kimi", "qwen3-moe", "mixtral", "gpt-oss", "minimax"}
MOE_BOUND = {"moe-kernel-config", "moe-runner-backend", "expert-parallelism"}  # fixes that exist only with experts


# a quote the prose introduces as a warning or an error (not any line a log prints: an
# ordinary start-up line such as "available_gpu_mem=... GB" is no symptom)
_SAYS_LOG = re.compile(r"\b(?:warns?|warnings?|warned|errors?|errored|complains?|fails? with|raises?)\b[^\"`]{0,40}$",
                       re.I)


def quoted_log_lines(text: str) -> list[str]:
    """Texts quoted in prose that read like a log line about a problem (a warning, an
    error; or a quote the prose introduces as one), not a command."""
    out = []
    text = text or ""
    for m in _QUOTE_IN_TEXT.finditer(text):
        q = (m.group(1) or m.group(2)).strip()
        said = bool(_SAYS_LOG.search(text[max(0, m.start() - 60):m.start()]))
        if q.startswith(("-", "$", "python", "vllm ", "sglang ", "export ", "nvidia-smi")) or not (
                said or _LOG_WORDS.search(q)) or len(q.split()) < 4:  # a fragment matches too much
            continue
        if q not in out:
            out.append(q)
    return out


_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")


def log_condition(quote: str, inferred: bool = True) -> Condition:
    """A quoted log text as a condition: a literal, or a regex when it carries numbers
    (they differ between runs)."""
    # of an elided quote, the longest part: a pasted line is often cut where the quote elides
    part = max((p for p in _ELLIPSIS.split(quote.strip()) if p), key=len, default=quote.strip())
    if not re.search(r"\d", part):
        return Condition(key="log", value='"' + part.replace('"', "'") + '"', inferred=inferred)
    rx = re.sub(r"\\d\+|\d+", r"\\d+", re.escape(part)).replace("`", ".")
    return Condition(key="log regex", value=f"`{rx}`", inferred=inferred)


def finding_platform(f: Finding) -> str | None:
    """The one platform a finding is about, or None (generic, or several).

    From its written gpu / gpu arch conditions first (the author said where it applies).
    Else from where it was measured and its title and tags, but only a platform other than
    CUDA: nearly every finding was measured on NVIDIA GPUs and is written for any GPU (a
    chunked-prefill finding measured on H100 holds on MI300X), while a ROCm, Ascend, Gaudi,
    XPU, TPU or CPU finding is written about that stack (its images, kernels, runtime)."""
    written: set[str | None] = set()
    for c in f.applies_when:
        if c.key in ("gpu", "gpu arch"):
            for n in c.value.split(","):
                written.add(arch_platform(n) if c.key == "gpu arch" else gpu_platform(n.strip()))
    if written:
        return written.pop() if len(written) == 1 and None not in written else None
    ctx = f.context
    named = platforms_named(" ".join([f.title, " ".join(f.tags)]))
    named |= {p for p in (gpu_platform(ctx.gpu), arch_platform(ctx.arch())) if p}
    named.discard("cuda")
    return named.pop() if len(named) == 1 else None


# Messages printed below the engine: the CUDA runtime through PyTorch, ptxas, the HIP
# runtime. When one is a finding's symptom and its fix is to that environment (driver,
# toolkit, wheels), the engine it was reported on does not bound it: sglang issue 7249
# prints the same "no kernel image is available" on an RTX 5090 as vLLM issue 16901, for
# the same reason (a build without sm_120 kernels) and with the same fix.
_RUNTIME_MESSAGE = re.compile(r"no kernel image is available|CUDA error:|ptxas|cudaError\w+|HIP error|hipError\w+|"
                              r"CUDA driver version is insufficient", re.I)
ENVIRONMENT_FIXES = {"driver-environment"}


def engine_generic(f: Finding) -> bool:
    """True when the finding's symptom is a runtime message and its fix is the environment."""
    if not set(f.fix_classes[:1]) & ENVIRONMENT_FIXES:
        return False
    logs = [c.value for c in f.applies_when if c.key in ("log", "log regex")]
    logs = logs or quoted_log_lines(" ; ".join(f.symptoms))
    return any(_RUNTIME_MESSAGE.search(t) for t in logs)


def infer(f: Finding) -> list[Condition]:
    """Conditions a finding implies when it writes none of that key itself."""
    have = {c.key for c in f.applies_when}
    out: list[Condition] = []
    c = f.context
    if "engine" not in have and c.engine in ("sglang", "vllm", "trtllm") and not engine_generic(f):
        out.append(Condition(key="engine", value=c.engine, inferred=True))
    platform = finding_platform(f) if "platform" not in have else None
    if platform:
        out.append(Condition(key="platform", value=platform, inferred=True))
    moe = bool(c.experts) or (c.model_family or "") in _MOE_FAMILIES
    # measured on a MoE model is not "only for MoE models": a KV-cache or attention fix seen
    # on DeepSeek holds for a dense model too; only a fix to the experts' own path needs experts
    if "model" not in have and moe and set(f.fix_classes[:1]) & MOE_BOUND:
        out.append(Condition(key="model", value="moe", inferred=True))
    if not any(k in have for k in ("log", "log regex")):
        for q in quoted_log_lines(" ; ".join(f.symptoms)):
            out.append(log_condition(q))
    return out


def all_conditions(f: Finding) -> list[Condition]:
    return [*f.applies_when, *infer(f)]
