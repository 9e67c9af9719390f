"""Parse launch commands with the engines' own argument parsers (run by the engines
venv's Python; tests/test_command_truth.py drives it).

stdin: a JSON list of {"id", "engine", "args"} where args are the words after the
launcher (`vllm serve` / `python -m sglang.launch_server` / `python -m
vllm.entrypoints.openai.api_server`). stdout: one JSON object {"versions": {engine:
version}, "results": [{"id", "ok", "error"}]}. The parsers are built the way
scripts/gen_flag_catalog.py builds them (the same construction the engines' own entry
points use), once per engine.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_flag_catalog as gen  # noqa: E402


class ParseFailed(Exception):
    pass


def parser_for(engine: str):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        built = gen.BUILDERS[engine](allow_stubs=True)
    parser = built["parser"]

    def error(message: str):  # argparse prints usage and exits 2; keep the message instead
        raise ParseFailed(message)

    for p in [parser, *[a.choices[c] for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                        for c in a.choices]]:
        p.error = error
    return parser, built["version"]


def main() -> None:
    items = json.load(sys.stdin)
    parsers, versions, out = {}, {}, []
    for it in items:
        eng = it["engine"]
        if eng not in parsers:
            parsers[eng], versions[eng] = parser_for(eng)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                parsers[eng].parse_args(it["args"])
            out.append({"id": it["id"], "ok": True, "error": None})
        except ParseFailed as e:
            out.append({"id": it["id"], "ok": False, "error": str(e)})
        except SystemExit as e:
            out.append({"id": it["id"], "ok": False, "error": f"exit {e.code}"})
    json.dump({"versions": versions, "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
