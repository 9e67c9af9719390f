"""Failures: each is one clear line on stderr, exit 1, and the finished levels stay
in --out. All traffic to 127.0.0.1."""

import subprocess
import sys

import pytest

from live.fakes import FakeOpenAI, FullBacklog, SilentServer
from live.util import read_jsonl
from live.vllm_server import free_port

SMALL = ["--input-len", "8", "--output-len", "8"]


def _one_line_error(proc, *needles):
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kb: error: ")
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["probe", "sweep", "doctor"])
def test_wrong_port(kb_live, tmp_path, command):
    port = free_port()  # nothing listens there
    out = tmp_path / "out.jsonl"
    extra = ["-c", "1", "-n", "2", *SMALL, "--out", out] if command != "probe" else []
    proc = kb_live(command, f"http://127.0.0.1:{port}", *extra, timeout=60)
    _one_line_error(proc, f"http://127.0.0.1:{port}", "connection refused")


def test_unreachable_server_connect_timeout(kb_live):
    with FullBacklog() as srv:
        proc = kb_live("probe", srv.url, "--connect-timeout", "1", timeout=60)
    _one_line_error(proc, srv.url, "no connection within 1 s (connect timeout)")


def test_server_that_never_answers_read_timeout(kb_live):
    with SilentServer() as srv:
        proc = kb_live("probe", srv.url, "--timeout", "1", timeout=60)
    _one_line_error(proc, srv.url, "no answer within 1 s (read timeout)")


def test_non_llm_http_server(kb_live, tmp_path):
    port = free_port()
    (tmp_path / "index.html").write_text("<html>just files</html>")
    httpd = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time
        import urllib.request

        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        for command in ("probe", "sweep", "doctor"):
            extra = ["-n", "1", "-c", "1"] if command != "probe" else []
            proc = kb_live(command, f"http://127.0.0.1:{port}", *extra, timeout=60)
            _one_line_error(proc, "answers HTTP but is not an OpenAI-compatible LLM server",
                            "GET /v1/models: HTTP 404")
    finally:
        httpd.terminate()
        httpd.wait(10)


def test_stall_mid_sweep_keeps_finished_levels(kb_live, tmp_path):
    out = tmp_path / "sweep.jsonl"
    with FakeOpenAI(stall_after=4) as srv:  # level 1 (4 requests) streams, level 2 stalls
        proc = kb_live("sweep", srv.url, "-c", "1,2", "-n", "4", *SMALL, "--timeout", "1", "--out", out,
                       timeout=120)
    _one_line_error(proc, "all 4 requests at concurrency 2 failed", "read timeout", f"1 finished level kept in {out}")
    rows = read_jsonl(out)
    assert [r["max_concurrency"] for r in rows] == [1] and rows[0]["completed"] == 4
    assert "1" in proc.stdout  # the finished level's table is still printed


def test_bad_options_are_one_line(kb_live):
    with FakeOpenAI() as srv:
        proc = kb_live("sweep", srv.url, "-c", "1,x", timeout=60)  # a usage error: exit 2, one line
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
            "kb: error: concurrency '1,x': expected comma-separated whole numbers, e.g. 1,8,32,128"], proc.stderr
        proc = kb_live("sweep", srv.url, "-c", "1", "--input-len", "4000", "--output-len", "200", timeout=60)
        _one_line_error(proc, "input_len 4000 + output_len 200 = 4200 tokens do not fit the server's context "
                              "of 4096 tokens")


def test_level_time_cap_keeps_finished_levels(kb_live, tmp_path):
    out = tmp_path / "sweep.jsonl"
    with FakeOpenAI(stall_after=4) as srv:  # level 2 hangs; the level-time cap ends it, not the read timeout
        proc = kb_live("sweep", srv.url, "-c", "1,2", "-n", "4", *SMALL, "--timeout", "30", "--max-level-time", "2",
                       "--out", out, timeout=120)
    _one_line_error(proc, "no request at concurrency 2 finished within max_level_time 2 s",
                    f"1 finished level kept in {out}")
    assert [r["max_concurrency"] for r in read_jsonl(out)] == [1]
