"""A loopback Prometheus that replays recorded API answers (tests/data/samples/prometheus).

A request is matched by its path and its query (`query` for /api/v1/query and
/query_range, `match[]` plus whether a range was given for label values); times are
not compared, so a test passes the recording's own --start/--end/--step. A request
that was never recorded gets Prometheus's own error shape (HTTP 400, bad_data), so a
changed query fails the test loudly."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from live.fakes import LoopbackHTTPServer

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "prometheus"


def key(path: str, params: dict) -> tuple:
    if path.startswith("/api/v1/label/"):
        return (path, params.get("match[]"), "start" in params)
    return (path, params.get("query"))


def load(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def _answer(self, params: dict) -> None:
        srv: FakePrometheus = self.server.owner  # type: ignore[attr-defined]
        path = urllib.parse.urlsplit(self.path).path
        with srv.lock:
            srv.seen.append((path, params, dict(self.headers)))
        if srv.status is not None:  # a forced failure
            code, body = srv.status
        else:
            rec = srv.answers.get(key(path, params))
            if rec is None:
                code, body = 400, json.dumps({"status": "error", "errorType": "bad_data",
                                              "error": f"no recorded answer for {path} {params}"})
            else:
                code, body = rec["status"], rec["body"]
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        self._answer({k: v[0] for k, v in q.items()})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self._answer({k: v[0] for k, v in urllib.parse.parse_qs(raw).items()})


class FakePrometheus(LoopbackHTTPServer):
    def __init__(self, recording: dict | None = None, status: tuple[int, str] | None = None):
        self.answers = {key(r["path"], r["params"]): r for r in (recording or {}).get("answers", [])}
        self.status = status
        self.seen: list[tuple[str, dict, dict]] = []
        self.lock = threading.Lock()
        super().__init__(_Handler)


def args(recording: dict) -> list[str]:
    """The CLI options the recording was made with."""
    a = recording["args"]
    return ["--selector", a["selector"], "--start", str(a["start"]), "--end", str(a["end"]), "--step", a["step"]]


# ------------------------------------------------------------------ fixtures built from recordings
# (scripts/build_prometheus_fixtures.py writes them to tests/data/samples/prometheus; SOURCES.md says how)


def _relabel_result(data, instance: str | None, shift: float, at: float | None):
    """A query answer's `data` with `instance` set on every series, range timestamps moved
    by `shift` and instant timestamps set to `at`."""
    if not isinstance(data, dict):
        return data
    out = []
    for r in data.get("result", []):
        r = json.loads(json.dumps(r))
        if instance is not None and "instance" in r["metric"]:
            r["metric"]["instance"] = instance
        if "values" in r:
            r["values"] = [[round(t + shift, 3), v] for t, v in r["values"]]
        if "value" in r and at is not None:
            r["value"] = [at, r["value"][1]]
        out.append(r)
    return {**data, "result": out}


def fleet(base: dict, members: list[tuple[dict, str]]) -> dict:
    """One recording answering for several instances: `base` gives the requests (its
    queries and time range), each (recording, instance) member adds its series under
    that instance name, its timestamps moved onto base's range. The members must have
    made the same requests in the same order (the same kb collect over another window)."""
    b0 = base["args"]["start"]
    answers = []
    for i, req in enumerate(base["answers"]):
        docs = []
        for rec, inst in members:
            other = rec["answers"][i]
            assert other["path"] == req["path"], (i, other["path"], req["path"])
            shift = b0 - rec["args"]["start"]
            docs.append((json.loads(other["body"]), inst, shift))
        merged = json.loads(req["body"])
        if isinstance(merged.get("data"), list):  # label values: the union
            merged["data"] = sorted({n for d, _, _ in docs for n in d["data"]})
        elif "by (instance" in req["params"].get("query", "") or "last_over_time(" in req["params"].get("query", ""):
            at = float(req["params"]["time"]) if "time" in req["params"] else None
            result = []
            for d, inst, shift in docs:
                result += _relabel_result(d["data"], inst, shift, at)["result"]
            merged["data"] = {**merged["data"], "result": result}
        answers.append({**req, "body": json.dumps(merged, separators=(",", ":"))})
    return {**base, "answers": answers}


def renamed(rec: dict, names: dict[str, str], selector: tuple[str, str], instance: tuple[str, str],
            label_values: list[str], extra: dict[str, str]) -> dict:
    """A recording re-keyed for other metric names: every query text has `names` replaced
    (old → new) and the selector swapped, the instance renamed in every answer;
    label-values answers become `label_values`; a query still naming an old metric
    after the renaming is dropped; `extra` adds answers (query text → body, POST
    /api/v1/query at the recording's end)."""
    def rename(text: str) -> str:
        for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(old, new)
        return text.replace(*selector)

    answers = []
    for r in rec["answers"]:
        params = {k: rename(v) for k, v in r["params"].items()}
        if any(old.split(":")[0] + ":" in params.get("query", "") for old in names):  # e.g. vllm:cache_config_info
            continue
        body = r["body"].replace(f'"instance":"{instance[0]}"', f'"instance":"{instance[1]}"')
        if r["path"].startswith("/api/v1/label/"):
            body = json.dumps({"status": "success", "data": label_values}, separators=(",", ":"))
        answers.append({**r, "params": params, "body": body})
    at = f"{rec['args']['end']:.3f}"
    for query, body in extra.items():
        answers.append({"path": "/api/v1/query", "params": {"query": rename(query), "time": at}, "status": 200,
                        "body": body})
    args = {**rec["args"], "selector": rec["args"]["selector"].replace(*selector)}
    return {**rec, "args": args, "answers": answers}
