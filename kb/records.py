"""Pydantic records: the one shape every part of kb agrees on.

Findings are knowledge (from markdown); BenchRun, ServerTrace, ModelProfile and
Hardware are evidence from this run; Signal and Recommendation are what kb derives.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, Field, field_validator

from kb import units
from kb.hardware import gpu_arch

Confidence = Literal["low", "medium", "high"]

LOWER_IS_BETTER_UNITS = {"ms", "s", "sec", "seconds", "us", "µs", "μs"}
LOWER_IS_BETTER_METRICS = ("ttft", "tpot", "itl", "latency", "e2e")
COMPUTED_NOTE = "; computed, not measured"


class Context(BaseModel):
    """Where a finding was measured: engine, hardware and model."""

    engine: str | None = None
    engine_version: str | None = None
    gpu: str | None = None
    gpu_arch: str | None = None
    gpu_count: int | None = None
    interconnect: str | None = None
    model: str | None = None
    model_family: str | None = None
    params_b: float | None = None  # total parameters, billions
    experts: int | None = None
    experts_per_token: int | None = None
    expert_intermediate_size: int | None = None
    quantization: str | None = None

    def arch(self) -> str | None:
        """Explicit architecture, else the one the GPU table gives."""
        return self.gpu_arch or gpu_arch(self.gpu)

    def is_empty(self) -> bool:
        return not any(v is not None for v in self.model_dump().values())

    def line(self) -> str:
        """One line: engine and version · GPUs (arch) · interconnect · model and format."""
        engine = " ".join(x for x in (self.engine, self.engine_version) if x)
        gpu = ""
        if self.gpu:
            arch = self.arch()
            gpu = f"{self.gpu_count}x {self.gpu}" if self.gpu_count else self.gpu
            gpu += f" ({arch})" if arch else ""
        model = " ".join(x for x in (self.model, self.quantization) if x)
        return " · ".join(x for x in (engine, gpu, self.interconnect or "", model) if x)


class Gain(BaseModel):
    metric: str
    before: float | None = None
    after: float | None = None
    unit: str | None = None
    concurrency: int | None = None
    runs: int | None = None
    # True when the source did not measure this before/after pair: kb's finding derived
    # it by arithmetic from the source's figures (e.g. 2 x one replica's throughput)
    computed: bool = False

    def lower_is_better(self) -> bool:
        unit = (self.unit or "").lower()
        metric = self.metric.lower()
        return unit in LOWER_IS_BETTER_UNITS or any(w in metric for w in LOWER_IS_BETTER_METRICS)

    def ratio(self) -> float | None:
        """Improvement factor (>1 is better), whichever direction the metric runs."""
        if not self.before or not self.after:
            return None
        r = self.after / self.before
        return 1 / r if self.lower_is_better() else r

    def describe(self) -> str:
        at = f" at {self.concurrency} concurrency" if self.concurrency else ""
        if self.before is not None and self.after is not None:
            r = self.ratio()
            x = (f" ({units.factor(r)}{COMPUTED_NOTE if self.computed else ''})" if r else
                 f" ({COMPUTED_NOTE[2:]})" if self.computed else "")
            return f"{self.metric}: {units.change(self.before, self.after, self.unit)}{at}{x}"
        val = self.after if self.after is not None else self.before
        note = f" ({COMPUTED_NOTE[2:]})" if self.computed else ""
        return f"{self.metric}: {units.quantity(val, self.unit)}{at}{note}" if val is not None else self.metric


class Source(BaseModel):
    """A URL, or a file with a line range."""

    url: str | None = None
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None

    def __str__(self) -> str:
        if self.url:
            return self.url
        if self.line_start:
            end = f"-{self.line_end}" if self.line_end and self.line_end != self.line_start else ""
            return f"{self.path}:{self.line_start}{end}"
        return self.path or ""

    @classmethod
    def parse(cls, text: str) -> "Source":
        text = text.strip()
        if re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I):
            return cls(url=text)
        m = re.match(r"^(.*?):(\d{1,9})(?:-(\d{1,9}))?$", text)
        if m:
            return cls(path=m.group(1), line_start=int(m.group(2)),
                       line_end=int(m.group(3)) if m.group(3) else int(m.group(2)))
        return cls(path=text)


SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# the labels findings/FORMAT.md marks required (ID and Confidence always parse to a value)
REQUIRED_FIELDS = ("symptoms", "root_cause", "fix", "fix_classes", "sources")


class Condition(BaseModel):
    """One "Applies when" condition as written (`key: value`, findings/FORMAT.md);
    kb.conditions parses it, kb.match checks it against a run. `inferred`: derived
    by kb from the finding's context or quoted log lines, not written by its author."""

    key: str
    value: str
    line: int | None = None
    inferred: bool = False

    def __str__(self) -> str:
        return f"{self.key}: {self.value}"


class Finding(BaseModel):
    """One thing we learned. `kind` is 'finding' for a complete record, 'note' for a
    section that could not be classified (kept searchable with its source lines)."""

    id: str
    title: str
    kind: Literal["finding", "note"] = "finding"
    symptoms: list[str] = Field(default_factory=list)
    context: Context = Field(default_factory=Context)
    root_cause: str | None = None
    fix: str | None = None
    fix_classes: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    gains: list[Gain] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    confidence: Confidence = "low"
    tags: list[str] = Field(default_factory=list)
    extra: dict[str, str] = Field(default_factory=dict)
    # "Applies when" conditions, one `key: value` each (grammar: findings/FORMAT.md, kb/conditions.py)
    applies_when: list[str] = Field(default_factory=list)
    body: str = ""  # the section's remaining prose, searchable
    applies_when: list[Condition] = Field(default_factory=list)
    measured_on: str | None = None  # versions the figures were measured on, and what changed since

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"id {v!r} is not a slug ([a-z0-9-]+)")
        return v

    def best_gain(self) -> Gain | None:
        rated = [g for g in self.gains if g.ratio()]
        return max(rated, key=lambda g: g.ratio()) if rated else (self.gains[0] if self.gains else None)

    def missing_required(self) -> list[str]:
        """The fields findings/FORMAT.md requires that this record lacks. A measured gain
        is optional there: a source with no before/after figures gives none."""
        return [f for f in self.missing_fields() if f in REQUIRED_FIELDS]

    def missing_fields(self) -> list[str]:
        """Fields a complete finding has and this one lacks (for `kb ingest --report`)."""
        missing = []
        for name in ("symptoms", "root_cause", "fix", "fix_classes", "commands", "gains", "sources"):
            if not getattr(self, name):
                missing.append(name)
        if self.context.is_empty():
            missing.append("context")
        return missing


# ---------------------------------------------------------------- run evidence


class Where(BaseModel):
    """The file and line a value came from."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


class BenchRun(BaseModel):
    """One benchmark run at one load level (a concurrency or a request rate)."""

    tool: str  # sglang-bench, vllm-bench, guidellm, genai-perf, aiperf, kb-sweep
    backend: str | None = None  # the server engine the tool talked to, when it says
    model: str | None = None
    concurrency: int | None = None  # max concurrency (None = unbounded)
    request_rate: float | None = None  # req/s; None or inf = all at once
    num_prompts: int | None = None
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    input_len: float | None = None  # mean input tokens per request
    output_len: float | None = None  # mean output tokens per request
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    peak_output_throughput: float | None = None
    peak_concurrency: float | None = None
    ttft_ms: dict[str, float] = Field(default_factory=dict)  # mean, median, p90, p99, ...
    tpot_ms: dict[str, float] = Field(default_factory=dict)
    itl_ms: dict[str, float] = Field(default_factory=dict)
    e2e_ms: dict[str, float] = Field(default_factory=dict)
    accept_length: float | None = None
    server_args: dict = Field(default_factory=dict)
    engine_version: str | None = None
    source: Where | None = None

    def level(self) -> float:
        """The load level used to order runs into a curve."""
        if self.concurrency:
            return float(self.concurrency)
        if self.request_rate and self.request_rate != float("inf"):
            return self.request_rate
        if self.peak_concurrency:  # no limit set: the load the run actually reached
            return float(self.peak_concurrency)
        return float(self.num_prompts or 0)

    def throughput(self) -> float | None:
        if self.total_throughput:
            return self.total_throughput
        if self.output_throughput and self.input_throughput is not None:
            return self.output_throughput + self.input_throughput
        return self.output_throughput


class Sample(BaseModel):
    """One periodic stats line of a server log (or one /metrics scrape)."""

    line: int | None = None
    time: str | None = None
    kind: Literal["decode", "prefill", "stats"] = "stats"
    running: int | None = None
    queued: int | None = None
    tokens: int | None = None
    token_usage: float | None = None  # KV cache fraction in use, 0..1
    gen_throughput: float | None = None
    prompt_throughput: float | None = None
    cuda_graph: bool | None = None
    accept_len: float | None = None
    prefix_hit_rate: float | None = None


class Event(BaseModel):
    """A notable one-off log line: retraction, preemption, MoE default config, OOM, ..."""

    kind: str
    where: Where
    text: str
    data: dict = Field(default_factory=dict)


class ServerTrace(BaseModel):
    """What a server log says: start-up facts, periodic samples, notable events.
    `samples` is down-sampled for long logs; `stats` holds exact aggregates."""

    engine: str
    engine_version: str | None = None
    source: str
    startup: dict = Field(default_factory=dict)  # max_total_num_tokens, max_running_requests, cuda_graph_bs, ...
    server_args: dict = Field(default_factory=dict)
    samples: list[Sample] = Field(default_factory=list)
    stats: dict = Field(default_factory=dict)  # counts and maxima over every sample
    events: list[Event] = Field(default_factory=list)
    lines: int = 0


class ModelProfile(BaseModel):
    name: str | None = None
    architecture: str | None = None
    model_type: str | None = None
    family: str | None = None
    is_moe: bool = False
    experts: int | None = None  # routed experts
    experts_per_token: int | None = None
    expert_intermediate_size: int | None = None
    shared_experts: int | None = None
    dense_layers: int | None = None  # leading dense layers in a MoE model
    attention: Literal["MHA", "GQA", "MQA", "MLA"] | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    context_len: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    mtp_layers: int = 0  # draft (next-token prediction) layers shipped in the checkpoint
    quantization: str | None = None  # nvfp4, fp8, mxfp4, awq, gptq, compressed-tensors, bf16
    quant_details: dict = Field(default_factory=dict)
    dtype: str | None = None
    params_b: float | None = None
    active_params_b: float | None = None
    # billions per module kind (embed, lm_head, attention, dense_mlp, experts, experts_active,
    # shared_experts, router): what quantization schemes target or leave out
    param_groups_b: dict[str, float] = Field(default_factory=dict)
    source: str | None = None


class Hardware(BaseModel):
    gpu: str
    arch: str | None = None
    memory_gb: float | None = None
    count: int = 1
    interconnect: str | None = None  # NVLink, PCIe, mixed
    numa_nodes: int | None = None
    links: dict[str, str] = Field(default_factory=dict)  # "GPU0-GPU1" → NV18 / PIX / SYS ...
    driver: str | None = None
    cuda: str | None = None
    utilization_pct: float | None = None  # mean GPU utilisation when the capture was taken
    known: bool = True  # False: not in kb's GPU table, kept as given
    source: str | None = None


# Severity bands follow Dr. Elephant (none .. critical), mildest first: this Literal is the
# one definition of their order; signals, rules and ranking all read it from here.
Severity = Literal["none", "low", "moderate", "severe", "critical"]
SEVERITIES: tuple[str, ...] = get_args(Severity)
SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}


def shift_severity(severity: str, steps: int) -> str:
    """The band `steps` away (negative: milder), kept within none..critical."""
    return SEVERITIES[max(0, min(len(SEVERITIES) - 1, SEVERITY_ORDER[severity] + steps))]


class Evidence(BaseModel):
    text: str
    where: Where | None = None


class Signal(BaseModel):
    id: str
    title: str
    severity: Severity
    summary: str
    evidence: list[Evidence] = Field(default_factory=list)
    data: dict = Field(default_factory=dict)  # the values rules compute with


class FlagDiff(BaseModel):
    flag: str
    current: object = None
    new: object = None  # None: remove the flag
    why: str = ""


class CitedFinding(BaseModel):
    id: str
    title: str
    similarity: float  # 0..1, how close its context is to this run
    gain: str | None = None
    ratio: float | None = None
    context: str = ""
    source: str = ""


class Recommendation(BaseModel):
    rank: int = 0
    rule: str  # "KB101 running-request-cap"
    fix_class: str
    title: str
    severity: Severity
    confidence: float
    score: float = 0.0
    expected_gain: str | None = None  # from findings close to this context, or None
    expected_ratio: float | None = None
    commands: list[str] = Field(default_factory=list)
    flags: list[FlagDiff] = Field(default_factory=list)
    env: dict[str, str | None] = Field(default_factory=dict)  # None: unset it
    rationale: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    findings: list[CitedFinding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # what backs it: "symptom" (a signal or a matched log line / phrase), "text" (the run's
    # words resemble a finding's), "context" (facts of the setup alone), "reminder" (a check)
    basis: str = "symptom"
    matched: list[str] = Field(default_factory=list)  # findings' conditions that held, "id: key: value"
