"""Every launch command kb prints parses under the real engine.

The commands are collected the way a user gets them: `kb launch` for every sample
config.json on several GPU sets and both engines, and `kb diagnose` on every scenario of
the diagnosis sets (recommendations' commands and the combined command). Each is parsed
with the engine's own argument parser in the engines venv (vLLM 0.32.0, sglang 0.5.23:
scripts/check_commands.py builds them as the engines' entry points do) when it targets
that version; a command that targets another catalogued version is checked against that
version's catalog, which scripts/gen_flag_catalog.py generated from the same parsers.
The test prints every command that fails, with the parser's own message.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from kb.launchcmd import SHELL_VARIABLE

sys.path.insert(0, str(ROOT / "tests"))
from live import vllm_server as vs  # noqa: E402

CFG = DATA / "samples" / "model_configs"
SETS = [DATA / "diagnosis", DATA / "diagnosis_heldout", DATA / "diagnosis_2026", DATA / "scenarios"]
GPU_SETS = ["8x H200", "8x RTX PRO 6000", "4x H100", "1x RTX 5090"]
REAL = {"vllm": "0.32.0", "sglang": "0.5.23"}
LAUNCHERS = {("vllm", "serve"): 2, ("-m", "sglang.launch_server"): 3, ("-m", "vllm.entrypoints.openai.api_server"): 3}


def _args_after_launcher(argv: list[str]) -> list[str] | None:
    for i in range(len(argv) - 1):
        n = LAUNCHERS.get((argv[i], argv[i + 1]))
        if n:
            return argv[i + 2:]
    return None


CONTROL = {"&", "&&", ";", "|", "||"}


def _launch_commands(text: str) -> list[list[str]]:
    """Launch commands in a printed command: the shell's own words split at its control
    operators (`&` for a replica in the background, `&&` chains, `;`), lines joined."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars="&;|")
        lex.whitespace_split = True
        try:
            words = list(lex)
        except ValueError:
            continue
        # a word that is one shell variable (the user's `--port ${SERVER_PORT}`, which kb keeps
        # for the shell to expand) stands for a value kb cannot know: a number parses for any type
        words = ["1" if SHELL_VARIABLE.fullmatch(w) else w for w in words]
        cmd: list[str] = []
        for w in [*words, ";"]:
            if w in CONTROL:
                if _args_after_launcher(cmd) is not None:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def _engine(argv: list[str]) -> str:
    return "sglang" if "sglang.launch_server" in argv else "vllm"


def collect() -> list[dict]:
    """[{id, engine, version, argv}] from kb launch and kb diagnose, deduplicated."""
    import os
    import tempfile

    from ingest.hf_config import load_profile
    from ingest.nvidia_smi import hardware_from_string
    from kb.errors import KbError
    from kb.flags import catalog
    from kb.launch import plan

    seen, items = set(), []

    def add(origin: str, argv: list[str], version: str) -> None:
        key = (version, tuple(argv))
        if key not in seen:
            seen.add(key)
            items.append({"id": f"{origin} #{len(items)}", "engine": _engine(argv), "version": version, "argv": argv})

    for cfg in sorted(p for p in CFG.glob("*config.json") if not p.name.endswith("hf_quant_config.json")):
        for gpus in GPU_SETS:
            for engine in ("sglang", "vllm"):
                hw, _ = hardware_from_string(gpus)
                try:
                    p = plan(load_profile(cfg), hw, engine, catalog(engine), "org/model")
                except KbError:
                    continue  # a refusal prints no command
                add(f"kb launch {cfg.name} {gpus} {engine}", p.argv, p.version)

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import diagnose_quality as dq

    findings, search = dq.findings_in_temp_home(Path(tempfile.mkdtemp(prefix="kb-truth-")))
    for root in SETS:
        for d, meta in dq.load_scenarios(root):
            from ingest.run import read_run
            from kb.diagnose import diagnose

            config = meta.get("config")
            ev = read_run(dq.evidence_files(d), config=str(ROOT / config) if config else None, gpu=meta.get("gpu"),
                          engine=meta.get("engine"))
            dx = diagnose(ev, findings, search=search)
            if not dx.catalog:
                continue
            texts = [c for r in dx.recommendations for c in r.commands] + ([dx.combined] if dx.combined else [])
            for t in texts:
                for argv in _launch_commands(t):
                    add(f"kb diagnose {root.name}/{d.name}", argv, dx.catalog.version)
    os.environ.pop("KB_HOME", None)
    return items


def _catalog_problems(item: dict) -> str | None:
    """For a version the engines venv does not hold: every flag in that version's catalog."""
    from kb.flags import catalog
    from kb.launchcmd import split_args

    cat = catalog(item["engine"], item["version"])
    _, pairs = split_args(["x", *_args_after_launcher(item["argv"])], set(getattr(cat, "short", []) or []))
    for flag, vals in pairs:
        if not flag.startswith("-"):
            continue
        problem = cat.check(flag, vals[0] if len(vals) == 1 else None)
        if problem:
            return problem
    return None


@pytest.fixture(scope="module")
def commands():
    return collect()


def test_every_printed_launch_command_parses(commands):
    py = vs.require_engines()
    real = [c for c in commands if REAL.get(c["engine"]) == c["version"]]
    other = [c for c in commands if REAL.get(c["engine"]) != c["version"]]
    assert len(commands) >= 100 and real, len(commands)
    proc = subprocess.run([str(py), str(ROOT / "scripts" / "check_commands.py")],
                          input=json.dumps([{"id": c["id"], "engine": c["engine"],
                                             "args": _args_after_launcher(c["argv"])} for c in real]),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["versions"] == {e: v for e, v in REAL.items() if e in doc["versions"]}
    by_id = {c["id"]: c for c in commands}
    bad = [(by_id[r["id"]], r["error"]) for r in doc["results"] if not r["ok"]]
    bad += [(c, p) for c in other if (p := _catalog_problems(c))]
    report = "\n".join(f"{c['id']} ({c['engine']} {c['version']}): {err}\n    {shlex.join(c['argv'])}" for c,
                       err in bad)
    print(f"{len(commands)} commands: {len(real)} parsed by the real parsers, {len(other)} checked against "
          f"their version's catalog; {len(bad)} fail")
    assert not bad, "commands that do not parse:\n" + report
