"""The plain `kb ask` path (kb.askcli): it answers exactly as the typer command line
does, hands everything else to typer, and does not import typer."""

import subprocess
import sys

import pytest
from conftest import ROOT

from kb.askcli import parse

Q = "why does thruput plateau at 128 conc on 8x rtx pro 6000"


@pytest.mark.parametrize("args, expected", [
    (["ask", "q"], (None, "q", 5, False)),
    (["ask", "q", "-n", "3", "--json"], (None, "q", 3, True)),
    (["ask", "--json", "--limit", "50", "q"], (None, "q", 50, True)),
    (["--kb-dir", "/x", "ask", "q"], ("/x", "q", 5, False)),
    (["--kb-dir=/x", "ask", "q"], ("/x", "q", 5, False)),
])
def test_plain_ask_is_parsed(args, expected, monkeypatch):
    monkeypatch.delenv("KB_HOME", raising=False)
    assert parse(args) == expected


@pytest.mark.parametrize("args", [
    [], ["ask"], ["show", "x"], ["ask", "q", "--run", "dir"], ["ask", "q", "-n", "0"], ["ask", "q", "-n", "51"],
    ["ask", "q", "-n", "x"], ["ask", "q", "-n"], ["ask", "--help"], ["ask", "q", "extra"], ["ask", "q", "--limit=3"],
    ["--kb-dir", "ask", "q"], ["ask", "-q"], ["--help"],
])
def test_anything_else_goes_to_typer(args, monkeypatch):
    monkeypatch.delenv("KB_HOME", raising=False)
    assert parse(args) is None


def test_kb_home_from_the_environment(monkeypatch):
    monkeypatch.setenv("KB_HOME", "/from/env")
    assert parse(["ask", "q"])[0] == "/from/env"
    assert parse(["--kb-dir", "/flag", "ask", "q"])[0] == "/flag"
    monkeypatch.setenv("KB_HOME", "")  # empty: the default, as typer reads it
    assert parse(["ask", "q"])[0] is None


def test_shell_completion_goes_to_typer(monkeypatch):
    monkeypatch.setenv("_KB_COMPLETE", "bash_complete")
    assert parse(["ask", "q"]) is None


@pytest.mark.parametrize("extra", [["-n", "3"], ["--json"], ["--json", "-n", "2"]])
def test_same_output_as_typer(kb, extra):
    """`--limit=N` is not taken by the plain parser, so the same request goes through typer."""
    limit = extra[extra.index("-n") + 1] if "-n" in extra else "5"
    plain = kb("ask", Q, *extra)
    typed = kb("ask", Q, *[a for a in extra if a not in ("-n", limit)], f"--limit={limit}")
    assert plain.returncode == typed.returncode == 0, plain.stderr + typed.stderr
    assert plain.stdout == typed.stdout and plain.stdout.strip()
    assert plain.stderr == typed.stderr


def test_same_error_as_typer(kb, tmp_path):
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    plain = kb("ask", "x", env={"KB_HOME": str(home)})
    typed = kb("ask", "x", "--limit=5", env={"KB_HOME": str(home)})
    assert plain.returncode == typed.returncode == 1
    assert plain.stderr == typed.stderr and plain.stderr.startswith("kb: error: ")


def test_plain_ask_does_not_import_typer(kb_home):
    code = ("import sys, runpy; sys.argv = ['kb', 'ask', 'nccl', '-n', '1']\n"
            "try:\n    runpy.run_module('kb', run_name='__main__')\n"
            "finally:\n    print('typer' in sys.modules, 'kb.cli' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "False False"
    assert proc.stdout.startswith("1. ")
