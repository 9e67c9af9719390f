"""GPU names → architecture and memory, through one table.

The table is the single place that knows GPU facts; everything else (records,
nvidia-smi parsing, rules, launch arithmetic) asks `lookup_gpu`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    name: str  # canonical name
    arch: str  # SMxx for NVIDIA, gfxNNN for AMD
    memory_gb: float  # usable HBM/GDDR as nvidia-smi / rocm-smi report it, in GB
    vendor: str = "nvidia"
    nvlink: bool = False  # sold in NVLink/NVSwitch (SXM/OAM) boards by default


# Ordered: the first pattern that matches the normalised name wins, so specific
# names (RTX PRO 6000, H100 NVL) come before generic ones (6000, H100).
_GPUS: list[tuple[str, GpuSpec]] = [
    (r"rtxpro6000|pro6000blackwell", GpuSpec("RTX PRO 6000 Blackwell", "SM120", 96)),
    (r"rtx6000ada|6000ada", GpuSpec("RTX 6000 Ada", "SM89", 48)),
    (r"rtxa6000|^a6000", GpuSpec("RTX A6000", "SM86", 48)),
    (r"rtxa5000|^a5000", GpuSpec("RTX A5000", "SM86", 24)),
    (r"rtxa4000|^a4000", GpuSpec("RTX A4000", "SM86", 16)),  # before "a40"
    (r"rtx5090|geforce5090|^5090", GpuSpec("RTX 5090", "SM120", 32)),
    (r"rtx5080|^5080", GpuSpec("RTX 5080", "SM120", 16)),
    (r"rtx4090|^4090", GpuSpec("RTX 4090", "SM89", 24)),
    (r"rtx3090|^3090", GpuSpec("RTX 3090", "SM86", 24)),
    (r"gb300", GpuSpec("GB300", "SM103", 288, nvlink=True)),
    (r"gb200", GpuSpec("GB200", "SM100", 186, nvlink=True)),
    (r"gb10|dgxspark", GpuSpec("GB10", "SM121", 128)),
    (r"b300", GpuSpec("B300", "SM103", 288, nvlink=True)),
    (r"b200", GpuSpec("B200", "SM100", 180, nvlink=True)),
    (r"gh200", GpuSpec("GH200", "SM90", 96, nvlink=True)),
    (r"h200nvl", GpuSpec("H200 NVL", "SM90", 141)),
    (r"h200", GpuSpec("H200", "SM90", 141, nvlink=True)),
    (r"h100nvl", GpuSpec("H100 NVL", "SM90", 94)),
    (r"h100pcie", GpuSpec("H100 PCIe", "SM90", 80)),
    (r"h100", GpuSpec("H100", "SM90", 80, nvlink=True)),
    (r"h800", GpuSpec("H800", "SM90", 80, nvlink=True)),
    (r"h20", GpuSpec("H20", "SM90", 96, nvlink=True)),
    (r"l40s", GpuSpec("L40S", "SM89", 48)),
    (r"l40", GpuSpec("L40", "SM89", 48)),
    (r"^l4$|^l4\b|nvidial4|tesla l4|^l4(?!\d)", GpuSpec("L4", "SM89", 24)),
    (r"a100.*pcie.*40|a100.*40.*pcie", GpuSpec("A100 PCIe 40GB", "SM80", 40)),
    (r"a100.*pcie", GpuSpec("A100 PCIe", "SM80", 80)),
    (r"a100.*40|a10040", GpuSpec("A100 40GB", "SM80", 40, nvlink=True)),
    (r"a100", GpuSpec("A100", "SM80", 80, nvlink=True)),
    (r"a800", GpuSpec("A800", "SM80", 80, nvlink=True)),
    (r"a40", GpuSpec("A40", "SM86", 48)),
    (r"a10g", GpuSpec("A10G", "SM86", 24)),
    (r"a10", GpuSpec("A10", "SM86", 24)),
    (r"v100.*pcie", GpuSpec("V100 PCIe", "SM70", 32)),
    (r"v100.*16", GpuSpec("V100 16GB", "SM70", 16, nvlink=True)),
    (r"v100", GpuSpec("V100", "SM70", 32, nvlink=True)),
    (r"(^|[^a-z])t4($|[^0-9])", GpuSpec("T4", "SM75", 16)),
    (r"mi355", GpuSpec("MI355X", "gfx950", 288, vendor="amd", nvlink=True)),
    (r"mi350", GpuSpec("MI350X", "gfx950", 288, vendor="amd", nvlink=True)),
    (r"mi325", GpuSpec("MI325X", "gfx942", 256, vendor="amd", nvlink=True)),
    (r"mi300a", GpuSpec("MI300A", "gfx942", 128, vendor="amd")),
    (r"mi300", GpuSpec("MI300X", "gfx942", 192, vendor="amd", nvlink=True)),
    (r"mi250", GpuSpec("MI250X", "gfx90a", 128, vendor="amd", nvlink=True)),
]

_COMPILED = [(re.compile(p), spec) for p, spec in _GPUS]

ARCH_NAMES = {
    "SM70": "Volta", "SM75": "Turing", "SM80": "Ampere", "SM86": "Ampere",
    "SM89": "Ada Lovelace", "SM90": "Hopper", "SM100": "Blackwell", "SM103": "Blackwell Ultra",
    "SM120": "Blackwell (workstation/consumer)", "SM121": "Blackwell (GB10)",
    "gfx90a": "CDNA2", "gfx942": "CDNA3", "gfx950": "CDNA4",
}


def _normalise(name: str) -> str:
    s = name.lower()
    s = re.sub(r"\b(nvidia|geforce|amd|instinct|tesla|server edition|workstation edition|max-q)\b", "", s)
    # "A100 40GB" → "a100 40"; the lookbehind starts a match only at the first digit of a
    # run: without it, a 5,000-digit "name" (fuzzing) cost a quadratic 0.5 s per call
    s = re.sub(r"(?<!\d)(\d+)\s*gb\b", r"\1", s)
    return re.sub(r"[\s_\-]+", "", s)


def lookup_gpu(name: str | None) -> GpuSpec | None:
    """The table entry for a GPU name as people or nvidia-smi write it, or None."""
    if not name:
        return None
    norm = _normalise(name)
    for pattern, spec in _COMPILED:
        if pattern.search(norm):
            return spec
    return None


def gpu_arch(name: str | None) -> str | None:
    spec = lookup_gpu(name)
    return spec.arch if spec else None


_SPEC = re.compile(
    r"^\s*(?:(?P<n1>\d{1,6})\s*[x×*]\s*)?(?P<name>.+?)(?:\s+[x×*]\s*(?P<n2>\d{1,6}))?\s*$", re.I
)


def parse_gpu_string(text: str) -> tuple[int, str, str | None]:
    """'8x RTX PRO 6000 PCIe' → (8, 'RTX PRO 6000', 'PCIe'). Interconnect is None when unsaid."""
    interconnect = None
    t = text.strip()
    m_ic = re.search(r"\b(pcie|nvlink|nvswitch|infiniband|ib)\b", t, re.I)
    if m_ic:
        word = m_ic.group(1).lower()
        interconnect = "PCIe" if word == "pcie" else "NVLink"
        # "H100 PCIe" names a product too: keep the word in the name for lookup.
        if word != "pcie":
            t = (t[: m_ic.start()] + t[m_ic.end():]).strip(" ,")
    m = _SPEC.match(t)
    count = int(m.group("n1") or m.group("n2") or 1) if m else 1
    name = (m.group("name") if m else t).strip(" ,")
    return count, name, interconnect


# ------------------------------------------------------------------ platforms

# The accelerator stack a run executes on. A finding about one platform's kernels, images or
# runtime (AITER on ROCm, ACL graphs on Ascend) says nothing about another's, however close
# its words are. hpu is Intel Gaudi (vllm-gaudi), a different stack from Intel's XPU GPUs.
PLATFORMS = ("cuda", "rocm", "npu", "xpu", "hpu", "tpu", "cpu")
PLATFORM_ALIASES = {"nvidia": "cuda", "gpu": "cuda", "amd": "rocm", "hip": "rocm", "ascend": "npu",
                    "gaudi": "hpu", "intel-gpu": "xpu"}

# Words that name one platform. "CUDA" alone names none: PyTorch on ROCm prints "CUDA error"
# and sglang on Ascend keeps --disable-cuda-graph; nor does "AMD" (AMD EPYC hosts carry NVIDIA
# GPUs) or "NCCL" (RCCL keeps NCCL's names). A CUDA version, an sm_ arch, NVIDIA's tools do.
_PLATFORM_WORDS = [
    ("rocm", r"\brocm|\bhip(?:blas\w*|graph|_\w+)?\b|hiperror|\bmi ?(?:210|250|300|325|350|355)[ax]?\b|"
             r"\bgfx9\d\d[a-z]?\b|\baiter\b|\binstinct\b|amd gpu|radeon|rocm-smi|amd-smi|\brccl\b"),
    ("npu", r"\bascend\b|torch_npu|\bcann\b|\b910[bc]\d?\b|\batlas 800|\bnpu\b|vllm-ascend|\baclnn|aclgraph|"
            r"acl graph"),
    ("xpu", r"\bxpu\b|\boneapi\b|intel arc|\barc (?:pro )?[ab]\d{2,3}\b|data center gpu max|\bipex\b"),
    ("hpu", r"\bgaudi ?\d?\b|\bhabana\b|\bhpu\b|vllm-gaudi|hl-smi"),
    ("tpu", r"\btpu(?: ?v\d\w*)?\b|libtpu|vllm-tpu"),
    ("cpu", r"--device[ =]cpu\b|device ?= ?['\"]?cpu\b|vllm_target_device=cpu|\bcpu[- ]only\b|vllm-cpu\b|"
            r"vllm/vllm-openai-cpu|\bcpu backend\b"),
    ("cuda", r"\bnvidia\b|nvidia-smi|\bsm_?(?:70|75|80|86|89|90|100|103|120|121)a?\b|\bcu1[1-3]\d\b|"
             r"\bcuda ?1[1-3]\.\d|\bcuda toolkit\b|\bnvcc\b"),
]
_PLATFORM_RX = [(p, re.compile(rx, re.I)) for p, rx in _PLATFORM_WORDS]


def platforms_named(text: str | None) -> set[str]:
    """Every platform the text names by its own words (GPU tables aside)."""
    return {p for p, rx in _PLATFORM_RX if text and rx.search(text)}


def platform_name(word: str | None) -> str | None:
    """A platform as written (`rocm`, `Ascend`, `--device npu`'s `npu`) in canonical form, or None."""
    w = (word or "").strip().lower()
    w = PLATFORM_ALIASES.get(w, w)
    return w if w in PLATFORMS else None


def gpu_platform(name: str | None) -> str | None:
    """The platform of a GPU (or accelerator) name: NVIDIA → cuda, AMD → rocm from the table;
    Ascend, Gaudi, Arc, TPU names by their words."""
    spec = lookup_gpu(name)
    if spec:
        return {"nvidia": "cuda", "amd": "rocm"}.get(spec.vendor)
    named = platforms_named(name)
    return named.pop() if len(named) == 1 else None


def arch_platform(arch: str | None) -> str | None:
    a = (arch or "").strip().lower()
    return "cuda" if a.startswith("sm") else "rocm" if a.startswith("gfx") else None
