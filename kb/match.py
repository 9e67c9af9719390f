"""Findings are rules: every finding's conditions checked against a run's evidence.

Each condition of a finding ("Applies when", findings/FORMAT.md, plus the ones
kb.conditions infers) is held, unknown (the run does not say) or failed. A failed
context condition excludes the finding. What remains is scored: a matched evidence
condition (a log line, a regex, a phrase, a detected signal) counts far more than
context; then how close the finding's measured context is to this run
(`similarity`); then text similarity between the run's salient lines and
the finding, from the same index `kb ask` searches.

This module only judges; kb/recommend.py turns the matches into recommendations.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from kb import conditions as cond
from kb.errors import ODD_VALUE
from kb.evidence import RunEvidence, TextLine
from kb.flagdata import version_key
from kb.flags import Catalog
from kb.hardware import arch_platform, gpu_arch, gpu_platform, lookup_gpu, platform_name, platforms_named
from kb.records import SEVERITY_ORDER, Condition, Finding, Signal
from kb.vocab import FIX_CLASS_WORDS, MODELS, QUANTIZATIONS, model_in

HELD, UNKNOWN, FAILED = "held", "unknown", "failed"

# how much one held condition adds to a finding's match strength
EVIDENCE_WEIGHT = {"log": 3.0, "log regex": 3.0, "signal": 2.0, "text": 2.0}
CONTEXT_WEIGHT = 0.25
TEXT_WEIGHT = 1.5  # text similarity 0..1 → up to this much
TEXT_TOP = 8  # only the best few text hits count as similar
NAMED_BONUS = 0.3  # a text hit whose class the prose names ("fp8 kv cache is slower"): the user's own pointer
MOE_FAMILIES = {"deepseek", "kimi", "qwen3-moe", "mixtral", "gpt-oss", "minimax", "glm"}
# families kb.vocab names only for MLA models: DeepSeek-V3/V3.1/V3.2/R1 and Kimi-K2 (a V3-shaped model)
MLA_FAMILIES = {"deepseek", "kimi"}

Search = Callable[[str], list[tuple[Finding, float]]]


@dataclass
class Check:
    condition: Condition
    state: str  # held / unknown / failed
    detail: str  # what the run showed (or did not)

    @property
    def evidence(self) -> bool:
        return self.condition.key in cond.EVIDENCE_KEYS


@dataclass
class Match:
    finding: Finding
    checks: list[Check]
    closeness: float = 0.0  # 0..1, context of the measurement against this run
    text: float = 0.0  # 0..1, text similarity of the evidence to the finding
    score: float = 0.0
    named: bool = False  # the run's prose names the finding's fix class (classes_named)

    @property
    def wording(self) -> float:
        """How closely the run's words point at this finding: its text similarity, plus
        NAMED_BONUS when it is among the text hits and the prose names its class."""
        return round(self.text + NAMED_BONUS, 3) if self.named and self.text > 0 else self.text

    @property
    def excluded(self) -> list[Check]:
        return [c for c in self.checks if not c.evidence and c.state == FAILED]

    @property
    def hits(self) -> list[Check]:
        return [c for c in self.checks if c.evidence and c.state == HELD]

    @property
    def context_held(self) -> list[Check]:
        return [c for c in self.checks if not c.evidence and c.state == HELD and not c.condition.inferred]

    @property
    def specific_held(self) -> list[Check]:
        """Held context conditions that narrow the setup: not the engine (most findings name
        one) and not a setting's absence (almost every run lacks almost every flag)."""
        return [c for c in self.context_held if c.condition.key != "engine"
                and not (c.condition.key == "setting" and cond.parse("setting", c.condition.value).op == "absent")]

    @property
    def symptom(self) -> bool:
        """A matched log line, regex or phrase; or a matched signal when every context
        condition the author wrote held (a signal such as a plateau has many causes: the
        finding must be about this setup to claim it)."""
        if any(c.condition.key != "signal" for c in self.hits):
            return True
        return bool(self.hits) and all(c.state == HELD for c in self.context_written)

    @property
    def evidence_written(self) -> bool:
        return any(c.evidence and not c.condition.inferred for c in self.checks)

    @property
    def context_written(self) -> list[Check]:
        return [c for c in self.checks if not c.evidence and not c.condition.inferred]


# words before a flag in a sentence that say the server does not (yet) run with it
_NOT_USED_BEFORE = re.compile(r"\b(?:requires?|required|needs?|needed|without|missing|no|not|never|should|could|"
                              r"would|try|trying|tried|suggest\w*|recommend\w*|consider\w*|instead|unset|remov\w*|"
                              r"drop\w*|add(?:ing)?|whether|if)\b|n't\b", re.I)
_NOT_USED_AFTER = re.compile(r"[^.;!?]{0,40}\b(?:to be set|is required|are required|is missing|helps?|fix(?:es|ed)?)\b",
                             re.I)


@functools.lru_cache(maxsize=1024)
def _flag_said(flags: tuple[str, ...]) -> re.Pattern[str]:
    """One flag (any of its spellings) with its value, as prose writes it: compiled once per
    setting, not once per finding condition checked."""
    return re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, flags)) + r")(?:[ =]([^\s`'\",;]+))?(?![\w-])")


@dataclass
class Facts:
    """What the run shows, in the shape conditions ask about."""

    ev: RunEvidence
    engine: str | None
    catalog: Catalog | None
    signals: dict[str, Signal]
    lines: list = field(default_factory=list)  # TextLine, plus signal and event texts

    @classmethod
    def of(cls, ev: RunEvidence, engine: str | None, catalog: Catalog | None, signals: list[Signal]) -> "Facts":
        lines = list(ev.text)
        for t in ev.traces:  # one-off events the log parsers kept (a long log's text keeps only notable lines)
            lines += [TextLine(text=e.text, where=e.where, kind="log") for e in t.events]
        return cls(ev, engine, catalog, {s.id: s for s in signals}, lines)

    # -------------------------------------------------------------- settings
    def setting(self, name: str) -> tuple[bool, object, str | None]:
        """(the run states its settings, value or None, flag spelling for this version)."""
        known = bool(self.ev.server_args or self.ev.launch_argv)
        flag = resolve_flag(f"--{name}", self.engine, self.catalog)[0] if self.engine else None
        names = [name]
        if flag and self.catalog:
            info = self.catalog.flags.get(flag) or {}
            names = [flag, *(info.get("aliases") or []), info.get("dest") or flag, name]
        value = self.ev.arg(*names)
        if value is None:
            keys = {n.lstrip("-").replace("-", "_") for n in names}
            value = next((t.startup[k] for t in self.ev.traces for k in keys if t.startup.get(k) is not None), None)
            known = known or value is not None
        if value is None:
            value = self._said(names)
            known = known or value is not None
        return known, value, flag

    def _said(self, names: list[str]) -> object:
        """A flag the prose says the server runs with ("we serve with `--reasoning-parser gemma4`"):
        its value, True for a switch, None when no prose line names it. Without this a finding
        whose fix is that flag was proposed to someone who wrote they already use it."""
        flags = [n for n in names if n.startswith("--")]
        if not flags:
            return None
        rx = _flag_said(tuple(flags))
        for t in self.lines:
            if t.kind != "prose":
                continue
            for m in rx.finditer(t.text):
                before = re.split(r"[.;:!?]\s", t.text[max(0, m.start() - 80):m.start()])[-1]
                if _NOT_USED_BEFORE.search(before) or _NOT_USED_AFTER.match(t.text, m.end()):
                    continue  # "requires --x to be set", "without --x", "should I add --x": not how it runs
                v = m.group(1)
                return True if v is None or v.startswith("-") else v
        return None

    def family(self) -> str | None:
        """The model family from config.json, else as the served path or the prose names it."""
        m = self.ev.model
        path = self.ev.model_path
        named = model_in(path) if isinstance(path, str) else None
        if m and m.family:
            # config.json names the family coarsely (model_type qwen3_moe → qwen); the served
            # name says which one (Qwen/Qwen3-30B-A3B → qwen3-moe), as findings' conditions do
            return named[1] if named and named[1].startswith(m.family) else m.family
        return (named[1] if named else None) or self.ev.text_context.get("model_family")

    def prose(self) -> str:
        """The run's prose (and a short pasted log), as one text: what its facts were read from
        when no config.json, launch command or server log stated them."""
        return "\n".join(t.text for t in self.ev.text if t.kind == "prose")

    def named(self, table: list[tuple], stated) -> tuple[str, ...]:
        """Every value of a kb.vocab table (last column) the prose names, when the fact itself
        came from prose: prose often names several setups (the one that failed, the one
        compared with), and the first named is not reliably the run's."""
        if stated is None:
            return ()
        text = self.prose()
        return tuple(dict.fromkeys(row[-1] for row in table if re.search(row[0], text, re.I)))

    @cached_property
    def platform(self) -> tuple[str | None, str]:
        """(the run's platform or None, what it was read from). The GPUs the run states
        decide, then a --device it was launched with, then the words of its text, launch and
        model (GPU names, ROCm, Ascend, sm_120, an image such as rocm/vllm): when those name
        several platforms (a comparison, a migration) the platform is unknown."""
        hw = self.ev.hardware
        if hw and (hw.gpu or hw.arch):
            p = gpu_platform(hw.gpu) or arch_platform(hw.arch)
            if p:
                return p, f"GPU {hw.gpu or hw.arch}"
        device = platform_name(str(self.ev.arg("device") or ""))
        if device:
            return device, f"--device {device}"
        named = platforms_named(run_words(self.ev))
        gpu = self.ev.text_context.get("gpu")
        if gpu_platform(gpu):
            named.add(gpu_platform(gpu))
        if len(named) == 1:
            p = next(iter(named))
            return p, f"the run names {gpu if gpu and gpu_platform(gpu) == p else p}"
        if named:
            return None, f"the run names several platforms ({', '.join(sorted(named))})"
        return None, "the run names no GPU, device or platform"

    def default(self, flag: str | None):
        if not flag or not self.catalog:
            return None
        return (self.catalog.flags.get(flag) or {}).get("default")


# ------------------------------------------------------------------ condition checks


def _cmp(a: float, op: str, b: float) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "=": a == b, "!=": a != b}[op]


def _num_check(p: cond.Parsed, value, what: str) -> tuple[str, str]:
    if value is None:
        return UNKNOWN, f"{what} unknown"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return UNKNOWN, f"{what} {value!r} is not a number"
    ok = all(_cmp(v, op, n) for op, n in p.compare)
    return (HELD if ok else FAILED), f"{what} {value:g}" if isinstance(value, float) else f"{what} {value}"


def _names_check(names: tuple[str, ...], value: str | None, what: str, also: tuple[str, ...] = ()) -> tuple[str, str]:
    """`also`: the other values the prose names beside `value` (a fact read from prose);
    the condition holds when it names any of them."""
    if not value:
        return UNKNOWN, f"{what} unknown"
    want = {n.lower() for n in names}
    for v in (value, *also):
        if str(v).lower() in want:
            return HELD, f"{what} {v}" + (" (one of those the text names)" if v != value else "")
    return FAILED, f"{what} {value}" + (f" (the text names {', '.join(also)})" if len(also) > 1 else "")


def _path_family(f: "Facts") -> str | None:
    path = f.ev.model_path
    named = model_in(path) if isinstance(path, str) else None
    return named[1] if named else None


# the total parameter count a model's name states: Qwen3-8B, Llama-3.1-70B-Instruct, Qwen3-235B-A22B
# (235, not the 22 active); not a version (Qwen2.5) nor a context (128k). Mixtral-8x7B says
# neither (46.7B in total: the experts share attention), so it gives none
PARAMS_NAME = re.compile(r"(?<![\w.])(?:(\d+)x)?(\d+(?:\.\d+)?)B(?![\w.])", re.I)


def _params_in_name(path) -> float | None:
    if not isinstance(path, str):
        return None
    m = PARAMS_NAME.search(path.rsplit("/", 1)[-1].replace("_", "-"))
    if not m:
        return None
    return None if m.group(1) else float(m.group(2))


# a model name that states its active parameters (Qwen3-30B-A3B, Qwen3.5-397B-A17B,
# ERNIE-4.5-21B-A3B) or says MoE names a mixture-of-experts model, whatever its family
MOE_NAME = re.compile(r"\d(?:\.\d+)?B-A\d+(?:\.\d+)?B\b|\bmoe\b", re.I)


def _model_traits(p: cond.Parsed, f: Facts) -> tuple[str, str]:
    m = f.ev.model
    family = f.family()
    states, said = [], []
    for t in p.names:
        if t in ("moe", "dense"):
            names = " ".join(x for x in (f.ev.model_path if isinstance(f.ev.model_path, str) else "",
                                         f.prose()) if x)
            if m is not None:
                is_moe = m.is_moe
            elif family in MOE_FAMILIES or MOE_NAME.search(names):
                is_moe = True
            elif family:
                is_moe = False
            else:
                states.append(UNKNOWN)
                said.append(f"{t}: model unknown")
                continue
            states.append(HELD if is_moe == (t == "moe") else FAILED)
            said.append("MoE" if is_moe else "dense")
        elif t == "mla":
            if not (m and m.attention) and family in MLA_FAMILIES:
                states.append(HELD)  # no config.json, but every model of the family uses MLA
                said.append(f"MLA ({family} family)")
            elif not m or not m.attention:
                states.append(UNKNOWN)
                said.append("attention kind unknown")
            else:
                states.append(HELD if m.attention == "MLA" else FAILED)
                said.append(f"attention {m.attention}")
        else:  # hybrid, multimodal: told by the architecture's name
            arch = (m.architecture or "") if m else ""
            words = {"hybrid": r"mamba|hybrid|jamba|next|nemotronh|falconh|deltanet|linear",
                     "multimodal": r"vl|vision|conditionalgeneration|llava|omni|image"}[t]
            if not arch:
                states.append(UNKNOWN)
                said.append(f"{t}: architecture unknown")
            else:
                states.append(HELD if re.search(words, arch, re.I) else FAILED)
                said.append(f"architecture {arch}")
    state = FAILED if FAILED in states else UNKNOWN if UNKNOWN in states else HELD
    return state, ", ".join(said)


def _quantization(f: Facts) -> str | None:
    m = f.ev.model
    if m and m.quantization:
        return m.quantization
    q = f.ev.arg("quantization") or f.ev.text_context.get("quantization")
    if q:
        return str(q)
    if m and m.dtype:
        return {"bfloat16": "bf16", "float16": "fp16"}.get(m.dtype, m.dtype)
    return None


def _find(f: Facts, test: Callable[[str], bool], kinds: tuple[str, ...] = ("log", "prose")) -> tuple[str, str]:
    lines = [t for t in f.lines if t.kind in kinds]
    if not lines:
        return UNKNOWN, "no prose in this run" if kinds == ("prose",) else "no log or text in this run"
    for t in lines:
        if test(t.text):
            where = f"{t.where}: " if t.where else ""
            return HELD, f"{where}{t.text[:200]}"
    return FAILED, f"not in {len(lines)} lines of log and text"


def _norm_text(s: str) -> str:
    return " ".join(re.sub(r"[^\w%+.-]+", " ", s.lower()).split())


def check(c: Condition, f: Facts) -> Check:
    try:
        p = cond.parse(c.key, c.value)
    except ValueError as e:  # a record stored before its condition was valid: never fatal here
        return Check(c, UNKNOWN, f"not checkable: {e}")
    ev, hw, m = f.ev, f.ev.hardware, f.ev.model
    k = p.key
    if k == "engine":
        if not f.engine:
            return Check(c, UNKNOWN, "engine unknown")
        if "any" not in p.names and f.engine not in p.names:
            return Check(c, FAILED, f"engine {f.engine}")
        ranges = [(op, v) for eng, op, v in p.versions if eng == f.engine]
        if not ranges:
            return Check(c, HELD, f"engine {f.engine}")
        if not ev.engine_version:
            # an unstated version is checked as the newest catalog (the one the run's flags are
            # checked against, with a warning saying so): a range that includes it holds; one
            # that ends before it (an old bug, fixed since) stays unknown, as the run may be old
            newest = f.catalog.version if f.catalog and f.catalog.engine == f.engine else None
            if newest and all(_cmp(version_key(newest), op, version_key(v)) for op, v in ranges):
                return Check(c, HELD, f"engine {f.engine}, version unknown: taken as {newest}, "
                                      "the version its flags are checked against")
            return Check(c, UNKNOWN, f"engine {f.engine}, version unknown")
        ok = all(_cmp(version_key(ev.engine_version), op, version_key(v)) for op, v in ranges)
        return Check(c, HELD if ok else FAILED, f"{f.engine} {ev.engine_version}")
    if k == "platform":
        platform, said = f.platform
        if not platform:
            return Check(c, UNKNOWN, f"platform unknown: {said}")
        return Check(c, HELD if platform in p.names else FAILED, f"platform {platform} ({said})")
    named = ev.text_context.get("gpu")  # a GPU the text names, its count unsaid
    if k == "gpu":
        gpu = hw.gpu if hw else named
        if not gpu:
            return Check(c, UNKNOWN, "GPU unknown")
        want = {(lookup_gpu(n).name if lookup_gpu(n) else n).lower() for n in p.names}
        return Check(c, HELD if gpu.lower() in want else FAILED, f"GPU {gpu}")
    if k == "gpu arch":
        return Check(c, *_names_check(p.names, hw.arch if hw else gpu_arch(named), "architecture"))
    if k == "gpu count":
        return Check(c, *_num_check(p, hw.count if hw else None, "GPU count"))
    if k == "interconnect":
        if not hw or not hw.interconnect:
            return Check(c, UNKNOWN, "interconnect unknown")
        ok = any(hw.interconnect.lower().startswith(n.lower()) for n in p.names)
        return Check(c, HELD if ok else FAILED, f"interconnect {hw.interconnect}")
    if k == "model":
        return Check(c, *_model_traits(p, f))
    if k == "model family":
        family = f.family()
        prose_only = family is not None and not (m and m.family) and not _path_family(f)
        return Check(c, *_names_check(p.names, family, "model family",
                                      also=f.named(MODELS, family) if prose_only else ()))
    if k == "experts":
        value = (m.experts if m.is_moe else 0) if m else None
        return Check(c, *_num_check(p, value, "routed experts"))
    if k == "params":
        if m and m.params_b:
            return Check(c, *_num_check(p, m.params_b, "parameters (B)"))
        return Check(c, *_num_check(p, _params_in_name(f.ev.model_path), "parameters (B), from the model's name"))
    if k == "context":
        known, value, _ = f.setting("context-length") if f.engine else (False, None, None)
        return Check(c, *_num_check(p, value or (m.context_len if m else None), "context length"))
    if k == "quantization":
        q = _quantization(f)
        prose_only = q is not None and not (m and (m.quantization or m.dtype)) and not f.ev.arg("quantization")
        return Check(c, *_names_check(p.names, q, "quantization",
                                      also=f.named(QUANTIZATIONS, q) if prose_only else ()))
    if k == "setting":
        return _setting_check(c, p, f)
    if k == "signal":
        hit = [s for s in p.names if s in f.signals]
        if hit:
            s = f.signals[hit[0]]
            return Check(c, HELD, f"signal {s.id} ({s.severity}): {s.summary}")
        if not ev.bench and not ev.traces:
            return Check(c, UNKNOWN, "no benchmark or server log to detect it from")
        return Check(c, FAILED, "not detected")
    if k == "log":
        needle = p.pattern.lower()
        return Check(c, *_find(f, lambda t: needle in t.lower()))
    if k == "log regex":
        return Check(c, *_find(f, lambda t: bool(p.regex.search(t))))
    if k == "text":  # what people write: prose, not a tool's table or a log
        needle = _norm_text(p.pattern)
        if not needle:  # punctuation only ("!!!!" as garbled output): normalising would leave "", in every line
            raw = p.pattern.strip().lower()
            return Check(c, *_find(f, lambda t: raw in t.lower(), kinds=("prose",)))
        # whole words: a short phrase must not fire inside another word ("ViT" in "connectivity")
        words = re.compile(r"(?<!\w)" + re.escape(needle) + r"(?!\w)")
        return Check(c, *_find(f, lambda t: bool(words.search(_norm_text(t))), kinds=("prose",)))
    return Check(c, UNKNOWN, "not checkable")


def _safe_check(c: Condition, f: Facts) -> Check:
    """A condition on a server argument of an unexpected value (a list where one value was
    meant, `True` for a path) is unknown on this run, never a traceback."""
    try:
        return check(c, f)
    except ODD_VALUE as e:
        return Check(c, UNKNOWN, f"not checkable on this run ({type(e).__name__}: {str(e)[:80]})")


def _setting_check(c: Condition, p: cond.Parsed, f: Facts) -> Check:
    if not f.engine:
        return Check(c, UNKNOWN, "engine unknown: settings cannot be resolved")
    known, value, flag = f.setting(p.setting)
    shown = flag or f"--{p.setting}"
    if not known:
        return Check(c, UNKNOWN, "the run's server settings are unknown")
    if flag is None and value is None:
        return Check(c, UNKNOWN, f"--{p.setting} is not a {f.engine} {f.catalog.version if f.catalog else ''} setting")
    # a value equal to the version's default (sglang's dump writes `moe_runner_backend='auto'`)
    # is the setting left alone, not a choice someone made
    default = f.default(flag) if flag else None
    set_ = value is not None and value is not False and not (default is not None and str(value) == str(default))
    if p.op == "present":
        return Check(c, HELD if set_ else FAILED, f"{shown} {'set' if set_ else 'not set'}")
    if p.op == "absent":
        return Check(c, FAILED if set_ else HELD, f"{shown} {'set to ' + str(value) if set_ else 'not set'}")
    if value is None:
        value = f.default(flag)
        if value is None:
            # the launch is known and does not set it: "> n", ">= n" or "= v" asks for a value
            # someone set, so it fails; "< n" or "!= v" may hold for the start-up choice
            if p.op in (">", ">=", "="):
                return Check(c, FAILED, f"{shown} not set (its default is decided at start-up)")
            return Check(c, UNKNOWN, f"{shown} not set, and its default is decided at start-up")
    if p.op in ("=", "!="):
        same = str(value).lower() == p.operand.lower() or (value is True and p.operand.lower() in ("true", "on"))
        return Check(c, HELD if same == (p.op == "=") else FAILED, f"{shown} {value}")
    try:
        ok = _cmp(float(value), p.op, float(p.operand))
    except (TypeError, ValueError):
        return Check(c, UNKNOWN, f"{shown} {value!r} is not a number")
    return Check(c, HELD if ok else FAILED, f"{shown} {value}")


# ------------------------------------------------------------------ flags across versions


def resolve_flag(flag: str, engine: str, catalog: Catalog | None) -> tuple[str | None, str | None]:
    """(the spelling this engine version takes, a note when it differs) or (None, why not)."""
    if catalog is None:
        return None, "no flag catalog"
    return catalog.resolve(flag)


# ------------------------------------------------------------------ scoring

# how much each part of the context counts towards similarity
WEIGHTS = {"engine": 0.2, "arch": 0.25, "family": 0.25, "interconnect": 0.1, "quantization": 0.1,
           "version": 0.05, "gpu_count": 0.05}
COVERS = 0.6  # similarity at which a finding's gain is taken as the expected gain


def _same(a, b) -> float | None:
    if a is None or b is None:
        return None
    return 1.0 if str(a).lower() == str(b).lower() else 0.0


def similarity(ev: RunEvidence, f: Finding, engine: str) -> float:
    """0..1: a field unknown on either side counts half (a generic finding is half-relevant)."""
    c = f.context
    hw, m = ev.hardware, ev.model
    version = None
    if c.engine_version and ev.engine_version:
        version = 1.0 if c.engine_version.split(".")[:2] == ev.engine_version.split(".")[:2] else 0.0
    engine_match = None if (c.engine in (None, "any")) else _same(c.engine, engine)
    parts = {
        "engine": engine_match,
        "arch": _same(c.arch(), hw.arch if hw else None),
        "family": _same(c.model_family, m.family if m else None),
        "interconnect": _same(c.interconnect, hw.interconnect if hw else None),
        "quantization": _same(c.quantization, m.quantization if m else None),
        "version": version,
        "gpu_count": _same(c.gpu_count, hw.count if hw else None),
    }
    return sum(WEIGHTS[k] * (0.5 if v is None else v) for k, v in parts.items())




def evidence_query(f: Facts) -> str:
    """The run's own words, as one query for the index: warning and error lines of its
    logs and the lines of its prose. Empty when the run says nothing in words (a
    benchmark block and a launch command): then signals and context decide alone."""
    parts = [t.text for t in f.lines if t.kind == "log" and _LOGGED_PROBLEM.search(t.text)][:30]
    parts += [t.text for t in f.lines if t.kind == "prose" and _wordy(t.text)][:200]
    return "\n".join(parts)[:6000]


def title_queries(f: Facts) -> list[str]:
    """The first line of words in each prose file: a pasted issue's title, a note's heading.
    People put the problem there in a dozen words; searched alone it is not drowned by the
    setup tables and version lists of the body."""
    first: dict[str, str] = {}
    for t in f.lines:
        if t.kind == "prose" and _wordy(t.text):
            first.setdefault(t.where.path if t.where else "", t.text)
    return [q.lstrip("#*[ ").strip()[:300] for q in first.values()]


_TABLE_ROW = re.compile(r"^[\w ()/%.,#-]{1,60}:(?:\s+[-+\d.,]+\s*[\w/%]*|\s{2,}\S.*)\s*$"
                        r"|^[\s=|+*#-]*$|^\s*[=#*-]{3,}.*[=#*-]{3,}\s*$")
MIN_QUERY_WORDS = 4  # fewer distinct words than this is not a description of anything; a name with
# digits counts as a word ("tp4 pp2 on 8 pcie gpus", "l40s no nvlink": tp4, l40s, nvfp4 say the setup)
_THREE_WORDS = re.compile(r"[A-Za-z]{2,}\W+[A-Za-z]{2,}\W+[A-Za-z]{2,}")


def _wordy(text: str) -> bool:
    """A line of words, not a row of a tool's table ("Mean TTFT (ms): 123.4") or a rule line."""
    return bool(_THREE_WORDS.search(text)) and not _TABLE_ROW.match(text)


# a line a program printed about a problem (benchmark tables and launch commands are not)
_LOGGED_PROBLEM = re.compile(r"\b(?:WARNING|WARN|ERROR|CRITICAL|FATAL)\b|Traceback|\w+(?:Error|Exception):", re.I)


def text_scores(query: str, search: Search | None, eligible: Callable[[Finding], bool] = lambda f: True
                ) -> dict[str, float]:
    """Finding id → 0..1: the best hits of the evidence's text in the index, by rank among
    the hits that could be proposed for this run (`eligible`). A hit this run's facts exclude
    (another engine, another GPU) or one with no fix to offer takes no rank: otherwise a few
    such hits at the top would leave an applicable finding ranked too low to be proposed."""
    if search is None or len(set(re.findall(r"[a-z][a-z0-9]{2,}", query.lower()))) < MIN_QUERY_WORDS:
        return {}
    hits = [(f, s) for f, s in search(query) if eligible(f)][:TEXT_TOP]
    if not hits:
        return {}
    best = hits[0][1] or 1.0
    return {f.id: round(min(0.85 ** i, s / best), 3) for i, (f, s) in enumerate(hits)}


# Fix classes that only exist inside one feature: a LoRA adapter's slowness needs adapters,
# a vision encoder's needs images, a grammar's needs structured output, a hybrid model's
# state cache needs a hybrid (Mamba / linear-attention) model, AITER needs an AMD GPU, a VM
# fix needs a VM, a unified-memory fix needs such a machine. A run whose words, launch and
# setup never name the feature cannot have that problem, however close its other words are
# ("--enforce-eager slows decode" is not a LoRA problem because a LoRA finding also says
# enforce-eager). Beside kb.vocab's words for each class, the names people use for it.
FEATURE_WORDS: dict[str, tuple[str, ...]] = {
    "lora": ("lora", "adapter", "punica", "peft"),
    "multimodal-encoder": ("multimodal", "multi-modal", "vision", "image", "video", "audio", "vlm", "-vl",
                           "vl-", "llava", "omni", "pixtral", "mm_", "mm-", "encoder"),
    "structured-output": ("structured", "guided", "json", "grammar", "xgrammar", "outlines", "llguidance",
                          "response_format", "tool call", "function call", "regex"),
    "hybrid-state-cache": ("mamba", "hybrid", "linear attention", "linear-attention", "deltanet", "ssm",
                           "qwen3-next", "qwen3.5", "qwen3.6", "qwen3_next", "nemotron-h", "nemotronh", "jamba",
                           "granite-4", "granite 4", "granite4", "falcon-h", "minimax", "kimi-linear", "bamba",
                           "state cache"),
    "rocm-aiter": ("rocm", "aiter", "amd", "mi300", "mi325", "mi350", "mi355", "mi250", "hip", "gfx9"),
    "virtualization": ("vfio", "kvm", "lxc", "iommu", "virtual machine", " vm ", " vm,", " vm.", "vms",
                       "passthrough", "proxmox", "hypervisor", "esxi", "vgpu", "wsl"),
    "unified-memory": ("unified memory", "gb10", "dgx spark", "spark", "jetson", "thor", "gh200", "gb200",
                       "grace", "coherent", "strix halo", "apu"),
}


def run_words(ev: RunEvidence) -> str:
    """Everything the run names, lower case: its text, launch, model and GPUs."""
    parts = [t.text for t in ev.text] + list(ev.launch_argv) + [str(ev.model_path or "")]
    parts += [f"{k}={v}" for k, v in ev.server_args.items()]
    if ev.model:
        parts += [ev.model.name or "", ev.model.architecture or ""]
    if ev.hardware:
        parts += [ev.hardware.gpu or "", ev.hardware.arch or ""]
    return " " + " ".join(parts).lower() + " "


def classes_named(ev: RunEvidence) -> set[str]:
    """Fix classes the run's own prose names by their words (kb.vocab.FIX_CLASS_WORDS):
    "fp8_e4m3 KV cache is 40% slower", "no NVLink, PCIe only". People name the knob or
    the part they suspect; a check of that class answers what they asked about. Launch
    arguments do not count (a flag given is not a complaint about it)."""
    prose = " ".join(t.text for t in ev.text if t.kind == "prose").lower()
    return {fc for fc, ws in FIX_CLASS_WORDS.items() if any(w in prose for w in ws)} if prose else set()


def feature_named(f: Finding, words: str) -> bool:
    """False when the finding's fix belongs to a feature (FEATURE_WORDS) the run never names."""
    fc = f.fix_classes[0] if f.fix_classes else None
    if fc not in FEATURE_WORDS:
        return True
    return any(w in words for w in (*FEATURE_WORDS[fc], *FIX_CLASS_WORDS.get(fc, ())))


# a command that installs, imports or launches one engine (`uv pip install vllm ...`,
# `python -m sglang.launch_server`): not advice for a run on the other engine
_ENGINE_IN_COMMAND = re.compile(r"(?<![\w./-])(sglang|vllm)(?![\w-])", re.I)


def other_engine_command(command: str, engine: str | None) -> bool:
    """True when the command names only an engine other than the run's. An engine-generic
    finding (kb.conditions.engine_generic) proposed on the other engine keeps its checks
    (`torch.cuda.get_arch_list()`) and drops its engine's install line."""
    named = {m.lower() for m in _ENGINE_IN_COMMAND.findall(command)}
    return bool(engine and named and engine not in named)


def proposable(f: Finding) -> bool:
    """A finding with a fix to propose (the others are cited, never proposed)."""
    return f.kind == "finding" and bool(f.fix_classes) and bool(f.fix or f.commands)


def match_all(ev: RunEvidence, engine: str | None, catalog: Catalog | None, signals: list[Signal],
              findings: list[Finding], search: Search | None = None) -> list[Match]:
    """Every finding with a fix, checked and scored; excluded ones included (for --why)."""
    facts = Facts.of(ev, engine, catalog, signals)
    out = [Match(f, [_safe_check(c, facts) for c in cond.all_conditions(f)], closeness=similarity(ev, f, engine or ""))
           for f in findings]
    excluded = {m.finding.id for m in out if m.excluded}
    words = run_words(ev)

    def eligible(f: Finding) -> bool:
        return f.id not in excluded and proposable(f) and feature_named(f, words)

    text = text_scores(evidence_query(facts), search, eligible)
    for q in title_queries(facts):  # a hit by the title alone counts as much as by the whole text
        for fid, v in text_scores(q, search, eligible).items():
            text[fid] = max(v, text.get(fid, 0.0))
    named = classes_named(ev)
    for m in out:
        m.text = text.get(m.finding.id, 0.0)
        m.named = bool(m.finding.fix_classes) and m.finding.fix_classes[0] in named
        m.score = round(sum(EVIDENCE_WEIGHT[c.condition.key] for c in m.hits)
                        + CONTEXT_WEIGHT * len(m.context_held) + m.closeness + TEXT_WEIGHT * m.text, 3)
    out.sort(key=lambda m: (bool(m.excluded), -m.score))
    return out


def signal_severity(m: Match, signals: dict[str, Signal]) -> str:
    """The strongest severity among the signals a finding matched (moderate at least)."""
    best = "moderate"
    for c in m.hits:
        if c.condition.key == "signal":
            for s in cond.parse(c.condition.key, c.condition.value).names:
                if s in signals and SEVERITY_ORDER[signals[s].severity] > SEVERITY_ORDER[best]:
                    best = signals[s].severity
    return best
