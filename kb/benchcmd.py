"""A serving benchmark's command line, read from any text: the settings that decide
what it measures.

Tools: `vllm bench serve` (vllm/benchmarks/serve.py), vLLM's older
`benchmarks/benchmark_serving.py`, and sglang's `python -m sglang.bench_serving`
(sglang/benchmark/serving.py). Their defaults (as of vLLM 0.32 and sglang 0.5.23,
read from those files): vLLM sends `--num-prompts 1000` at `--request-rate inf`,
with `--num-warmups 0` and `--ignore-eos` off; sglang's bench_serving sends one warm-up
request (`--warmup-requests 1`) and ignores EOS unless `--disable-ignore-eos`.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

ENTRY = re.compile(r"(?:\bvllm\s+bench\s+serve\b|\bbenchmark_serving\.py\b|-m\s+sglang\.bench_serving\b)")


@dataclass
class BenchCommand:
    tool: str  # "vllm" or "sglang"
    text: str
    args: dict[str, object] = field(default_factory=dict)  # "--num-prompts" → "50"; a switch → True

    def number(self, name: str) -> float | None:
        v = self.args.get(name)
        if v is None or v is True:
            return None
        if str(v).lower() in ("inf", "infinity"):
            return float("inf")
        try:
            x = float(str(v))
        except ValueError:
            return None
        return None if math.isnan(x) else x  # the clients' argparse would take "nan"; no load is read from it

    @property
    def warmups(self) -> float:
        """Warm-up requests the tool sends before measuring, its default when unset."""
        n = self.number("--num-warmups" if self.tool == "vllm" else "--warmup-requests")
        return n if n is not None else (0 if self.tool == "vllm" else 1)

    @property
    def ignores_eos(self) -> bool:
        if self.tool == "vllm":
            return self.args.get("--ignore-eos") is True
        return self.args.get("--disable-ignore-eos") is not True

    def with_args(self, changes: dict[str, object]) -> str:
        """The command with these settings changed or added (True: a switch), others kept."""
        words = _words(self.text)
        out: list[str] = []
        i = 0
        while i < len(words):
            w = words[i]
            name = w.split("=", 1)[0]
            if name in changes:
                takes = "=" not in w and i + 1 < len(words) and not words[i + 1].startswith("--")
                i += 2 if takes and self.args.get(name) is not True else 1
                continue
            out.append(w)
            i += 1
        for name, v in changes.items():
            out += [name] if v is True else [name, str(v)]
        return " ".join(shlex.quote(w) if w and re.search(r"[\s\"'$]", w) else w for w in out)


_CONTINUED = re.compile(r"[ \t]*\\\s*\n\s*")


def join(text: str) -> str:
    """`text` with its `\\` line continuations joined (a pasted multi-line command as one line)."""
    return _CONTINUED.sub(" ", text)


def _words(text: str) -> list[str]:
    text = join(text)
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


# what a pasted line holds before the command: a shell prompt (`$ `, `(venv) $ `,
# `user@host:~/dir$ `, `# `, a quoted `> `) or a markdown code span's backtick
_PROMPT = re.compile(r"^(?:`|(?:\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+(?::\S*)?)?[$#%>]\s+)")


def parse(text: str) -> BenchCommand | None:
    """The first serving-benchmark command in `text` (one line or `\\`-continued lines)."""
    joined = join(text)
    m = ENTRY.search(joined)
    if not m:
        return None
    line_start = joined.rfind("\n", 0, m.start()) + 1
    line_end = joined.find("\n", m.end())
    line = joined[line_start: line_end if line_end >= 0 else None].strip()
    if _PROMPT.match(line):  # the corrected command is written out: it must run as given
        line = _PROMPT.sub("", line).rstrip("`").strip()
    tool = "sglang" if "sglang" in m.group(0) else "vllm"
    words = _words(line)
    args: dict[str, object] = {}
    for i, w in enumerate(words):
        if not w.startswith("--"):
            continue
        if "=" in w:
            k, v = w.split("=", 1)
            args[k] = v
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            args[w] = words[i + 1]
        else:
            args[w] = True
    return BenchCommand(tool, line, args)
