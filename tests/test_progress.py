"""Progress bars go to stderr only when it is a terminal: a pseudo-terminal child shows
them, a pipe gets nothing, and `kb signals --json` prints the same document either way."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
from pathlib import Path

from kb import progress

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "tests" / "data" / "samples" / "sglang_logs" / "src-sglang-0.5.5_deepseek-v3_tp8_rtx-pro-6000.log"

# reads the sample log with the bar threshold lowered to 1 KB, then shows a sweep level's bar
CHILD = textwrap.dedent(f"""
    import sys, time
    sys.path.insert(0, {str(ROOT)!r})
    from pathlib import Path
    from kb import progress
    progress.BAR_BYTES = 1024
    from ingest.run import read_run
    ev = read_run([Path({str(LOG)!r})])
    from kb.live.runner import level_label
    bar = progress.LevelBar(True)
    bar.start(level_label(4), 8)
    bar.update(3, 1)
    time.sleep(0.3)
    bar.end()
    print("stdout:", ev.traces[0].stats["samples"])
""")


def _run_on_pty(argv: list[str]) -> tuple[str, str]:
    """(stdout, stderr) of a child whose stderr is a pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT,
                            env={**os.environ, "TERM": "xterm", "COLUMNS": "120"})
    os.close(slave)
    err = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(master)
        out = proc.stdout.read().decode()
        proc.wait(timeout=60)
    return out, err.decode("utf-8", "replace")


def test_bars_show_on_a_terminal():
    out, err = _run_on_pty([sys.executable, "-c", CHILD])
    assert "reading src-sglang-0.5.5" in err  # the file bar, with its byte count and rate
    assert "/s" in err and "kB" in err
    assert "c=4" in err and "3/8" in err and "1 failed" in err  # a sweep level's bar
    assert out.startswith("stdout: ") and "\x1b" not in out


def test_no_bars_when_stderr_is_a_pipe():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("stdout: ")


def test_file_progress_needs_a_large_file_and_a_terminal(tmp_path):
    big = tmp_path / "big.log"
    with open(big, "wb") as fh:
        fh.truncate(progress.BAR_BYTES + 1)  # sparse: the size is what counts
    with progress.file_progress(big) as cb:
        assert cb is None  # pytest's stderr is not a terminal
    assert not progress.LevelBar(True).on


def test_json_output_is_the_same_with_a_terminal_on_stderr(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_HOME", str(tmp_path))
    kb = [sys.executable, "-m", "kb", "signals", str(LOG), "--json"]
    plain = subprocess.run(kb, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert plain.returncode == 0, plain.stderr
    tty_out, _ = _run_on_pty(kb)
    assert tty_out == plain.stdout and plain.stdout.lstrip().startswith("{")
