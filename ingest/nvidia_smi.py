"""nvidia-smi output → Hardware.

Five LineParsers (ingest/base.py), each fed every line of a file so that one
terminal capture can hold several commands' output among other text. Memory
stays bounded: repeated output (`-l` loops, several captures) overwrites by GPU.

    nvidia-smi-q     `nvidia-smi -q`: Product Name, FB Memory Usage Total, Driver
                     and CUDA Version, one `GPU 00000000:18:00.0` section per GPU
    nvidia-smi-csv   `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`
    nvidia-smi-topo  `nvidia-smi topo -m`: the GPU×GPU matrix, CPU/NUMA affinity
    nvidia-smi-table the plain `nvidia-smi` box (GPU rows and their memory)
    nvidia-smi-list  `nvidia-smi -L` and env dumps' `GPU 0,1,2,3: NAME` lines

`merge_hardware` combines what they found into one Hardware; `hardware_from_string`
reads a description such as "8x RTX PRO 6000".
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from kb.hardware import lookup_gpu, parse_gpu_string
from kb.records import Hardware

_ANSI = re.compile(r"\x1b?\[[0-9;]*m")  # also "[4m" left when a capture drops the ESC byte
_MIB = 1024  # nvidia-smi reports MiB; Hardware.memory_gb is GiB, as the GPU table is
MAX_ROWS = 4096  # CSV rows held at once
MAX_MATRICES = 8  # topo matrices held at once
MAX_GPUS = 1024  # GPUs held per parser (a machine has at most a few dozen)
# A GPU index is a short number: a longer digit run (a damaged capture) is not one,
# and int() of thousands of digits raises.
_INDEX = r"\d{1,4}"


@functools.lru_cache(maxsize=8)
def _clean(line: str) -> str:
    # (cached: the five nvidia-smi readers each clean every line of a long log, one after another)
    return _ANSI.sub("", line).strip()


def _hardware(names: list[str], *, memory_mib: list[float], count: int | None = None, **kw) -> Hardware:
    """One Hardware from per-GPU names: the commonest name, the smallest memory
    (what a uniform TP plan must fit; the GPU table's when none was reported), and
    each GPU's name in `links` ("GPU1" → name) when they differ."""
    name = Counter(names).most_common(1)[0][0] if names else "unknown"
    spec = lookup_gpu(name)
    links = {f"GPU{i}": n for i, n in enumerate(names)} if len(set(names)) > 1 else {}
    measured = round(min(memory_mib) / _MIB, 1) if memory_mib else None
    return Hardware(gpu=name, arch=spec.arch if spec else None,
                    memory_gb=measured or (spec.memory_gb if spec else None),
                    count=count or len(names) or 1, known=spec is not None, links=links, **kw)


# ---------------------------------------------------------------- nvidia-smi -q


class NvidiaSmiQ:
    kind = "nvidia-smi-q"
    _GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")
    _KV = re.compile(r"^([A-Za-z][\w .()/-]*?)\s+:\s*(.*)$")  # "Product Name      : NVIDIA H100"

    def __init__(self, path: str) -> None:
        self.path = path
        self.gpus: dict[str, dict] = {}  # by PCI bus id, so `nvidia-smi -q -l` repeats overwrite
        self.top: dict[str, str] = {}
        self._gpu: dict | None = None
        self._section: str | None = None  # the last header line without a value ("FB Memory Usage")

    def feed(self, lineno: int, line: str) -> None:
        text = _clean(line)
        m = self._GPU.match(text)
        if m:
            bus = m.group(1).upper()
            if bus in self.gpus or len(self.gpus) < MAX_GPUS:
                self._gpu = self.gpus[bus] = {}
            else:
                self._gpu = None
            return
        m = self._KV.match(text)
        if not m:
            self._section = text if text and ":" not in text and len(text) < 60 else self._section
            return
        key, value = m.group(1).strip(), m.group(2).strip()
        if key in ("Driver Version", "CUDA Version", "Attached GPUs"):
            self.top[key] = value
        elif self._gpu is not None and key == "Product Name":
            self._gpu["name"] = value
        elif self._gpu is not None and key == "Gpu" and self._section == "Utilization":
            pct = re.match(r"(\d+)\s*%", value)
            if pct:
                self._gpu["util"] = float(pct.group(1))
        elif self._gpu is not None and key == "Total" and self._section == "FB Memory Usage":
            mib = re.match(r"(\d{1,12})\s*MiB", value)
            if mib:
                self._gpu["mib"] = float(mib.group(1))

    def results(self) -> list[Hardware]:
        named = [g for g in self.gpus.values() if g.get("name")]
        if not named:
            return []
        attached = self.top.get("Attached GPUs", "")
        return [_hardware([g["name"] for g in named], memory_mib=[g["mib"] for g in named if "mib" in g],
                          count=max(len(named), int(attached) if re.fullmatch(_INDEX, attached) else 0),
                          driver=self.top.get("Driver Version"), cuda=self.top.get("CUDA Version"),
                          utilization_pct=_mean([g["util"] for g in named if "util" in g]), source=self.path)]


def _mean(values: list[float]) -> float | None:
    """Mean GPU utilisation across GPUs (the gpu-idle signal reads it)."""
    return round(sum(values) / len(values), 1) if values else None


# ---------------------------------------------------- nvidia-smi --query-gpu csv


class NvidiaSmiCsv:
    """With a header line, columns come from it; without one (noheader), from the
    `--query-gpu=` list when the capture shows the command. Failing both, a row
    is read as name + the largest integer ≥ 1024 as memory.total in MiB (total
    is never below used or free) — a guess made only when nothing names the columns."""

    kind = "nvidia-smi-csv"
    _FIELD = r"[a-z][\w.]*(?: \[[^\]]+\])?"
    _HEADER = re.compile(rf"^{_FIELD}(?:, {_FIELD})+$")
    _QUERY = re.compile(r"--query-gpu[= ]([\w.,]+)")

    def __init__(self, path: str) -> None:
        self.path = path
        self.fields: list[str] | None = None
        self.pending: list[str] | None = None  # from a command line, for noheader rows
        self.rows: list[dict[str, str]] = []
        self.block: list[dict[str, str]] = []
        self.foreign = False  # inside a CSV table whose header is not nvidia-smi's

    def feed(self, lineno: int, line: str) -> None:
        text = _clean(line).lstrip("$# ").strip()
        q = self._QUERY.search(text)
        if q:
            self.pending = q.group(1).split(",")
            self.fields = None if "noheader" in text else self.fields
            return
        if self._HEADER.match(text) and ("name" in text or "memory.total" in text):
            self.fields = [re.sub(r" \[.*\]$", "", f) for f in text.split(", ")]
            self._new_block()
            return
        cells = [c.strip() for c in text.split(",")]
        fields = self.fields or self.pending
        if not fields and _FOREIGN_HEADER.match(text):
            self.foreign = True  # another tool's CSV ("gpu,input_len,batch_size,..."): its rows are not GPUs
            return
        if fields and len(cells) == len(fields):
            self._add(dict(zip(fields, cells, strict=True)))
        elif not fields and not self.foreign and len(cells) >= 2 and _looks_like_gpu_row(cells):
            self._add(_guess_row(cells))
        elif not text:
            self.foreign = False
            if self.block:
                self._new_block()

    def _add(self, row: dict[str, str]) -> None:
        self.block.append(row)
        if len(self.block) > MAX_ROWS:  # a long `-l` loop: keep the recent samples
            self.block = _one_sample(self.block[-MAX_ROWS // 2:])

    def _new_block(self) -> None:
        if self.block:
            self.rows = self.block
        self.block = []

    def results(self) -> list[Hardware]:
        self._new_block()
        rows = _one_sample(self.rows)
        names = [r["name"] for r in rows if r.get("name")]
        if not names:
            return []
        mem = [_number(r.get("memory.total")) for r in rows]
        drivers = [r["driver_version"] for r in rows if r.get("driver_version")]
        util = [_number(r.get("utilization.gpu")) for r in rows]
        return [_hardware(names, memory_mib=[m for m in mem if m], driver=drivers[0] if drivers else None,
                          utilization_pct=_mean([u for u in util if u is not None]), source=self.path)]


# a header line of word columns without nvidia-smi's ", " separators
_FOREIGN_HEADER = re.compile(r"^\ufeff?[A-Za-z_][\w .()/-]*(?:,[A-Za-z_][\w .()/-]*){2,}$")
_VENDOR = re.compile(r"NVIDIA|GeForce|Tesla|Quadro|Radeon|Instinct|AMD")
_VALUE = re.compile(r"^(\[?N/A\]?|[\d.]+(?: ?(?:MiB|%|W|MHz|C))?|GPU-[\w-]+|[0-9A-Fa-f]{4,8}:[\w:.]+|"
                    r"Enabled|Disabled|Default|P\d+)$")


def _looks_like_gpu_row(cells: list[str]) -> bool:
    """A header-less row: a GPU name among the first two cells, every other cell a
    value nvidia-smi prints (numbers, N/A, UUIDs, bus ids) — not prose with commas."""
    if not all(_VALUE.match(c) for c in cells[2:]):  # cheap test first: most lines of a log fail here
        return False
    name = next((i for i, c in enumerate(cells[:2]) if _VENDOR.search(c) or lookup_gpu(c)), None)
    return name is not None and all(_VALUE.match(c) for i, c in enumerate(cells[:2]) if i != name)


def _guess_row(cells: list[str]) -> dict[str, str]:
    name = next(c for c in cells[:2] if _VENDOR.search(c) or lookup_gpu(c))
    row = {"name": name}
    big = [int(c) for c in cells if re.fullmatch(r"[0-9]{4,12}", c) and int(c) >= 1024]
    if big:
        row["memory.total"] = str(max(big))
    if re.fullmatch(_INDEX, cells[0]) and cells[1] == name:
        row["index"] = cells[0]
    return row


def _one_sample(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """A looping query (-l N) repeats every GPU: keep one row per GPU."""
    for key in ("index", "uuid", "pci.bus_id"):
        if rows and all(r.get(key) for r in rows):
            seen: dict[str, dict] = {}
            for r in rows:
                seen.setdefault(r[key], r)
            return list(seen.values())
    if rows and rows[0].get("timestamp"):
        return [r for r in rows if r.get("timestamp") == rows[0]["timestamp"]]
    return rows


def _number(value: str | None) -> float | None:
    m = re.match(r"\s*(\d{1,12}(?:\.\d+)?)", value or "")
    return float(m.group(1)) if m else None


# ------------------------------------------------------------ nvidia-smi topo -m

_NAME = re.compile(rf"^(GPU{_INDEX}|NIC\d+|mlx\d+_\w+|CPU Affinity|NUMA Affinity|GPU NUMA ID)$")
_PCIE = {"PIX", "PXB", "PHB", "NODE", "SYS"}


class NvidiaSmiTopo:
    kind = "nvidia-smi-topo"

    def __init__(self, path: str) -> None:
        self.path = path
        self.columns: list[str] | None = None
        self.current: dict | None = None
        self.matrices: list[dict] = []
        self.legend: dict[str, str] = {}

    def feed(self, lineno: int, line: str) -> None:
        text = _clean(line)
        cells = _split(text)
        if len(cells) >= 2 and cells[0] == "GPU0" and all(_NAME.match(c) for c in cells):
            self._close()
            self.columns = cells
            self.current = {"rows": {}, "line": lineno}
            return
        if self.columns and cells and re.fullmatch(rf"GPU{_INDEX}", cells[0]):
            self.current["rows"][cells[0]] = dict(zip(self.columns, cells[1:], strict=False))
            return
        if self.columns and cells and _NAME.match(cells[0]) and cells[0].startswith(("NIC", "mlx")):
            return  # NIC rows belong to the matrix but say nothing about GPU pairs
        legend = re.match(r"^(X|SYS|NODE|PHB|PXB|PIX|NV#)\s+=\s+(.+)$", text)
        if legend:
            self.legend[legend.group(1)] = legend.group(2)
        self._close()

    def _close(self) -> None:
        if self.current and self.current["rows"]:
            self.matrices = (self.matrices + [self.current])[-MAX_MATRICES:]
        self.current, self.columns = None, None

    def results(self) -> list[Hardware]:
        self._close()
        return [self._hardware(m) for m in self.matrices]

    def _hardware(self, m: dict) -> Hardware:
        rows = m["rows"]
        gpus = sorted(rows, key=lambda g: int(g[3:]))
        links: dict[str, str] = {}
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                code = (rows[a].get(b) or "").strip()
                if code:
                    links[f"{a}-{b}"] = code
        numa = {r.get("NUMA Affinity", "").strip() for r in rows.values()} - {"", "N/A"}
        return Hardware(gpu="unknown", count=len(gpus), interconnect=interconnect(links.values()),
                        numa_nodes=len(numa) or None, links=links, known=False, source=self.path)


def _split(text: str) -> list[str]:
    """Cells of a topo line: tab-separated (the usual output) keeping empty cells
    inside a row (nvidia-smi writes "0\t\tN/A"), or 2+ spaces apart."""
    if "\t" not in text:
        return [p for p in re.split(r"\s{2,}", text) if p]
    cells = [p.strip() for p in text.split("\t")]
    while cells and not cells[0]:  # an indented header's leading tab
        cells.pop(0)
    return cells


def interconnect(codes) -> str | None:
    """NVLink when every GPU pair is NV#, PCIe when none is, else mixed."""
    kinds = {"nvlink" if c.startswith("NV") else "pcie" if c in _PCIE else "other" for c in codes}
    kinds.discard("other")
    if not kinds:
        return None
    return "NVLink" if kinds == {"nvlink"} else "PCIe" if kinds == {"pcie"} else "mixed"


# ---------------------------------------------- nvidia-smi -L, env-dump GPU lines


class NvidiaSmiList:
    kind = "nvidia-smi-list"
    _L = re.compile(rf"^GPU ({_INDEX}): (.+?) \(UUID: [^)]+\)$")
    _ENV = re.compile(rf"^GPU ({_INDEX}(?:,{_INDEX})*): (.+)$")  # sglang/vLLM env dumps: "GPU 0,1,2,3: NVIDIA H100"
    _DRIVER = re.compile(r"^(?:CUDA Driver Version|Nvidia driver version|Driver Version)\s*:\s*([\d.]+)$", re.I)

    def __init__(self, path: str) -> None:
        self.path = path
        self.names: dict[int, str] = {}
        self.driver: str | None = None

    def feed(self, lineno: int, line: str) -> None:
        text = _clean(line)
        m = self._L.match(text)
        if m:
            self.names[int(m.group(1))] = m.group(2).strip()
            return
        m = self._ENV.match(text)
        if m and not re.search(r"Compute Capability|UUID|\bMiB\b", m.group(2)):
            for i in m.group(1).split(","):
                if i:
                    self.names[int(i)] = m.group(2).strip()
            return
        m = self._DRIVER.match(text)
        if m:
            self.driver = m.group(1)

    def results(self) -> list[Hardware]:
        if not self.names:
            return []
        names = [self.names[i] for i in sorted(self.names)]
        return [_hardware(names, memory_mib=[], driver=self.driver, source=self.path)]


# ------------------------------------------------------- plain `nvidia-smi` table


class NvidiaSmiTable:
    """The default `nvidia-smi` box: driver/CUDA from its title row, then per GPU a
    `|   0  NVIDIA H100 80GB HBM3   On  |` row followed by its `0MiB / 81559MiB` row."""

    kind = "nvidia-smi-table"
    _TITLE = re.compile(r"NVIDIA-SMI \S+\s+Driver Version: (\S+)\s+CUDA Version: (\S+)")
    _GPU = re.compile(rf"^\|\s+({_INDEX})\s+(.+?)\s+(?:On|Off)\s+\|")
    _MEM = re.compile(r"(\d{1,12})MiB\s*/\s*(\d{1,12})MiB")

    def __init__(self, path: str) -> None:
        self.path = path
        self.driver = self.cuda = None
        self.gpus: dict[int, dict] = {}
        self._last: int | None = None

    def feed(self, lineno: int, line: str) -> None:
        text = _clean(line)
        m = self._TITLE.search(text)
        if m:
            self.driver, self.cuda = m.group(1), m.group(2)
            return
        m = self._GPU.match(text)
        if m:
            self._last = int(m.group(1))
            self.gpus[self._last] = {"name": m.group(2).strip()}
            return
        m = self._MEM.search(text)
        if m and self._last is not None and "mib" not in self.gpus[self._last]:
            self.gpus[self._last]["mib"] = float(m.group(2))
            self._last = None

    def results(self) -> list[Hardware]:
        if not self.gpus:
            return []
        gpus = [self.gpus[i] for i in sorted(self.gpus)]
        return [_hardware([g["name"] for g in gpus], memory_mib=[g["mib"] for g in gpus if "mib" in g],
                          driver=self.driver, cuda=self.cuda, source=self.path)]


PARSERS = (NvidiaSmiQ, NvidiaSmiCsv, NvidiaSmiTable, NvidiaSmiList, NvidiaSmiTopo)


def parse_lines(lines, path: str = "<text>") -> list[Hardware]:
    """Run every nvidia-smi parser over an iterable of lines (one pass)."""
    parsers = [cls(path) for cls in PARSERS]
    for n, line in enumerate(lines, 1):
        for p in parsers:
            p.feed(n, line.rstrip("\n"))
    return [hw for p in parsers for hw in p.results()]


# ----------------------------------------------------------------------- merge


def merge_hardware(found: list[Hardware]) -> Hardware | None:
    """One Hardware from several views of the same machine: the GPU name, memory,
    driver and CUDA from -q/csv/-L; topology (interconnect, links, NUMA) from
    topo -m; the largest GPU count any of them saw. Interconnect stays None when
    no topology was given (hardware_from_string assumes one; this does not)."""
    if not found:
        return None
    named = [h for h in found if h.gpu != "unknown"] or found
    base = named[0]
    topo = [h for h in found if h.interconnect]
    first = lambda attr: next((getattr(h, attr) for h in found if getattr(h, attr) is not None), None)  # noqa: E731
    links = {**{k: v for h in named for k, v in h.links.items() if "-" not in k},
             **(topo[-1].links if topo else {})}
    sources = list(dict.fromkeys(h.source for h in found if h.source))
    return base.model_copy(update={
        "count": max(h.count for h in found), "memory_gb": first("memory_gb"), "driver": first("driver"),
        "cuda": first("cuda"), "utilization_pct": first("utilization_pct"),
        "interconnect": topo[-1].interconnect if topo else None,
        "numa_nodes": topo[-1].numa_nodes if topo else None, "links": links,
        "source": ", ".join(sources) or None})


# ------------------------------------------------------- "8x RTX PRO 6000" text


def hardware_from_string(text: str) -> tuple[Hardware, list[str]]:
    """(Hardware, warnings) for a description like "8x H100" or "4x RTX PRO 6000 PCIe".
    An unknown GPU is kept as written (known=False) with a warning, never an error.
    Interconnect when unsaid: NVLink for a multi-GPU NVLink part (SXM boards), else PCIe."""
    count, name, ic = parse_gpu_string(text)
    spec = lookup_gpu(name)
    warnings = [] if spec else [f"GPU {name!r} is not in kb's GPU table: architecture and memory unknown"]
    if ic is None:
        ic = "NVLink" if spec and spec.nvlink and count > 1 else "PCIe"
    return Hardware(gpu=spec.name if spec else name, arch=spec.arch if spec else None,
                    memory_gb=spec.memory_gb if spec else None, count=count, interconnect=ic,
                    known=spec is not None, source=f"--gpu {text}"), warnings
