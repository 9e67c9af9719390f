"""Small helpers shared by the live tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable


def run_kb(home: Path, *args, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real `kb` command line with KB_HOME=home (KB_API_KEY cleared), from the repository root."""
    e = {k: v for k, v in os.environ.items() if k != "KB_API_KEY"}
    e.update({"KB_HOME": str(home), **(env or {})})
    return subprocess.run([sys.executable, "-m", "kb", *map(str, args)], capture_output=True, text=True,
                          env=e, cwd=Path(__file__).resolve().parent.parent.parent, timeout=timeout)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def ctrl_c_reaches_it() -> None:
    """preexec_fn for a kb the test will Ctrl-C (SIGINT): the child starts with SIGINT at its
    default, as a foreground command in a terminal does. A shell's background job (`cmd &`,
    how .ci/run may itself be started) runs with SIGINT ignored and every child inherits that;
    Python then never installs its KeyboardInterrupt handler, and the test's Ctrl-C is lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sweep_until_first_level(url: str, out: Path, env_extra: dict | None = None) -> subprocess.Popen:
    """`kb sweep URL -c 1,64` in the background (KB_API_KEY cleared), returned once its
    first level is in `out`: the concurrency-1 level sends 16 short requests, the
    concurrency-64 level 256, so whatever the caller does next lands in the second."""
    env = {k: v for k, v in os.environ.items() if k != "KB_API_KEY"}
    env.update(env_extra or {})
    proc = subprocess.Popen([sys.executable, "-m", "kb", "sweep", url, "-c", "1,64", "--input-len", "32",
                             "--output-len", "64", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=ctrl_c_reaches_it)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc


def wait_ready(server, url: str, what: str, timeout: float, poll: float, log_tail: Callable[[], str]) -> None:
    """Poll `url` until it answers 200, for a server just started (`server.proc` its
    process, `server.stop()` its cleanup). If it exits first, never answers within
    `timeout`, or the wait is interrupted (Ctrl-C), it is stopped and the error raised:
    a start that fails leaves nothing running. RuntimeError names `what` and ends with
    `log_tail()`."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {server.proc.returncode} while starting; {log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(poll)
        raise RuntimeError(f"{what} did not answer {url} within {timeout:.0f} s; {log_tail()}")
    except BaseException:
        server.stop()
        raise


def marked(marker: str) -> list[int]:
    """Pids of live processes whose environment carries KB_TEST_MARK=marker: a server
    launched with that variable and every child it spawned, whatever their command lines."""
    want = f"KB_TEST_MARK={marker}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if want in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return out
