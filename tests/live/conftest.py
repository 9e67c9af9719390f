"""Live tests: a real vLLM (CPU) server on 127.0.0.1, started once per session.

These tests are never skipped: without the engines venv the fixture fails and
says to run scripts/build_env_engines.sh (CI runs it before pytest)."""

from __future__ import annotations

import pytest

from live import vllm_server as vs
from live.util import run_kb

ROOT = vs.ROOT


@pytest.fixture(scope="session")
def engines_python():
    try:
        return vs.require_engines()
    except vs.EnginesMissing as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def tiny_model(engines_python, tmp_path_factory):
    return vs.build_model(tmp_path_factory.mktemp("tiny-llama") / "model")


@pytest.fixture(scope="session")
def vllm8(tiny_model, tmp_path_factory):
    """vLLM with --max-num-seqs 8, its log captured to a file; stopped at the end."""
    log = tmp_path_factory.mktemp("vllm8") / "server.log"
    try:
        server = vs.start(tiny_model, log, max_num_seqs=8)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def kb_live(tmp_path):
    """Run the real `kb` command line; returns CompletedProcess (KB_API_KEY cleared)."""
    home = tmp_path / "kbhome"

    def run(*args, env=None, timeout=600):
        return run_kb(home, *args, env=env, timeout=timeout)

    return run
