"""Credentials out of anything kb keeps or prints: one place for the rules.

`redact(key, value)` hides the value of a setting whose name says it holds a
credential (api_key, hf_token, ...): the log and launch-command parsers use it.
`redact_text(text)` finds credentials inside free text (a pasted command, a note):
Hugging Face and OpenAI-style tokens, Authorization headers, `--api-key X`,
`HF_TOKEN=...`, and passwords in URLs. `redact_data` applies it to nested data.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

# A setting name that holds a credential; `token$` so that max_total_tokens and
# experts_per_token are not one.
SECRET_KEY = re.compile(r"api_?key|(?<!per_)token$|secret|password|passwd|credential", re.I)


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key.lower().strip("\"'").lstrip("-").replace("-", "_")))


def redact(key: str, value: Any) -> Any:
    """Keys that may hold a credential (api_key, hf_token, ...) keep only that they were set."""
    if value in (None, False, "", [], {}) or not is_secret_key(key):
        return value
    return REDACTED


_VALUE = r"(?:\"[^\"]*\"|'[^']*'|[^\s\"',;&|)]+)"
# https://user:pass@host → https://user:***@host
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)([^\s/@]+)(@)", re.I)
# Authorization: Bearer xxx / Authorization: Basic xxx / Authorization: xxx (the scheme is kept)
_AUTH_HEADER = re.compile(r"(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)([^\s\"',]+)", re.I)
# --api-key X, --hf-token=X: a flag whose name says credential
_FLAG = re.compile(rf"(--[A-Za-z][\w-]*)(=|\s+)({_VALUE})")
# HF_TOKEN=x, api_key=x, "api_key": "x", x-api-key: x (a colon needs a quoted key or a space
# after it, so `https://` is not read as a key)
_ASSIGN = re.compile(rf"(\"[A-Za-z_][\w.-]*\"|'[A-Za-z_][\w.-]*'|[A-Za-z_][\w.-]*)"
                     rf"(\s*=\s*|(?<=[\"'])\s*:\s*|\s*:\s+)({_VALUE})")
# tokens recognisable by their shape, wherever they stand
_TOKENS = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{30,}|"
                     r"(?<=\bBearer )[A-Za-z0-9._~+/=-]{8,}")
_NUMBER = re.compile(r"[\"']?[-+]?\d[\d,.]*[\"']?$")


def _keep_quotes(value: str) -> str:
    q = value[0] if value[:1] in "\"'" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{q}{REDACTED}{q}"


def _flag(m: re.Match) -> str:
    if not is_secret_key(m.group(1)) or m.group(3).startswith("-"):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{_keep_quotes(m.group(3))}"


def _assign(m: re.Match) -> str:
    key, sep, value = m.groups()
    # `#token: 1216` in a pasted log line is a count, not a credential
    if not is_secret_key(key) or (":" in sep and _NUMBER.match(value)) or value == REDACTED:
        return key + sep + _ASSIGN.sub(_assign, value)  # the value may hold an assignment itself
    return f"{key}{sep}{_keep_quotes(value)}"


def redact_text(text: str) -> str:
    """`text` with every credential it holds replaced (see the module docstring)."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(r"\1***\3", text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG.sub(_flag, text)
    text = _ASSIGN.sub(_assign, text)
    return _TOKENS.sub(REDACTED, text)


def redact_data(obj: Any) -> Any:
    """Every string inside dicts and lists redacted (a record dumped with model_dump)."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        return {k: redact_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_data(v) for v in obj]
    return obj
