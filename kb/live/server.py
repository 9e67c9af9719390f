"""A server kb starts itself (for `kb tune`): the launch command as a child process in
its own process group, its output kept in a log file, ready when `/health` (vLLM,
sglang) or `/v1/models` answers, and stopped on every path — normal end, error,
Ctrl-C — by SIGTERM to the whole group, then SIGKILL to what is left.

The group dies with kb whatever ends kb (SIGKILL included): its leader is a reaper
(kb/live/reaper.py), started before the server, that kills the group when kb's end of
a pipe closes. Started first, it also covers a Ctrl-C that lands inside the server's
start, before kb holds the server's process object.

The host and port come from the launch command (`--host`, `--port`); when it names no
port, kb adds `--port` with a free one on 127.0.0.1 so a trial never collides with
another server. Launches that span several machines (`--nnodes` > 1, `--node-rank`,
Ray addresses) are not started: `kb tune` prints their plan only.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kb.errors import KbError, UsageError
from kb.launchcmd import split_args

# Lines of a failed start worth showing: argparse's `prog: error: ...`, exceptions
# (`ValueError: ...`), CUDA OOM, and the engines' "must be"/"not supported" checks.
# argparse's usage dump (lines of `[--flag ...]`) mentions "error" too and is skipped.
FAIL_LINE = re.compile(r"(: error:|\b\w*(?:Error|Exception)\b:|Traceback|out of memory|unrecognized arguments|"
                       r"must be|not supported|cannot|failed|Killed)")
USAGE_LINE = re.compile(r"^\s*(?:usage:|\[--|--[\w-]+\s)")
REAPER = Path(__file__).with_name("reaper.py")
MULTI_NODE = {"--nnodes": lambda v: v not in ("1", None), "--node-rank": lambda v: True,
              "--dist-init-addr": lambda v: True, "--data-parallel-address": lambda v: True,
              "--headless": lambda v: True}


class StartFailed(KbError):
    """The server exited or never answered; `lines` are the log lines that say why."""

    def __init__(self, message: str, lines: list[str]):
        self.lines = lines
        super().__init__(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flag_value(argv: list[str], names: tuple[str, ...]) -> str | None:
    for i, w in enumerate(argv):
        for n in names:
            if w == n and i + 1 < len(argv):
                return argv[i + 1]
            if w.startswith(n + "="):
                return w.split("=", 1)[1]
    return None


def multi_node(argv: list[str]) -> str | None:
    """Why this launch spans several machines, or None."""
    _, pairs = split_args(argv)
    for flag, vals in pairs:
        check = MULTI_NODE.get(flag)
        if check and check(vals[0] if vals else None):
            return f"{flag} {' '.join(vals)}".strip()
    return None


def with_port(argv: list[str]) -> tuple[list[str], str, int]:
    """(argv, host, port): the command's own host/port, or a free port on 127.0.0.1 added."""
    port = _flag_value(argv, ("--port",))
    host = _flag_value(argv, ("--host",)) or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # kb talks to it on this machine
    if port is None:
        p = free_port()
        return [*argv, "--host", "127.0.0.1", "--port", str(p)], "127.0.0.1", p
    try:
        return list(argv), host, int(port)
    except ValueError:
        raise UsageError(f"launch: --port {port!r} in the launch command is not a port number") from None


def _port_free(host: str, port: int) -> bool:
    """Nothing listens there (connections left in TIME_WAIT do not count: servers bind
    with SO_REUSEADDR, as this check does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


@contextmanager
def _interrupts_deferred():
    """SIGINT and SIGTERM held back for the block, then raised once (KeyboardInterrupt or
    the SIGTERM handler that was installed) when it ends. Only the main thread can set
    handlers; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if got:
        handler = old[got[0]]
        if callable(handler):
            handler(got[0], None)  # Python's default SIGINT handler raises KeyboardInterrupt
        elif handler == signal.SIG_DFL:
            signal.raise_signal(got[0])


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class ManagedServer:
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    start_timeout: float = 600.0
    proc: subprocess.Popen | None = None
    host: str = "127.0.0.1"
    port: int = 0
    reaper: subprocess.Popen | None = None  # the group's leader (kb/live/reaper.py)
    _leash: int | None = None  # kb's end of the reaper's pipe
    _stopped: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pgid(self) -> int | None:
        """The process group of the server and its children (the reaper's pid)."""
        return self.reaper.pid if self.reaper else None

    def start(self) -> "ManagedServer":
        self.argv, self.host, self.port = with_port(self.argv)
        if not _port_free(self.host, self.port):
            raise StartFailed(f"port {self.port} on {self.host} is already in use: another server is running there", [])
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._start_reaper()
        fh = open(self.log, "ab")
        try:
            # the reaper's group: stopped with the API server's engine-core and worker children
            self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **self.env}, process_group=self.pgid)
        except OSError as e:
            raise StartFailed(f"cannot run {self.argv[0]!r}: {e.strerror}", []) from None
        finally:
            fh.close()
        self._wait_ready()
        return self

    def _start_reaper(self) -> None:
        r, w = os.pipe()  # close-on-exec: no other child of kb keeps kb's end open
        try:
            self.reaper = subprocess.Popen([sys.executable, "-I", "-S", str(REAPER)], stdin=r, stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, process_group=0)
        except OSError as e:
            os.close(w)
            raise StartFailed(f"cannot start kb's process reaper: {e.strerror}", []) from None
        finally:
            os.close(r)
        self._leash = w
        ready = self.reaper.stdout.readline()  # its signals are ignored from here on
        self.reaper.stdout.close()
        if ready != b"ready\n":
            raise StartFailed(f"kb's process reaper ({REAPER}) exited before it was ready", [])

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        with httpx.Client(timeout=httpx.Timeout(2.0), trust_env=False) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise StartFailed(f"the server exited with code {self.proc.returncode} while starting",
                                      self.why())
                for path in ("/health", "/v1/models"):
                    try:
                        if http.get(self.url + path).status_code == 200:
                            return
                    except httpx.HTTPError:
                        pass
                time.sleep(1.0)
        self.stop()
        raise StartFailed(f"the server did not answer /health within {self.start_timeout:.0f} s", self.why())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def why(self, n: int = 6) -> list[str]:
        """The last log lines that look like the reason for a failure (else the last lines)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-400:]
        except OSError:
            return []
        hits = [ln.strip() for ln in lines if FAIL_LINE.search(ln) and not USAGE_LINE.match(ln)]
        return (hits or [ln.strip() for ln in lines if ln.strip()])[-n:]

    def stop(self) -> None:
        """SIGTERM to the group, wait, SIGKILL what is left; the port is free afterwards.
        A Ctrl-C (or a second one) that arrives meanwhile waits until the server is gone:
        an impatient second Ctrl-C must not leave the engine running with its GPUs held."""
        if self.reaper is None or self._stopped:
            return
        with _interrupts_deferred():
            self._stop()
            self._stopped = True

    def _stop(self) -> None:
        # no server process object: a Ctrl-C landed inside its start; nothing to wait for
        steps = ((signal.SIGTERM, 30), (signal.SIGKILL, 10)) if self.proc is not None else ((signal.SIGKILL, 0),)
        for sig, wait in steps:
            _killpg(self.pgid, sig)
            if self.proc is None:
                break
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:
                _killpg(self.pgid, signal.SIGKILL)  # children that outlive the server, and the reaper
            break
        if self._leash is not None:
            os.close(self._leash)
            self._leash = None
        try:
            self.reaper.wait(10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while self.port and not _port_free(self.host, self.port) and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
