"""Any text is evidence: the lines of a run's files that findings' `log` and `text`
conditions can match, and the context prose names.

Every line of a small file is kept (a pasted issue, a chat message, notes, a short
log); past `MAX_ALL_LINES`, only notable lines (warnings, errors, fallbacks) are
kept, one per distinct message with its count and first line, so a 10 GB log
costs bounded memory. Periodic stats lines never reach this reader (ingest.run
gives them to the log parsers alone).
"""

from __future__ import annotations

import re

from ingest.markdown import context_from, log_message
from kb.evidence import TextLine
from kb.records import Where

MAX_ALL_LINES = 3000  # a file this short is kept whole
MAX_NOTABLE = 400  # distinct notable messages kept per file
MAX_LINE = 600

NOTABLE = re.compile(
    r"\b(?:WARNING|WARN|ERROR|CRITICAL|FATAL)\b|Traceback|Exception|\berror\b|\bwarn|fail|fall(?:ing)? ?back|"
    r"not supported|unsupported|deprecat|out of memory|\bOOM\b|timed? ?out|retract|preempt|"
    r"default .{0,40}config|not found|disabl|cannot|unable to|invalid", re.I)
_VARIABLE = re.compile(r"\d+(?:\.\d+)?")


def _key(text: str) -> str:
    return _VARIABLE.sub("#", log_message(text))[:200]


class TextLines:
    """LineParser-shaped (feed / results), fed every line that is not a stats line."""

    kind = "text"

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.all: list[tuple[int, str]] = []
        self.notable: dict[str, TextLine] = {}
        self.overflow = False

    def feed(self, lineno: int, line: str) -> None:
        text = line.strip()
        if not text:
            return
        text = text[:MAX_LINE]
        if not self.overflow:
            if len(self.all) < MAX_ALL_LINES:
                self.all.append((lineno, text))
            else:
                self.overflow = True
        if NOTABLE.search(text):
            k = _key(text)
            if k in self.notable:
                self.notable[k].count += 1
            elif len(self.notable) < MAX_NOTABLE:
                self.notable[k] = TextLine(text=text, where=Where(path=self.path, line=lineno), kind="log")

    def results(self, kind: str = "log") -> list[TextLine]:
        """Every line of a short file, else the notable ones. `kind` is "prose" for a
        file no format parser recognised."""
        if not self.overflow:
            return [TextLine(text=t, where=Where(path=self.path, line=n), kind=kind) for n, t in self.all]
        return list(self.notable.values())


def context_of(lines: list[TextLine]) -> dict:
    """Engine, version, GPUs, model and quantization that prose names (ingest.markdown's
    reading of free-form notes)."""
    return context_from("\n".join(t.text for t in lines))


# organisations that publish model weights on the Hugging Face hub: a mention
# `Org/Name-with-a-digit` of one of them in prose is a model repo id (`deepseek-ai/DeepSeek-V3`,
# a huggingface.co link), while other `a/b` words (tok/s, a GitHub project) are not
PUBLISHERS = (
    "Qwen", "deepseek-ai", "meta-llama", "mistralai", "moonshotai", "nvidia", "openai", "zai-org", "THUDM",
    "google", "microsoft", "RedHatAI", "neuralmagic", "MiniMaxAI", "ibm-granite", "allenai", "tiiuae", "01-ai",
    "baichuan-inc", "internlm", "stepfun-ai", "inclusionAI", "XiaomiMiMo", "tencent", "baidu", "codellama",
    "lmsys", "NousResearch", "unsloth", "Salesforce", "bigcode", "facebook", "CohereForAI", "CohereLabs",
    "ByteDance-Seed", "LGAI-EXAONE", "Snowflake", "casperhansen", "TheBloke", "amd", "intel", "nm-testing")
REPO_MENTION = re.compile(r"(?<![\w.-])(?<!github\.com/)((?:" + "|".join(map(re.escape, PUBLISHERS)) +
                          r")/[A-Za-z0-9][\w.-]*\d[\w.-]*)", re.I)


def repo_ids_in(lines: list[TextLine]) -> list[str]:
    """Model repo ids the text names, in order of first mention."""
    out: list[str] = []
    for t in lines:
        for rid in REPO_MENTION.findall(t.text):
            rid = rid.rstrip(".-")
            if rid not in out:
                out.append(rid)
    return out


FLAG_MENTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)+|(?<![\w-])--[a-z]{3,}\b")


def flags_in(lines: list[TextLine]) -> list[str]:
    out: list[str] = []
    for t in lines:
        for f in FLAG_MENTION.findall(t.text):
            if f not in out:
                out.append(f)
    return out
