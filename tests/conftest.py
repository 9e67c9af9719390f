import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def kb_home(tmp_path, monkeypatch):
    home = tmp_path / "kbhome"
    monkeypatch.setenv("KB_HOME", str(home))
    monkeypatch.delenv("KB_FINDINGS", raising=False)
    return home


@pytest.fixture
def kb(kb_home):
    """Run the real `kb` command line in a subprocess; returns CompletedProcess."""

    def run(*args, check_json=False, env=None, cwd=None):
        e = {**os.environ, "KB_HOME": str(kb_home), **(env or {})}
        proc = subprocess.run([sys.executable, "-m", "kb", *map(str, args)], capture_output=True,
                              text=True, env=e, cwd=cwd or ROOT, timeout=120)
        if check_json:
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout)
        return proc

    return run


def pytest_collection_modifyitems(items):
    """The live tests (tests/live) run last. Their vLLM server with --max-num-seqs 8 is
    session-scoped (shared by several modules), and an idle vLLM CPU server still takes about
    a third of a core; run first, it stayed up through the ~1,700 offline tests and slowed
    them. Run last, it stops when they end. The order within each part is kept."""
    items.sort(key=lambda item: "live" in item.path.relative_to(Path(__file__).parent).parts[:1])
