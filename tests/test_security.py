"""No execution, no leaks. Nothing from ingested content is executed or reaches a shell;
every printed command keeps hostile values literal; credentials in anything ingested
(findings, logs, launch commands, benchmark files) are redacted before storage and
never shown. One redaction module: kb/redact.py."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import time

import pytest
from conftest import DATA, ROOT

SCENARIO = DATA / "scenarios" / "glm5-rtx-pro-6000"
SGLANG_LOG = DATA / "samples" / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log"
SWEEP = DATA / "samples" / "sglang_bench_jsonl" / "run-sglang-0.5.5_sweep_c1-32-128-256_server-info.jsonl"

HF = "hf_" + "Zq9" * 12  # shaped like a Hugging Face token
SK = "sk-" + "live" * 6
SECRETS = {"hf": HF, "sk": SK, "bearer": "eyJhbGciOiJIUzI1NiJ9.payload.sig", "pw": "pa55w0rdXYZ",
           "apikey": "K3yK3yK3y", "nested": "N3st3dS3cr3t"}


def assert_no_secret(text: str, where: str = "") -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name} secret leaked {where}: ...{text[max(0, text.find(value) - 80):][:200]}"


def cli(*args: str) -> str:
    """The real command line, in this process (an interpreter per call would cost seconds)."""
    from typer.testing import CliRunner

    from kb.cli import app

    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


# ---------------------------------------------------------------- no execution


FORBIDDEN_MODULES = {"subprocess", "pty", "pickle", "marshal", "shelve", "dill", "multiprocessing"}


def _forbidden(owner: str, name: str) -> bool:
    if owner in ("", "builtins") and name in ("eval", "exec", "compile", "__import__"):
        return True
    return owner == "os" and (name in ("system", "popen", "fork", "forkpty")
                              or name.startswith(("exec", "spawn", "posix_spawn")))


def violations(source: str, where: str = "<src>") -> list[str]:
    """Imports of process or code-loading modules and calls that run code or commands."""
    out = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            out += [f"{where}:{node.lineno} imports {m}" for m in mods if m.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if _forbidden(owner, name):
                out.append(f"{where}:{node.lineno} calls {owner + '.' if owner else ''}{name}")
    return out


# The modules that start a process: `kb tune` starts the server from the user's own launch
# command, as an argv list (no shell), in a process group led by kb's reaper (kb/live/reaper.py,
# started by the same module; it kills that group if kb dies and imports no process module);
# the log reader starts one worker on large files (`python -S -c` with a fixed code string and
# kb's own arguments) and reads its plans back with an unpickler that builds nothing but its
# plan class and Counter (tests/test_logscan.py::test_plan_reader_refuses_any_other_class).
STARTS_PROCESSES = {"kb/live/server.py": ("imports subprocess",),
                    "ingest/logscan.py": ("imports subprocess", "imports pickle")}


def _shell_true(source: str, where: str) -> list[str]:
    return [f"{where}:{n.lineno} passes shell=True" for n in ast.walk(ast.parse(source, where))
            if isinstance(n, ast.keyword) and n.arg == "shell" and not (isinstance(n.value, ast.Constant)
                                                                       and n.value.value is False)]


def test_no_code_path_can_execute_anything():
    """kb and ingest (kb/live included) import no process or code-loading module and call
    no eval/exec/os.system-like function. ast.literal_eval, which only builds literals,
    is the one evaluator; kb/live talks HTTP only, except kb/live/server.py, which starts
    the user's launch command for `kb tune` (an argv list, never through a shell), and
    ingest/logscan.py, which starts its own worker (STARTS_PROCESSES)."""
    files = sorted(p for d in ("kb", "ingest") for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 30
    found = []
    for p in files:
        rel, src = str(p.relative_to(ROOT)), p.read_text()
        allowed = STARTS_PROCESSES.get(rel)
        found += [v for v in violations(src, rel) if not (allowed and v.endswith(allowed))]
        found += _shell_true(src, rel)
    assert found == []


def test_the_execution_check_finds_what_it_looks_for():
    bad = "import subprocess\nfrom pickle import loads\nimport os\nos.system('x')\neval('1')\nos.execvp('a', [])\n"
    assert len(violations(bad)) == 5
    assert violations("import ast, re\nast.literal_eval('1')\nre.compile('x')\njson.loads('1')\n") == []


@pytest.fixture
def hostile_run(tmp_path):
    """A run directory whose every file carries shell syntax and credentials."""
    sentinel = tmp_path / "PWNED"
    inject = f"$(touch {sentinel}) `touch {sentinel}`; touch {sentinel} | touch {sentinel} && touch {sentinel}"
    run = tmp_path / "run"
    run.mkdir()
    log = SGLANG_LOG.read_text().splitlines()
    log.insert(1,
               f"[2025-09-02 14:19:42] server_args=ServerArgs(model_path='/m/{inject}', api_key='{SECRETS['apikey']}', "
                  f"hf_token='{HF}', json_model_override_args='{{\"api_key\": \"{SECRETS['nested']}\"}}', "
                  f"speculative_config={{'auth': {{'password': '{SECRETS['pw']}'}}}}, tp_size=8)")
    log.append(f"[2025-09-02 14:19:43 TP0] RuntimeError: CUDA error: request to https://u:{SECRETS['pw']}@hub "
               f"with Authorization: Bearer {SECRETS['bearer']} failed {inject}")
    (run / "server.log").write_text("\n".join(log) + "\n")
    (run / "launch.sh").write_text(
        f"#!/bin/sh\nHF_TOKEN={HF} OPENAI_API_KEY={SK} python -m sglang.launch_server --model-path '/m/{inject}' "
        f"--tp-size 8 --trust-remote-code --api-key {SECRETS['apikey']} --served-model-name 'x{inject}'\n")
    lines = []
    for raw in SWEEP.read_text().splitlines():
        d = json.loads(raw)
        d["server_info"]["api_key"] = SECRETS["apikey"]
        d["server_info"]["extra"] = {"nested": {"hf_token": SECRETS["nested"]}}
        d["tag"] = f"url=https://me:{SECRETS['pw']}@host/{inject}"
        lines.append(json.dumps(d))
    (run / "bench.jsonl").write_text("\n".join(lines) + "\n")
    cfg = json.loads((SCENARIO / "config.json").read_text())
    cfg["_name_or_path"] = f"/m/{inject}"
    cfg["model_type"] = "__import__('os').system('touch " + str(sentinel) + "')"
    (run / "config.json").write_text(json.dumps(cfg))
    notes = run / "notes.md"
    notes.write_text(f"""# Notes on {inject}

## Raised the running-request cap `python -m sglang.launch_server --api-key {SECRETS['apikey']}`

Throughput plateaued at 128 concurrency; fix: raised --max-running-requests, 880 → 3740 tok/s.
Pull the weights with https://me:{SECRETS['pw']}@hf.example/m and `export HF_TOKEN={HF}`.

```bash
export HF_TOKEN={HF}
curl -H "Authorization: Bearer {SECRETS['bearer']}" http://127.0.0.1:30000/v1/models
OPENAI_API_KEY={SK} python -m sglang.launch_server --model-path m --trust-remote-code --api-key {SECRETS['apikey']} --max-running-requests 256 {inject}
```
""")  # noqa: E501 (the launch command is one long line, as pasted)
    return run, sentinel


def test_hostile_content_is_never_executed(hostile_run, monkeypatch, kb_home):
    """In-process with every way to start a process replaced by a trap, then through the
    real command line: ingest, ask, show, signals and diagnose of hostile files run
    nothing (the sentinel file is never created)."""
    run, sentinel = hostile_run
    calls = []

    def trap(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"kb tried to start a process: {args!r}"[:300])

    for mod, names in ((subprocess, ["Popen", "run", "call", "check_call", "check_output"]),
                       (os, ["system", "popen", "execv", "execve", "execvp", "posix_spawn", "posix_spawnp", "fork"])):
        for n in names:
            if hasattr(mod, n):
                monkeypatch.setattr(mod, n, trap)
    from ingest.detect import load_findings
    from ingest.run import read_run
    from kb import index as kbindex
    from kb.diagnose import diagnose, report
    from kb.search import ask
    from kb.store import Store

    store = Store(kb_home)
    store.sync(load_findings, [run / "notes.md"])
    ev = read_run([run], config=str(run / "config.json"))
    d = diagnose(ev, kbindex.all_records(store.index_dir))
    report(d)
    json.dumps(d.to_json(), default=str)
    ask(store.index_dir, "running request cap", 5)
    monkeypatch.undo()
    assert calls == [] and not sentinel.exists()


def test_hostile_content_through_the_command_line(hostile_run, kb, kb_home):
    """Every command's output (in this process, and one real `kb` process) shows no secret."""
    run, sentinel = hostile_run
    outputs = [cli(*args) for args in (
        ["ingest", str(run / "notes.md"), "--report", "--json"], ["ask", "running request cap", "--json"],
        ["ask", "running request cap"], ["signals", str(run), "--json"], ["diagnose", str(run), "--json"],
        ["ingest", str(run), "--json"])]
    fid = next(r["id"] for r in json.loads(cli("ask", "running request cap", "--json"))["answers"]
               if "notes.md" in json.dumps(r["sources"]))
    outputs += [cli("show", fid), cli("show", fid, "--json")]
    proc = kb("diagnose", str(run))
    assert proc.returncode == 0, proc.stderr[-1000:]
    outputs.append(proc.stdout + proc.stderr)
    assert not sentinel.exists()
    for out in outputs:
        assert_no_secret(out, "in command output")


# ---------------------------------------------------------------- quoting

HOSTILE = ["/models/a b", "/models/it's", '/models/say "hi"', "/models/a;rm -rf ~", "/models/$(touch /tmp/x)",
           "/models/`id`", "/models/line1\nline2", "/models/$HOME/*", "/models/a|b&c>d<e", "/models/tab\there",
           "/models/back\\slash", "/models/#comment", "-rf", "/models/!bang {a,b}"]


def _launch_text_command(stdout: str) -> str:
    """The command of `kb launch`'s text output: after the `# ...` header, up to the blank line."""
    body = stdout.split("\n", 1)[1]
    return body.split("\n\nMemory (per GPU)", 1)[0]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_kb_launch_quotes_a_hostile_model_path(engine, kb_home):
    from kb.launchcmd import one_line

    for value in HOSTILE:
        args = ["launch", "--model", str(SCENARIO / "config.json"), "--gpus", "8x RTX PRO 6000", "--engine", engine,
                "--model-path", value]
        out = json.loads(cli(*args, "--json"))
        argv = shlex.split(out["command"])
        assert argv == out["argv"] and value in argv, value
        assert argv[argv.index(value) - 1] in ("--model-path", "serve")
        text = cli(*args)
        header = text.split("\n", 1)[0]
        assert header.startswith("# ") and one_line(value) in header  # a newline is shown as \\n
        assert shlex.split(_launch_text_command(text)) == argv


def test_kb_launch_header_escapes_control_characters(kb_home):
    text = cli("launch", "--model", str(SCENARIO / "config.json"), "--gpus", "8x RTX PRO 6000", "--engine", "vllm",
               "--model-path", "/m/a\nrm -rf ~\r\x1b[2Jb")
    header, second = text.split("\n")[:2]
    assert header.startswith("# vllm") and "a\\nrm -rf ~\\r\\x1b[2Jb" in header
    assert second.startswith("vllm serve '")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_kb_diagnose_keeps_a_hostile_model_path_literal(engine, kb_home):
    for value in HOSTILE:
        argv = ["python", "-m", "sglang.launch_server", "--model-path", value, "--tp-size", "8"] if engine == "sglang" \
            else ["vllm", "serve", value, "--tensor-parallel-size", "8"]
        args = ["diagnose", str(SCENARIO / "bench.jsonl"), "--launch", shlex.join(argv), "--gpu", "8x RTX PRO 6000"]
        out = json.loads(cli(*args, "--json"))
        cmds = [c for r in out["recommendations"] for c in r["commands"]] + [out.get("combined_command") or ""]
        launches = [shlex.split(c) for c in cmds if "sglang.launch_server" in c or "vllm serve" in c]
        assert launches, value
        for words in launches:
            assert value in words, (value, words)
        text = cli(*args)  # the report prints the same commands, each after `$ `
        for c in cmds:
            if "sglang.launch_server" in c or "vllm serve" in c:
                assert f"$ {c}" in text, (value, c)


def test_launch_command_secret_is_not_printed_back(kb_home):
    out = cli("diagnose", str(SCENARIO / "bench.jsonl"), "--launch",
              f"HF_TOKEN={HF} python -m sglang.launch_server --model-path m --trust-remote-code --tp-size 8 "
              f"--api-key {SECRETS['apikey']}", "--json")
    assert_no_secret(out)
    assert "<redacted>" in out


# ---------------------------------------------------------------- redaction


def test_secrets_in_findings_are_never_stored(kb, kb_home, hostile_run):
    run, _ = hostile_run
    assert kb("ingest", str(run / "notes.md")).returncode == 0
    for f in (kb_home / "index").rglob("*"):
        if f.is_file():
            assert_no_secret(f.read_bytes().decode("latin-1"), f"in index file {f.name}")
    assert_no_secret((kb_home / "manifest.json").read_text(), "in the manifest")
    from kb import index as kbindex
    from kb.store import Store

    notes = [f for f in kbindex.all_records(Store(kb_home).index_dir) if "notes.md" in str(f.sources)]
    assert notes and any("<redacted>" in "\n".join(f.commands) for f in notes)


@pytest.mark.parametrize("text,secret", [
    ("vllm serve m --trust-remote-code --api-key S3CR3Tvalue", "S3CR3Tvalue"),  # a switch before it
    ("--verbose --hf-token=S3CR3Tvalue --port 1", "S3CR3Tvalue"),
    ("sglang serve --model m --enable-x --api-key 'a b S3CR3T'", "a b S3CR3T"),
])
def test_redact_text_after_a_switch(text, secret):
    """`--flag --api-key X` consumed `--api-key` as the switch's value and never looked
    at X: the key leaked from every launch command with a switch before it."""
    from kb.redact import redact_text

    assert secret not in redact_text(text)


@pytest.mark.parametrize("text", ["a" * 200_000, "a." * 100_000, "--x" * 70_000, "a=" * 100_000, "api_key=" * 30_000,
                                  'api_key="' * 30_000, "http://a:" * 25_000, "--api-key " * 20_000])
def test_redact_text_is_linear(text):
    """Started inside a long word, each pattern scanned to its end from every character:
    20,000 characters took 45 s; `a=a=a=...` recursed once per `=` (RecursionError)."""
    from kb.redact import redact_text

    t = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - t < 10


def test_redact_data_is_key_aware_and_depth_bounded():
    from kb.redact import REDACTED, redact_data

    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    out = redact_data({"speculative": {"draft": {"api_key": "K", "hf_token": "T", "n": 3}}, "deep": deep})
    assert out["speculative"]["draft"] == {"api_key": REDACTED, "hf_token": REDACTED, "n": 3}


def test_log_and_bench_secrets_are_redacted_where_parsed(hostile_run):
    from ingest.run import read_run

    run, _ = hostile_run
    ev = read_run([run])
    dumped = json.dumps([t.model_dump(mode="json") for t in ev.traces] + [b.model_dump(mode="json") for b in ev.bench]
                        + [ev.server_args, ev.launch_argv, ev.launch_env, ev.warnings, ev.files], default=str)
    assert_no_secret(dumped)
