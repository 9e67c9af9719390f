"""Credentials out of anything kb keeps or prints: one place for the rules.

`redact(key, value)` hides the value of a setting whose name says it holds a
credential (api_key, hf_token, ...): the log and launch-command parsers use it.
`redact_text(text)` finds credentials inside free text (a pasted command, a note):
Hugging Face and OpenAI-style tokens, Authorization headers, `--api-key X`,
`HF_TOKEN=...`, and passwords in URLs. `redact_data` applies it to nested data.
`register_secret(value)` adds a credential kb was handed (an --api-key), to be hidden
wherever it appears whatever its shape: kb/live/client registers the key it sends.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

# A setting name that holds a credential; `token$` so that max_total_tokens and
# experts_per_token are not one.
SECRET_KEY = re.compile(r"api_?key|(?<!per_)token$|secret|password|passwd|credential", re.I)


_KNOWN: set[str] = set()  # credentials this process was given


def register_secret(value: str | None) -> None:
    """A credential kb holds (an API key): redact_text hides it wherever a server or a
    file repeats it, even under an innocent name or in an error message."""
    if value and len(value.strip()) >= 4:
        _KNOWN.add(value.strip())


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key.lower().strip("\"'").lstrip("-").replace("-", "_")))


def redact(key: str, value: Any) -> Any:
    """Keys that may hold a credential (api_key, hf_token, ...) keep only that they were set."""
    if value in (None, False, "", [], {}) or not is_secret_key(key):
        return value
    return REDACTED


# A credential value: quoted (at most 4 KiB, on one line, so an unclosed quote costs
# little), or a run of characters up to a delimiter.
_VALUE = re.compile(r"\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s\"',;&|)]+")
# Every pattern starts a name only where a word starts (the lookbehinds): started
# inside a long word, each would scan to its end from every character (quadratic:
# a 20,000-character word took 45 s).
# https://user:pass@host → https://user:***@host
_URL_PASSWORD = re.compile(r"((?<![\w+.-])[a-z][a-z0-9+.-]*://[^\s/:@]+:)([^\s/@]+)(@)", re.I)
# Authorization: Bearer xxx / Authorization: Basic xxx / Authorization: xxx (the scheme is kept)
_AUTH_HEADER = re.compile(r"(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)([^\s\"',]+)", re.I)
# --api-key X, --hf-token=X: a flag whose name says credential (the name and separator;
# the value is read only after the name is known to be a credential's)
_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)(=|\s+)")
# HF_TOKEN=x, api_key=x, "api_key": "x", x-api-key: x (a colon needs a quoted key or a space
# after it, so `https://` is not read as a key)
_ASSIGN = re.compile(r"(\"[A-Za-z_][\w.-]*\"|'[A-Za-z_][\w.-]*'|(?<![\w.-])[A-Za-z_][\w.-]*)"
                     r"(\s*=\s*|(?<=[\"'])\s*:\s*|\s*:\s+)")
# tokens recognisable by their shape, wherever they stand
_TOKENS = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{30,}|"
                     r"(?<=\bBearer )[A-Za-z0-9._~+/=-]{8,}")
_NUMBER = re.compile(r"[\"']?[-+]?\d[\d,.]*[\"']?$")


def _keep_quotes(value: str) -> str:
    q = value[0] if value[:1] in "\"'" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{q}{REDACTED}{q}"


def _flag_is_secret(name: str, sep: str, value: str) -> bool:
    return not value.startswith("-")  # `--api-key --port 1`: the next flag is no value


def _assign_is_secret(key: str, sep: str, value: str) -> bool:
    # `#token: 1216` in a pasted log line is a count, not a credential
    return not ((":" in sep and _NUMBER.match(value)) or value == REDACTED)


def _values(text: str, name: re.Pattern, secret) -> str:
    """`text` with the value after each credential-named `name` match replaced. Scanning
    goes on right after the separator (not after the value), so a switch before
    `--api-key X` or an assignment inside another's value (`url=https://h?token=x`)
    is still seen, and every character is looked at a bounded number of times."""
    out, pos = [], 0
    while (m := name.search(text, pos)) is not None:
        out.append(text[pos:m.end()])
        pos = m.end()
        if not is_secret_key(m.group(1)):
            continue
        v = _VALUE.match(text, pos)
        if v and secret(m.group(1), m.group(2), v.group(0)):
            out.append(_keep_quotes(v.group(0)))
            pos = v.end()
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """`text` with every credential it holds replaced (see the module docstring)."""
    if not text:
        return text
    for known in _KNOWN:
        if known in text:
            text = text.replace(known, REDACTED)
    text = _URL_PASSWORD.sub(r"\1***\3", text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _values(text, _FLAG, _flag_is_secret)
    text = _values(text, _ASSIGN, _assign_is_secret)
    return _TOKENS.sub(REDACTED, text)


MAX_DEPTH = 64


def redact_data(obj: Any, _depth: int = 0) -> Any:
    """Every string inside dicts and lists redacted (a record dumped with model_dump),
    and the value of every dict key that names a credential (a nested
    `{"api_key": ...}` in a server's arguments). Data nested deeper than MAX_DEPTH
    (no real record is) is dropped rather than walked."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, (dict, list, tuple)) and _depth >= MAX_DEPTH:
        return REDACTED
    if isinstance(obj, dict):
        return {k: redact(str(k), redact_data(v, _depth + 1)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_data(v, _depth + 1) for v in obj]
    return obj
