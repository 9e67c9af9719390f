"""Network client hygiene of kb/live (kb probe / sweep / doctor): only http and https,
connect and read timeouts, capped info and metrics answers, no redirect to another
host, and the API key only ever in the Authorization header: never in output, error
messages or stored results. Every server here is a thread on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest
from conftest import ROOT
from live.fakes import LoopbackHTTPServer

from kb.errors import ServerError
from kb.live import client as cl

KEY = "K3y-9f2c-plain-looking"  # not shaped like any known token: only the client knows it is one


class Fake(LoopbackHTTPServer):
    """A loopback HTTP server; `routes` maps a path to fn(handler) -> (status, headers, body
    bytes or an iterator of chunks). Every request (path, headers, body) is recorded."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.requests: list[dict] = []
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                route = fake.routes.get(self.path.split("?")[0])
                status, headers, payload = route(self, body) if route else (404, {}, b'{"detail": "Not Found"}')
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if isinstance(payload, (bytes, bytearray)):
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in payload:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _serve

        super().__init__(H)


def js(doc, status=200):
    return lambda h, body: (status, {"Content-Type": "application/json"}, json.dumps(doc).encode())


def endless(h, body):
    def gen():
        block = b"x" * 65536
        for _ in range(100_000):  # 6.5 GB if nobody stops reading
            yield block
    return 200, {"Content-Type": "application/json"}, gen()


def kb_cli(*args, env=None, timeout=120):
    e = {k: v for k, v in os.environ.items() if k != "KB_API_KEY"}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "kb", *map(str, args)], capture_output=True, text=True, env=e,
                          cwd=ROOT, timeout=timeout)


def one_line_error(proc, *needles):
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kb: error: "), proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- schemes


@pytest.mark.parametrize("url,why", [
    ("ftp://127.0.0.1/x", "only http:// and https://"), ("file:///etc/passwd", "only http:// and https://"),
    ("gopher://127.0.0.1:70", "only http:// and https://"), ("127.0.0.1:8000", "with its scheme"),
    ("http://", "no host"), (f"http://user:{KEY}@127.0.0.1:9", "not in the URL"),
])
def test_only_http_and_https_urls(url, why):
    with pytest.raises(ServerError, match=why) as e:
        cl.base_url(url)
    assert KEY not in str(e.value)


def test_a_file_url_from_the_command_line(tmp_path):
    proc = kb_cli("probe", "file:///etc/passwd", env={"KB_HOME": str(tmp_path)})
    one_line_error(proc, "only http:// and https://")


# ---------------------------------------------------------------- timeouts and caps


def test_every_client_has_connect_and_read_timeouts():
    c = cl.sync_client(None, cl.Timeouts(connect=1.5, read=7))
    assert (c.timeout.connect, c.timeout.read) == (1.5, 7)
    assert c.follow_redirects is False and c.trust_env is False  # no proxy from the environment
    c.close()


@pytest.mark.parametrize("path,cap", [("/get_server_info", cl.INFO_CAP), ("/metrics", cl.METRICS_CAP)])
def test_an_endless_answer_is_cut_at_the_cap(path, cap):
    with Fake({path: endless}) as srv:
        c = cl.sync_client(None, cl.Timeouts(1, 5))
        t = time.perf_counter()
        with pytest.raises(ServerError, match=f"answer larger than {cap // 1024} KiB; stopped reading"):
            cl.get(c, cl.base_url(srv.url), path, cap=cap)
        c.close()
    assert time.perf_counter() - t < 30


def test_kb_probe_stops_reading_an_endless_server_info(tmp_path):
    models = js({"object": "list", "data": [{"id": "m", "object": "model"}]})
    with Fake({"/v1/models": models, "/server_info": endless}) as srv:
        proc = kb_cli("probe", srv.url, env={"KB_HOME": str(tmp_path)})
    one_line_error(proc, "answer larger than 1024 KiB")


# ---------------------------------------------------------------- redirects


def test_no_redirect_to_another_host_or_port():
    with Fake({"/v1/models": js({"data": [{"id": "other"}]})}) as other:
        moved = {"/v1/models": lambda h, b: (302, {"Location": other.url + "/v1/models"}, b"")}
        with Fake(moved) as srv:
            c = cl.sync_client(KEY, cl.Timeouts(1, 5))
            with pytest.raises(ServerError, match="redirects to another host") as e:
                cl.get(c, cl.base_url(srv.url), "/v1/models")
            c.close()
        assert other.requests == []  # the other server never saw the request, nor the key
    assert KEY not in str(e.value)


def test_same_origin_redirects_are_followed_and_loops_are_not():
    routes = {"/v1/models": lambda h, b: (307, {"Location": "/v2/models"}, b""),
              "/v2/models": js({"data": [{"id": "m"}]}),
              "/loop": lambda h, b: (302, {"Location": "/loop"}, b"")}
    with Fake(routes) as srv:
        c = cl.sync_client(None, cl.Timeouts(1, 5))
        assert cl.get(c, cl.base_url(srv.url), "/v1/models").json() == {"data": [{"id": "m"}]}
        with pytest.raises(ServerError, match="more than 3 redirects"):
            cl.get(c, cl.base_url(srv.url), "/loop")
        c.close()


# ---------------------------------------------------------------- the API key


def _echoing_sglang(completions: bool = True) -> dict:
    """An sglang-like server that puts the Authorization header it received everywhere
    it can: in its server info (under credential names and innocent ones), in a URL,
    in its model list and in its stream errors."""

    def auth(h) -> str:
        return h.headers.get("Authorization", "")

    def info(h, body):
        a = auth(h)
        key = a.removeprefix("Bearer ")
        doc = {"version": "0.5.5", "model_path": f"https://user:{key}@hub.example/m", "tp_size": 1,
               "max_running_requests": 8, "api_key": key, "admin_api_key": key, "echo": a, "owner": key,
               "note": f"started with --api-key {key}", "nested": {"auth": {"token": key}}, "context_length": 4096}
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    def models(h, body):
        return 200, {"Content-Type": "application/json"}, json.dumps(
            {"object": "list", "data": [{"id": "m", "root": "m", "owned_by": "sglang"}]}).encode()

    def completions_(h, body):
        req = json.loads(body or b"{}")
        n = int(req.get("max_tokens") or 1)

        def gen():
            for _ in range(n):
                yield b'data: {"choices": [{"index": 0, "text": " w"}]}\n\n'
            yield b'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": %d}}\n\n' % n
            yield b"data: [DONE]\n\n"
        return 200, {"Content-Type": "text/event-stream"}, gen()

    routes = {"/v1/models": models, "/get_server_info": info, "/server_info": info}
    if completions:
        routes["/v1/completions"] = completions_
    return routes


def _key_only_in_the_header(srv: Fake) -> None:
    assert srv.requests, "no request reached the server"
    for r in srv.requests:
        assert r["headers"].get("Authorization") == f"Bearer {KEY}"
        assert KEY not in r["path"] and KEY.encode() not in r["body"]
        assert all(KEY not in v for k, v in r["headers"].items() if k != "Authorization")


@pytest.mark.parametrize("how", ["option", "env"])
def test_the_api_key_is_never_shown_by_probe(tmp_path, how):
    with Fake(_echoing_sglang(completions=False)) as srv:
        args, env = (["--api-key", KEY], {}) if how == "option" else ([], {"KB_API_KEY": KEY})
        outs = [kb_cli("probe", srv.url, *args, *extra, env={"KB_HOME": str(tmp_path), **env})
                for extra in ([], ["--json"])]
    for proc in outs:
        assert proc.returncode == 0, proc.stderr
        assert KEY not in proc.stdout + proc.stderr, proc.stdout
    _key_only_in_the_header(srv)


def test_the_api_key_is_never_stored_by_sweep(tmp_path):
    out = tmp_path / "sweep.jsonl"
    with Fake(_echoing_sglang()) as srv:
        proc = kb_cli("sweep", srv.url, "--api-key", KEY, "-c", "1,2", "-n", "2", "--input-len", "4",
                      "--output-len", "3", "--out", out, env={"KB_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    assert out.exists() and KEY not in out.read_text()
    _key_only_in_the_header(srv)


def test_the_api_key_is_not_in_error_messages(tmp_path):
    def refuse(h, body):
        return 401, {"Content-Type": "application/json"}, json.dumps(
            {"error": f"bad key {h.headers.get('Authorization')}"}).encode()

    def fail(h, body):  # the stream error repeats the key, under no telling name
        key = h.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"no quota: {key}"}}).encode()
        return 500, {"Content-Type": "application/json"}, body

    with Fake({"/v1/models": refuse}) as srv:
        proc = kb_cli("probe", srv.url, "--api-key", KEY, env={"KB_HOME": str(tmp_path)})
    one_line_error(proc, "401")
    assert KEY not in proc.stderr + proc.stdout
    routes = {**_echoing_sglang(), "/v1/completions": fail}
    with Fake(routes) as srv:
        proc = kb_cli("sweep", srv.url, "--api-key", KEY, "-c", "1", "-n", "1", "--input-len", "4", "--output-len", "2",
                      "--out", tmp_path / "s.jsonl", env={"KB_HOME": str(tmp_path)})
    assert proc.returncode == 1 and "no quota" in proc.stderr, proc.stderr
    assert KEY not in proc.stderr + proc.stdout
    assert not (tmp_path / "s.jsonl").exists() or KEY not in (tmp_path / "s.jsonl").read_text()


def test_the_api_key_is_not_in_connection_errors(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    proc = kb_cli("probe", f"http://127.0.0.1:{port}", "--api-key", KEY, env={"KB_HOME": str(tmp_path)})
    one_line_error(proc, "connection refused")
    assert KEY not in proc.stderr


# ---------------------------------------------------------------- timeouts, for real


def test_a_server_that_never_accepts_hits_the_connect_timeout(tmp_path):
    """A listening socket whose accept queue is full: the kernel drops further SYNs, so a
    connect hangs as it would to a black-holed host. --connect-timeout ends it."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    port = s.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the accept queue (never accepted)
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    try:
        t = time.perf_counter()
        proc = kb_cli("probe", f"http://127.0.0.1:{port}", "--connect-timeout", "0.5", "--api-key", KEY,
                      env={"KB_HOME": str(tmp_path)})
        elapsed = time.perf_counter() - t
    finally:
        for c in fillers:
            c.close()
        s.close()
    one_line_error(proc, "no connection within 0.5 s (connect timeout)")
    assert KEY not in proc.stderr
    assert elapsed < 20  # interpreter start-up included; without the timeout this waits ~2 minutes


def _stalled(release: threading.Event):
    """A handler that sends its headers and then nothing until released."""

    def route(h, body):
        def gen():
            release.wait(60)
            yield b"{}"
        return 200, {"Content-Type": "application/json"}, gen()

    return route


def test_a_server_that_never_answers_hits_the_read_timeout(tmp_path):
    release = threading.Event()
    try:
        with Fake({"/v1/models": _stalled(release)}) as srv:
            t = time.perf_counter()
            proc = kb_cli("probe", srv.url, "--timeout", "1", env={"KB_HOME": str(tmp_path)})
            elapsed = time.perf_counter() - t
    finally:
        release.set()
    one_line_error(proc, "no answer within 1 s (read timeout)")
    assert elapsed < 20


def test_a_stream_that_stalls_is_ended_by_the_read_timeout(tmp_path):
    """kb sweep: the server answers the probe and the calibration, then a streaming request
    sends one token and stalls. The request fails with a read timeout and the sweep ends
    with one line; it does not wait for the server."""
    release = threading.Event()
    routes = _echoing_sglang()

    def completions(h, body):
        req = json.loads(body or b"{}")
        if not req.get("stream"):  # calibration: a normal answer
            return 200, {"Content-Type": "application/json"}, json.dumps(
                {"choices": [{"text": " w"}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}).encode()

        def gen():
            yield b'data: {"choices": [{"index": 0, "text": " w"}]}\n\n'
            release.wait(60)
            yield b"data: [DONE]\n\n"
        return 200, {"Content-Type": "text/event-stream"}, gen()

    routes["/v1/completions"] = completions
    try:
        with Fake(routes) as srv:
            t = time.perf_counter()
            proc = kb_cli("sweep", srv.url, "-c", "1", "-n", "1", "--input-len", "4", "--output-len", "8",
                          "--timeout", "1", "--out", tmp_path / "s.jsonl", env={"KB_HOME": str(tmp_path)})
            elapsed = time.perf_counter() - t
    finally:
        release.set()
    line = one_line_error(proc, "read timeout")
    assert "all 1 requests at concurrency 1 failed" in line or "stopped answering" in line, line
    assert elapsed < 30


@pytest.mark.parametrize("location", ["file:///etc/passwd", "https://127.0.0.1:{port}/v1/models",
                                      "//evil.example/v1/models"])
def test_redirects_to_another_scheme_or_host_are_refused(location):
    """Same origin means scheme, host and port: not even https on the same port, nor a
    scheme-relative URL to another host."""
    with Fake({}) as srv:
        port = srv.httpd.server_address[1]
        srv.routes["/v1/models"] = lambda h, b: (302, {"Location": location.format(port=port)}, b"")
        c = cl.sync_client(KEY, cl.Timeouts(1, 5))
        with pytest.raises(ServerError, match="redirects to another host") as e:
            cl.get(c, cl.base_url(srv.url), "/v1/models")
        c.close()
    assert len(srv.requests) == 1 and KEY not in str(e.value)
