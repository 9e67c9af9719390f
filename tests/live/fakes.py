"""Loopback servers for failure cases a real vLLM does not produce on demand:
one that stalls mid-sweep, one that accepts and never answers, one whose accept
queue is full (connect timeout). Threads; daemon; 127.0.0.1 only."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

    def log_message(self, *args):  # quiet
        pass

    def _json(self, code: int, doc) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model", "max_model_len": 4096}]})
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        srv: FakeOpenAI = self.server.owner  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path != "/v1/completions":
            self._json(404, {"detail": "Not Found"})
            return
        prompt_tokens = len(str(body.get("prompt", "")).split())
        if not body.get("stream"):
            self._json(200, {"choices": [{"text": "x"}], "usage": {"prompt_tokens": prompt_tokens,
                                                                    "completion_tokens": 1}})
            return
        with srv.lock:
            srv.streams += 1
            srv.prompts.append(body.get("prompt"))
            n = srv.streams
        if srv.stall_after is not None and n > srv.stall_after:
            srv.release.wait(60)  # never answers within the client's read timeout
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        out = int(body.get("max_tokens") or 1)
        for _i in range(out):
            chunk = {"choices": [{"index": 0, "text": " w"}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(0.001)
        usage = {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": out}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")


class LoopbackHTTPServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) serving `handler` from a daemon
    thread while the `with` block runs; the handler reaches this object as self.server.owner."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeOpenAI(LoopbackHTTPServer):
    """/v1/models and streaming /v1/completions; streams after the first `stall_after` hang."""

    def __init__(self, stall_after: int | None = None, port: int = 0):
        self.stall_after = stall_after
        self.streams = 0
        self.prompts: list = []  # of the streamed requests, in arrival order
        self.lock = threading.Lock()
        self.release = threading.Event()
        super().__init__(_Handler, port)

    def __exit__(self, *exc):
        self.release.set()  # free the stalled handlers first
        super().__exit__(*exc)


class SilentServer:
    """Accepts connections and never sends a byte (read timeout)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                continue

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(2)
        for c in self.conns:
            c.close()
        self.sock.close()


class FullBacklog:
    """A listening socket whose accept queue is full: new connections get no answer
    to their SYN, as from a host that is down or filtered (connect timeout)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fill: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(self.sock.getsockname())
            except BlockingIOError:
                pass
            self.fill.append(c)
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        for c in self.fill:
            c.close()
        self.sock.close()
