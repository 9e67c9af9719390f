"""Server launch commands, as people paste them: `python -m sglang.launch_server ...`,
`sglang serve ...`, `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server ...`,
with `VAR=value` prefixes, `$ ` prompts, `\\` continuations and shell redirections.
Tokenised with shlex; nothing is ever executed."""

from __future__ import annotations

import re
import shlex
from typing import Any, Literal

from pydantic import BaseModel, Field

from ingest.serverlog import redact
from kb.argv import docker_entrypoint, docker_image_at
from kb.flagdata import newest_flags
from kb.records import Where
from kb.redact import redact_data

_PY_ENTRY = re.compile(
    r"\bpython[\d.]*(?:\s+-[A-Za-z]+)*\s+-m\s+"
    r"(sglang\.launch_server|sglang_router\.launch_server|vllm\.entrypoints\.openai\.api_server|vllm\.entrypoints\.api_server)\b"
)
_CLI_ENTRY = re.compile(r"\b(sglang|vllm) serve\b")
_ENV_PREFIX = re.compile(r"((?:[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)\s+)+)$")
# what may stand right before a bare `vllm serve` so that prose ("run vllm serve to ...") is not taken
_CLI_LEAD = re.compile(r"(?:^|[$#>`;|&(]|\b(?:nohup|exec|time|sudo|env|run|--)|\S+[/:]\S*)\s*$")
_CONTINUATION = re.compile(r"\\[ \t]*\r?\n[ \t]*(?:> )?")
MAX_COMMAND_CHARS = 65536
MAX_COMMANDS = 200


class LaunchCommand(BaseModel):
    """One server launch command line."""

    engine: Literal["sglang", "vllm"]
    entry: str  # "sglang.launch_server", "sglang serve", "vllm serve", "vllm.entrypoints.openai.api_server"
    model: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)  # flags exactly as written → value (True for a switch)
    norm_args: dict[str, Any] = Field(default_factory=dict)  # "--tp_size" → "tp-size"
    positional: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    raw: str
    source: Where | None = None

    def get(self, name: str, default: Any = None) -> Any:
        """A flag's value under any spelling: get("tp-size") == get("--tp_size")."""
        return self.norm_args.get(norm_flag(name), default)


def norm_flag(flag: str) -> str:
    return flag.lstrip("-").replace("_", "-").lower()


def find_entry(text: str) -> tuple[int, int, re.Match, str] | None:
    """(start of env prefix, start of the program word, entry match, engine) of the first
    launch command in `text`."""
    best = None
    m = _PY_ENTRY.search(text)
    while m and text[m.end():m.end() + 1] == "`":
        # "The `python -m vllm.entrypoints.openai.api_server` command is deprecated" (vLLM's
        # own start-up warning): a bare entry closed by a code span is a mention, not a command
        m = _PY_ENTRY.search(text, m.end())
    if m:
        best = (m, "vllm" if m.group(1).startswith("vllm") else "sglang")
    for c in _CLI_ENTRY.finditer(text):
        if best and c.start() > best[0].start():
            break
        if cli_context(text, c):
            best = (c, c.group(1))
            break
    if not best:
        return None
    m, engine = best
    word = _word_start(text, m.start())  # keep a path in front: /opt/venv/bin/python3
    env = _ENV_PREFIX.search(text, max(0, word - 4096), word)
    start = env.start() if env else word
    lead = text[:start].strip()
    if lead.startswith("#") and not lead.startswith("#!"):
        return None  # a commented-out command
    return start, word, m, engine


def _word_start(text: str, i: int) -> int:
    stop = max(0, i - 4096)
    while i > stop and not text[i - 1].isspace() and text[i - 1] not in "`'\"(;|&=":
        i -= 1
    return i


def cli_context(text: str, m: re.Match) -> bool:
    """A bare `vllm serve` counts at a command position or before a model path or flag,
    so that prose ("run vllm serve to start it") is not taken for a command."""
    word = _word_start(text, m.start())
    env = _ENV_PREFIX.search(text, max(0, word - 4096), word)
    lead_end = env.start() if env else word
    if _CLI_LEAD.search(text[max(0, lead_end - 200):lead_end]):
        return True
    nxt = text[m.end():m.end() + 300].split(None, 1)
    return bool(nxt) and (nxt[0][0] in "-$~./" or "/" in nxt[0])


def parse_launch_command(text: str, where: Where | None = None) -> LaunchCommand | None:
    """The first launch command in `text` (continuations already joined or not), else None."""
    text = re.sub(r"\\\s*$", "", _CONTINUATION.sub(" ", text))  # a capture may end mid-continuation
    found = find_entry(text)
    if not found:
        return _docker_launch(text, where)
    start, word, m, engine = found
    env_text = text[start:word]
    tail = _cut_shell_tail(text[m.end(): m.end() + MAX_COMMAND_CHARS])
    raw = (text[start: m.end()] + tail).strip()
    env = {}
    for tok in shell_words(env_text):
        key, _, value = tok.partition("=")
        env[key] = redact(key, value)
    entry = m.group(1) if m.re is _PY_ENTRY else f"{m.group(1)} serve"
    tokens = shell_words(tail)
    positional: list[str] = []
    if in_prose(text[:start], tokens, entry.endswith(" serve")):
        tokens = prose_command(tokens, engine, entry.endswith(" serve"))
        raw = (text[start: m.end()] + " " + shlex.join(tokens)).strip()
    if entry.endswith(" serve") and tokens and not _is_flag(tokens[0]):
        positional.append(tokens.pop(0))  # `vllm serve MODEL`
    args = flag_values(tokens, positional)
    raw = _scrub(raw, [k for k, v in args.items() if v == "<redacted>"],
                 [k for k, v in env.items() if v == "<redacted>"])
    norm = {norm_flag(k): v for k, v in args.items()}
    model = norm.get("model-path") or norm.get("model")
    if not isinstance(model, str):
        model = positional[0] if entry == "vllm serve" and positional else None
    cmd = LaunchCommand(engine=engine, entry=entry, model=model, args=args, norm_args=norm,
                        positional=positional, env=env, raw=raw[:MAX_COMMAND_CHARS], source=where)
    # beyond credential-named flags and variables: tokens by their shape, passwords in URLs
    return LaunchCommand.model_validate(redact_data(cmd.model_dump()))


_DOCKER_RUN = re.compile(r"(?<![\w.-])(?:docker|podman)\s+run\b")
_DOCKER_HINT = re.compile(r"(?<![\w.-])(?:docker|podman)\s+run\b|vllm-openai")
_VLLM_IMAGE = re.compile(r"(?:^|/)vllm-openai(?:[:@]|$)")
_PY_WORD = re.compile(r"(?:^|/)python[\d.]*$")
_MODULES = ("sglang.launch_server", "sglang_router.launch_server", "vllm.entrypoints.openai.api_server",
            "vllm.entrypoints.api_server")


def _docker_launch(text: str, where: Where | None) -> LaunchCommand | None:
    """`docker run [options] IMAGE [args]` where the container runs the server: the vLLM
    OpenAI image (`vllm/vllm-openai`, whose entrypoint is the vLLM server: the words
    after the image are its arguments, model positional or `--model`), or any image with
    `--entrypoint python3` and `-m sglang.launch_server ...` after it."""
    m = _DOCKER_RUN.search(text)
    if not m:
        return None
    lead = text[max(0, m.start() - 200):m.start()]
    if lead.rstrip().rsplit("\n", 1)[-1].lstrip().startswith("#"):
        return None  # commented out
    env_m = _ENV_PREFIX.search(text, max(0, m.start() - 4096), m.start())
    start = env_m.start() if env_m else m.start()
    raw = (text[start:m.start()] + _cut_shell_tail(text[m.start(): m.start() + MAX_COMMAND_CHARS])).strip()
    words = shell_words(raw[m.start() - start:])
    at = docker_image_at(words)
    if at is None:
        return None
    image, rest = words[at], words[at + 1:]
    entrypoint = docker_entrypoint(words, at)
    if entrypoint and _PY_WORD.search(entrypoint) and len(rest) >= 2 and rest[0] == "-m" and rest[1] in _MODULES:
        entry, engine, tokens = rest[1], "vllm" if rest[1].startswith("vllm") else "sglang", rest[2:]
    elif not entrypoint and _VLLM_IMAGE.search(image.split("@")[0].rsplit(":", 1)[0] + ":"):
        entry, engine, tokens = "vllm serve", "vllm", list(rest)
        if tokens[:2] == ["vllm", "serve"]:
            tokens = tokens[2:]
    else:
        return None
    env = {}
    for tok in shell_words(text[start:m.start()]):
        key, _, value = tok.partition("=")
        env[key] = redact(key, value)
    secret_env = [k for k, v in env.items() if v == "<redacted>"]
    for i, w in enumerate(words[2:at], 2):  # -e KEY=VALUE inside the container: redact, do not re-export
        pair = words[i + 1] if w in ("-e", "--env") and i + 1 < at else w.split("=",
                                                                                1)[1] if w.startswith("--env=") else ""
        key, eq, value = pair.partition("=")
        if eq and redact(key, value) == "<redacted>":
            secret_env.append(key)
    positional: list[str] = []
    if entry == "vllm serve" and tokens and not _is_flag(tokens[0]):
        positional.append(tokens.pop(0))
    args = flag_values(tokens, positional)
    raw = _scrub(raw, [k for k, v in args.items() if v == "<redacted>"], [])
    for k in secret_env:  # the value up to a quote or space: a quoted `"KEY=value"` keeps its quotes
        raw = re.sub(rf"(\b{re.escape(k)}=)[^\s\"']+", r"\1<redacted>", raw)
    norm = {norm_flag(k): v for k, v in args.items()}
    model = norm.get("model-path") or norm.get("model")
    if not isinstance(model, str):
        model = positional[0] if entry == "vllm serve" and positional else None
    cmd = LaunchCommand(engine=engine, entry=entry, model=model, args=args, norm_args=norm, positional=positional,
                        env=env, raw=raw[:MAX_COMMAND_CHARS], source=where)
    return LaunchCommand.model_validate(redact_data(cmd.model_dump()))


def _scrub(raw: str, flags: list[str], env_keys: list[str]) -> str:
    """`raw` without the values of credential flags and variables (--api-key, HF_TOKEN=...)."""
    for f in flags:
        raw = re.sub(rf"({re.escape(f)}(?:=|\s+))(\"[^\"]*\"|'[^']*'|\S+)", r"\1<redacted>", raw)
    for k in env_keys:
        raw = re.sub(rf"(\b{re.escape(k)}=)(\"[^\"]*\"|'[^']*'|\S+)", r"\1<redacted>", raw)
    return raw


def _is_flag(tok: str) -> bool:
    return len(tok) > 1 and tok[0] == "-" and not re.match(r"-\.?\d", tok)


# words that follow `vllm serve` in a sentence ("vllm serve on 2x RTX 5090 with ...") but
# never name a model
_PROSE_WORDS = frozenset(
    "on with in for to and or but at from via using when after before is was fails failed crashes crashed "
    "hangs errors works worked does doesn't did didn't can't cannot".split())
_CLAUSE_END = re.compile(r"[,:;]$|[A-Za-z)]\.$")  # "flashinfer_b12x," "anything:" "Qwen3.6-35B-A3B."
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?$")


def in_prose(before: str, tokens: list[str], serve: bool) -> bool:
    """Whether a launch command sits inside a sentence: words lead up to it on its line
    ("... on 8x H200 with sglang serve --tp 8 ..."), an English word follows `serve`, or a
    word after it closes a clause ("--moe-backend flashinfer_b12x, NVFP4 ...")."""
    lead = before.rsplit("\n", 1)[-1]
    if re.search(r"[A-Za-z]{2,}", lead) and not _CLI_LEAD.search(lead):
        return True
    if serve and tokens and tokens[0].lower() in _PROSE_WORDS:
        return True
    return any(_CLAUSE_END.search(t) for t in tokens if not _is_flag(t) and not t.startswith(("{", "[")))


def prose_command(tokens: list[str], engine: str, serve: bool) -> list[str]:
    """The command's own words when it sits in a sentence: the words before the first flag
    only if one is a model path, then each flag with at most its value (more values only
    while they are numbers: `--cuda-graph-sizes 1 2 4`); the first other word, or a value
    that closes a clause, ends the command, because there the sentence resumes."""
    catalog = newest_flags(engine)
    out: list[str] = []
    i, n = 0, len(tokens)
    while i < n and not _is_flag(tokens[i]):
        word = tokens[i].rstrip(",:;.")
        if serve and not out and "/" in word:
            out.append(word)  # `vllm serve org/model, ...`
        i += 1
    while i < n and _is_flag(tokens[i]):
        flag = tokens[i]
        out.append(flag)
        i += 1
        if "=" in flag or catalog.get(flag, {}).get("takes_value", True) is False:
            continue
        if i < n and not _is_flag(tokens[i]):
            value = tokens[i]
            i += 1
            if _CLAUSE_END.search(value):
                out.append(value.rstrip(",:;."))
                break
            out.append(value)
            while i < n and _NUMBER.match(tokens[i]) and _NUMBER.match(value):
                out.append(tokens[i])
                i += 1
    return out


def flag_values(tokens: list[str], positional: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        i += 1
        if not _is_flag(tok):
            positional.append(tok)
            continue
        if tok.startswith("--") and "=" in tok:
            key, _, value = tok.partition("=")
            args[key] = redact(key, value)
            continue
        values = []
        while i < n and not _is_flag(tokens[i]):
            values.append(tokens[i])
            i += 1
        value: Any = True if not values else values[0] if len(values) == 1 else values
        args[tok] = redact(tok, value)
    return args


def shell_words(text: str) -> list[str]:
    for attempt in (text, text + '"', text + "'"):
        try:
            return shlex.split(attempt, comments=True)
        except ValueError:
            continue
    return text.split()


def _cut_shell_tail(text: str) -> str:
    """The command's own words: up to the first unquoted pipe, `;`, `&`, redirection, backtick
    or comment (a `2>&1` loses its `2`)."""
    quote = ""
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "|;&<>`\n" or (c == "#" and (i == 0 or text[i - 1].isspace())):
            if c in "<>" and i and text[i - 1].isdigit() and (i < 2 or text[i - 2].isspace()):
                return text[: i - 1]
            return text[:i]
    return text


class LaunchCommandLines:
    """LineParser: launch commands inside any capture (terminal session, script, notes),
    joining `\\` continuation lines, including an env prefix on the lines before."""

    kind = "launch-command"

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.found: list[LaunchCommand] = []
        self.seen: set[str] = set()
        self.pending: list[str] = []  # the command being read
        self.pending_line = 0
        self.before: list[str] = []  # continued lines just before, which may carry `VAR=...`

    def feed(self, lineno: int, line: str) -> None:
        if self.pending:
            self.pending.append(line)
            if _continues(line) and sum(map(len, self.pending)) < MAX_COMMAND_CHARS and len(self.pending) < 500:
                return
            self._finish()
            return
        if ((("launch_server" in line or " serve" in line or "api_server" in line) and find_entry(line))
                or ("run" in line or "vllm-openai" in line) and _DOCKER_HINT.search(line)):
            self.pending, self.pending_line = self.before + [line], lineno - len(self.before)
            self.before = []
            if not _continues(line):
                self._finish()
            return
        # a comment ends at its newline even when it ends with a backslash
        if _continues(line) and not line.lstrip().startswith("#") and len(self.before) < 20:
            self.before.append(line)
        else:
            self.before = []

    def _finish(self) -> None:
        text = "\n".join(self.pending)
        self.pending = []
        try:
            cmd = parse_launch_command(text, Where(path=self.path, line=self.pending_line))
        except (ValueError, TypeError):
            cmd = None
        if cmd and cmd.raw not in self.seen and len(self.found) < MAX_COMMANDS:
            self.seen.add(cmd.raw)
            self.found.append(cmd)

    def results(self) -> list[LaunchCommand]:
        if self.pending:
            self._finish()
        return list(self.found)


_FLAG_LINE = re.compile(r"^\s*[-*]?\s*`?(--[a-z][\w-]*(?:[= ][^\s`\\][^`\\]*)?)`?\s*$")


class FlagListLines:
    """LineParser: server flags listed one per line without the command (as benchmark
    write-ups print "backend parameters"). Two or more consecutive flag lines become a
    LaunchCommand whose entry is "flags"; the engine is the one whose flag catalog
    knows most of them."""

    kind = "server-flags"

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.block: list[str] = []
        self.start = 0
        self.blocks: list[tuple[int, list[str]]] = []

    def feed(self, lineno: int, line: str) -> None:
        m = _FLAG_LINE.match(line) if len(line) < 400 else None
        if m and not _flag_run(m.group(1)):
            if not self.block:
                self.start = lineno
            self.block.append(m.group(1).strip())
            return
        self._close()
        if len(line) < MAX_COMMAND_CHARS and _flag_run(line):
            # the same flags written on one line (`--a=1 --b 2 --c`), as a write-up or an
            # issue lists the engine parameters of a deployment without its entry point
            self.start, self.block = lineno, [line.strip()]
            self._close(least=1)

    def _close(self, least: int = 2) -> None:
        if len(self.block) >= least and len(self.blocks) < MAX_COMMANDS:
            self.blocks.append((self.start, self.block))
        self.block = []

    def results(self) -> list[LaunchCommand]:
        self._close()
        out = []
        for start, flags in self.blocks:
            tokens = shell_words(" ".join(flags))
            args = flag_values(tokens, [])
            engine = _engine_of(args)
            if engine is None:
                continue
            norm = {norm_flag(k): v for k, v in args.items()}
            model = norm.get("model-path") or norm.get("model")
            out.append(LaunchCommand(engine=engine, entry="flags", model=model if isinstance(model, str) else None,
                                     args=args, norm_args=norm, raw=" ".join(flags)[:MAX_COMMAND_CHARS],
                                     source=Where(path=self.path, line=start)))
        return out


def _flag_run(line: str) -> bool:
    """A line of two or more server flags and nothing else: every word is a `--flag`
    (`--flag=value` too) or the value right after one."""
    text = line.strip()
    # the first word starts with "--" only if the text starts with "-", a quote or a backslash:
    # any other line is not split (shlex costs ~0.1 ms a line: most of a long log's other lines)
    if not text or text[0] not in "-\"'\\":
        return False
    words = shell_words(text)
    if len(words) < 2 or not words[0].startswith("--"):
        return False
    flags, after_flag = 0, False
    for w in words:
        if w.startswith("--") and len(w) > 3:
            flags += 1
            after_flag = "=" not in w
        elif after_flag and not w.startswith("-"):
            after_flag = False
        else:
            return False
    return flags >= 2


def _engine_of(args: dict) -> str | None:
    """sglang or vllm: whichever newest flag catalog knows more of these flags."""
    names = [k.split("=")[0] for k in args]
    newest = {e: newest_flags(e) for e in ("sglang", "vllm")}
    score = {e: sum(n in flags for n in names) for e, flags in newest.items()}
    best = max(score, key=score.get)
    return best if score[best] and score[best] > min(score.values()) else None


def _continues(line: str) -> bool:
    return line.rstrip().endswith("\\")
