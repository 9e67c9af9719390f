"""The engine version a run's text shows, wherever people paste it.

Read from, strongest first:
- the server's own start-up line: vLLM `vLLM API server version 0.11.0`;
- an installed package: `vllm==0.11.0` (pip freeze, uv), `sglang: 0.5.4` (sglang's
  `python -m sglang.check_env`), `vLLM Version : 0.28.1rc1.dev580+g385dce36b` (vLLM's collect_env);
- a container image tag: `vllm/vllm-openai:v0.11.0`, `lmsysorg/sglang:v0.5.4.post1-cu129`,
  `vllm/vllm-openai:nightly`, `lmsysorg/sglang:dev` (sglang's image built from main);
- prose and pip list: `vllm 0.11.0`, `vLLM v0.11.0`, `sglang version 0.5.4`; an upgrade told in prose
  (`from vLLM 0.19 to 0.24`) reads as the version upgraded to;
- a build from main: `vllm nightly`, `sglang main branch` (a `0.11.1.dev12+g...` wheel reads as 0.11.1);
- a bare `v0.23.0` in prose that names exactly one engine.

A requirement that is not an installed version (`vllm>=0.11`) is not read. A build from
main is the version `nightly`; kb.flagdata.version_key orders it after every release,
so "fixed in >=0.X" holds for it and "regressed in <0.X" does not.
"""

from __future__ import annotations

import re

NIGHTLY = "nightly"

# four numbers for vLLM's patch-of-a-patch releases (0.10.1.1)
_NUM = r"\d+\.\d+(?:\.\d+){0,2}(?:\.?post\d+|rc\d+)?(?:\.dev\d+)?"
# the version grammar, public for modules that read versions in their own phrases (KB116)
VERSION = _NUM
# vLLM's start-up line, its version as printed (a local build's `+g…` suffix kept);
# ingest.vllm_log reads the run's version from the same line with this pattern
VLLM_START_UP = re.compile(r"vLLM API server version (\S+)|Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)")
_IMAGE = re.compile(r"(?:^|[\s\"'=/])(?P<repo>vllm/vllm-openai(?:-[a-z]+)?|lmsysorg/sglang|rocm/vllm(?:-dev)?|"
                    r"rocm/sgl-dev)\s*:\s*(?P<tag>[\w.+-]+)", re.I)
_TAG_VERSION = re.compile(rf"^v?({_NUM})")
_PACKAGE = re.compile(rf"(?<![\w-])(?P<eng>vllm|sglang)(?:\[[\w,]+\])?(?:\s+version)?\s*(?:==|:\s*)\s*v?"
                      rf"(?P<v>{_NUM})(?![\w.])", re.I)
_PROSE = re.compile(rf"(?<![\w/-])(?P<eng>vllm|sglang)(?:\s+version)?\s+v?(?P<v>{_NUM})(?![\w.])", re.I)
# an upgrade told in prose ("moved from vLLM 0.19 to 0.24", "sglang 0.5.8 -> 0.5.9"): the run is on the second
_UPGRADE = re.compile(rf"(?<![\w/-])(?P<eng>vllm|sglang)(?:\s+version)?\s+(?:from\s+)?v?{_NUM}\s+(?:to|->|→)\s+"
                      rf"(?:(?:vllm|sglang)\s+)?v?(?P<v>{_NUM})(?![\w.])", re.I)
_NIGHTLY = re.compile(r"(?<![\w/-])(?P<eng>vllm|sglang)(?:'s)?\s+(?:nightly|main\s+branch|from\s+main)\b"
                      r"|\bnightly\s+(?:build|wheel|image)?\s*(?:of\s+)?(?P<eng2>vllm|sglang)\b", re.I)
_BARE = re.compile(rf"(?<![\w./-])v({_NUM})(?![\w.])")
# an engine named in text (kb.rules.version_regression reads the same words)
ENGINE_WORD = {"vllm": re.compile(r"\bvllm\b", re.I), "sglang": re.compile(r"\bsg-?lang\b", re.I)}


def _image(repo: str, tag: str) -> tuple[str, str] | None:
    engine = "sglang" if "sgl" in repo.lower() else "vllm"
    tag = tag.lower()
    if tag in ("nightly", "dev", "main") or tag.startswith(("nightly-", "dev-")):
        return engine, NIGHTLY
    m = _TAG_VERSION.match(tag)
    if m and not repo.lower().startswith("rocm/"):  # ROCm images tag their own release numbers
        return engine, m.group(1)
    return None


def release(v: str) -> str:
    """A development wheel (`0.11.1.dev12`, built from main before 0.11.1) as the release it
    leads to: it carries most of that release's fixes."""
    return re.sub(r"\.dev\d+$", "", v)


def version_in(text: str, engine: str | None = None) -> tuple[str, str] | None:
    """(engine, version) the text shows, or None; with `engine` given, only that engine's."""
    found: list[tuple[str, str]] = []
    m = VLLM_START_UP.search(text)
    n = _TAG_VERSION.match(m.group(1) or m.group(2)) if m else None
    if n:
        found.append(("vllm", n.group(1)))
    found += [(m.group("eng").lower(), m.group("v")) for m in _PACKAGE.finditer(text)]
    found += [hit for m in _IMAGE.finditer(text) if (hit := _image(m.group("repo"), m.group("tag")))]
    found += [(m.group("eng").lower(), m.group("v")) for m in _UPGRADE.finditer(text)]
    found += [(m.group("eng").lower(), m.group("v")) for m in _PROSE.finditer(text)]
    for m in _NIGHTLY.finditer(text):
        found.append(((m.group("eng") or m.group("eng2")).lower(), NIGHTLY))
    named = [e for e, rx in ENGINE_WORD.items() if rx.search(text)]
    if not found and len(named) == 1:
        b = _BARE.search(text)
        if b:
            found.append((named[0], b.group(1)))
    for eng, v in found:
        if engine is None or eng == engine:
            return eng, release(v)
    return None
