"""The engines' flag catalog files (kb/data/flags/<engine>-<version>.json, generated from
sglang's and vLLM's own argument parsers by scripts/gen_flag_catalog.py): which versions
are catalogued and each version's flags. Plain data, so parsers can tell a server flag
from anything else; choosing a version and a setting's spelling is kb.flags' job."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "flags"


def version_key(v: str) -> tuple:
    """A version string as a sortable tuple of its first four numbers ('0.5.8' → (0, 5, 8, 0));
    `nightly` (a build from main, kb.engineversion) after every release."""
    if v == "nightly":
        return (10**6, 0, 0, 0)
    parts = re.findall(r"\d+", v)
    return tuple(int(p) for p in parts[:4]) + (0,) * (4 - min(4, len(parts)))


@lru_cache(maxsize=None)
def versions(engine: str) -> list[str]:
    """Catalogued versions of `engine`, oldest first."""
    names = [p.stem.split("-", 1)[1] for p in DATA.glob(f"{engine}-*.json")]
    return sorted(names, key=version_key)


@lru_cache(maxsize=None)
def _file(engine: str, version: str) -> dict:
    return json.loads((DATA / f"{engine}-{version}.json").read_text())


def load(engine: str, version: str) -> dict:
    """flag → its entry (type, default, choices, dest, aliases) for one catalogued version."""
    return _file(engine, version)["flags"]


@lru_cache(maxsize=None)
def short_options(engine: str, version: str) -> frozenset[str]:
    """Single-dash spellings (vLLM's -tp, -dp) kept beside the flags in the catalog file."""
    return frozenset(_file(engine, version).get("short_options", {}))


@lru_cache(maxsize=None)
def any_version_flags(engine: str) -> frozenset[str]:
    """Every flag (and alias) of any catalogued version: a pasted command may be old or new."""
    out: set[str] = set()
    for v in versions(engine):
        for flag, info in load(engine, v).items():
            out.add(flag)
            out.update(info.get("aliases") or [])
    return frozenset(out)


def newest_flags(engine: str) -> dict:
    """The newest catalogued version's flags ({} when none is catalogued)."""
    known = versions(engine)
    return load(engine, known[-1]) if known else {}
