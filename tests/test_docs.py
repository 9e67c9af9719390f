"""The README and docs/ say what kb does: their links lead somewhere, the shipped count is
the real one, and the README's worked examples are what the commands print today."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.markdown import read_findings
from kb.store import findings_files, shipped_findings_dir

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)|(?:href|src)=\"([^\"]+)\"")


def _links(path: Path) -> list[str]:
    text = path.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold JSON and commands, not links
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_point_at_files_that_exist(doc):
    missing = []
    for link in _links(doc):
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        target = (doc.parent / link.split("#", 1)[0]).resolve()
        if not target.exists():
            missing.append(link)
    assert not missing, f"{doc.name} links to missing files: {missing}"


def test_shipped_finding_count_is_the_real_one():
    shipped = [f for p in findings_files(shipped_findings_dir()) for f in read_findings(p)]
    n, classes = len(shipped), len({c for f in shipped for c in f.fix_classes})
    m = re.search(r"ships (\d+) findings", README.read_text())
    assert m and int(m.group(1)) == n, f"README.md says {m and m.group(1)} shipped findings; findings/ holds {n}"
    m = re.search(r"\((\d+) findings over (\d+) fix classes", (ROOT / "docs" / "CLI.md").read_text())
    assert m and (int(m.group(1)), int(m.group(2))) == (n, classes), \
        f"docs/CLI.md says {m and m.groups()} (findings, fix classes); findings/ holds {n} over {classes}"


def test_quick_start_commands_are_there_unchanged():
    text = README.read_text()
    assert ('python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/kb ask '
            '"why does throughput plateau at 128 concurrency"') in text
    assert ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && bash scripts/setup_tests.sh "
            "&& .venv/bin/pytest -n 2 --ignore=tests/live && .venv/bin/pytest tests/live") in text


# ------------------------------------------------------------------ the worked examples

LIVE = ("kb probe", "kb sweep", "kb doctor")  # need a running server: tests/live covers them


def _code_blocks(text: str) -> list[list[str]]:
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _examples() -> list[tuple[str, list[str]]]:
    """(command, the output lines the README shows) for every `$ kb ...` in a code block."""
    out = []
    for lines in _code_blocks(README.read_text()):
        cmd, shown = None, []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ kb "):
                if cmd:
                    out.append((cmd, shown))
                cmd, shown = line[2:], []
                while cmd.endswith("\\"):  # continuation lines
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
            elif cmd:
                shown.append(line)
            i += 1
        if cmd:
            out.append((cmd, shown))
    return [(c, s) for c, s in out if not c.startswith(LIVE)]


EXAMPLES = _examples()


def test_the_readme_has_an_example_of_each_main_command():
    run = {c.split()[1] for c, _ in EXAMPLES}
    assert {"ask", "diagnose", "attach", "launch", "compare", "report", "tune"} <= run, run


def _appears_in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines not found in the printed ones (in order; '…' stands for what was cut)."""
    missing, at = [], 0
    for line in shown:
        parts = [p.strip() for p in line.rstrip().split("…") if p.strip()]
        if not parts:
            continue
        for j in range(at, len(printed)):
            if all(p in printed[j] for p in parts):
                at = j + 1
                break
        else:
            missing.append(line)
    return missing


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory):
    """One knowledge base for the examples that only read it (the index is built once)."""
    return tmp_path_factory.mktemp("kbhome")


@pytest.mark.parametrize("cmd,shown", EXAMPLES, ids=[c.split()[1] for c, _ in EXAMPLES])
def test_readme_example_output_is_what_kb_prints(cmd, shown, tmp_path, shared_home):
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the examples' relative paths, and their files written here
    home = tmp_path / "kbhome" if cmd.startswith("kb attach") else shared_home  # attach writes a finding
    env = {**os.environ, "KB_HOME": str(home)}
    env.pop("KB_FINDINGS", None)
    argv = shlex.split(cmd.replace("$S", "tests/data/samples/kb_sweep"))
    proc = subprocess.run([sys.executable, "-m", "kb", *argv[1:]], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # the README shows the default home; this run used a temporary one
    printed = (proc.stdout + proc.stderr).replace(str(home), "~/.local/share/kb").splitlines()
    missing = _appears_in_order(shown, printed)
    assert not missing, (f"README.md's example of `{cmd}` is no longer what kb prints; update it with the real "
                         f"output. Lines not printed (in this order):\n" + "\n".join(missing))
