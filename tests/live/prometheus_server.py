"""A real Prometheus (Debian's `prometheus` package, installed by .ci/run) on 127.0.0.1,
scraping given targets every second, with its own config and storage in a temp dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from live.util import wait_ready
from live.vllm_server import free_port

BINARY = os.environ.get("KB_PROMETHEUS", "prometheus")


class PrometheusMissing(RuntimeError):
    pass


def require_binary() -> str:
    path = shutil.which(BINARY)
    if not path:
        raise PrometheusMissing(f"the `{BINARY}` binary is not on PATH: install Debian's package "
                                f"(`apt-get install -y prometheus`, as .ci/run does)")
    return path


@dataclass
class PrometheusServer:
    proc: subprocess.Popen
    port: int
    dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """SIGTERM to its process group (it flushes its head block), then SIGKILL."""
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass


def config(targets: list[str], job: str = "vllm", interval: str = "1s") -> str:
    quoted = ", ".join(f"'{t}'" for t in targets)
    return (f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            f"scrape_configs:\n  - job_name: '{job}'\n    scrape_interval: {interval}\n"
            f"    scrape_timeout: {interval}\n    static_configs:\n      - targets: [{quoted}]\n")


def start(workdir: Path, targets: list[str], job: str = "vllm", timeout: float = 60.0) -> PrometheusServer:
    """Start Prometheus on a free port and wait until /-/ready answers."""
    binary = require_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "prometheus.yml").write_text(config(targets, job))
    port = free_port()
    log = open(workdir / "prometheus.log", "ab")
    proc = subprocess.Popen([binary, f"--config.file={workdir / 'prometheus.yml'}",
                             f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0,
                            cwd=str(workdir))
    log.close()
    server = PrometheusServer(proc, port, workdir)
    wait_ready(server, f"{server.url}/-/ready", "prometheus", timeout, 0.3,
               lambda: (workdir / "prometheus.log").read_text(errors="replace")[-2000:])
    return server


def wait_for_scrapes(server: PrometheusServer, metric: str, n: int, timeout: float = 60.0) -> None:
    """Until `metric` has at least `n` samples stored (count_over_time over the last minute)."""
    import json
    import urllib.parse

    q = urllib.parse.urlencode({"query": f"max(count_over_time({metric}[1m]))"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server.url}/api/v1/query?{q}", timeout=5) as r:
                res = json.loads(r.read())["data"]["result"]
                if res and float(res[0]["value"][1]) >= n:
                    return
        except (urllib.error.URLError, OSError, KeyError, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prometheus stored fewer than {n} samples of {metric} within {timeout:.0f} s")
