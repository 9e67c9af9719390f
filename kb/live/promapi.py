"""Prometheus's HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/), read
with the same hygiene as kb's live server client (kb/live/client.py): http(s) only, no
credentials in the URL, connect and read timeouts, no proxy or .netrc from the
environment, answers streamed and cut off past a byte cap, redirects refused.

Credentials: `--prometheus-token` is sent as `Authorization: Bearer`, or with
`--prometheus-user` as HTTP basic auth (user, token as the password). The token is
registered with kb.redact, so no message, report or output ever shows it.

Every answer is the API's envelope `{"status": "success"|"error", "data": ...,
"errorType": ..., "error": ...}`; a failure becomes one kb.errors.ServerError line.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field

import httpx

from kb.errors import ServerError
from kb.live.client import Timeouts, checked_url, describe_error, error_line, shown
from kb.redact import register_secret

ANSWER_CAP = 16 * 2**20  # bytes of one API answer (a capped range query is ~7 MB, see kb/fleet/collect.py)
ERROR_BODY_CAP = 4096


@dataclass
class Recorded:
    """One request and its verbatim answer (for tests/data/samples/prometheus)."""

    path: str
    params: dict
    status: int
    body: str


@dataclass
class PromApi:
    url: str
    token: str | None = None
    user: str | None = None
    timeouts: Timeouts = field(default_factory=lambda: Timeouts(connect=5.0, read=60.0))
    record: list[Recorded] | None = None  # when a list, every answer is appended to it

    def __post_init__(self):
        self.base = _base(self.url)
        self.where = f"Prometheus at {shown(self.base)}"
        headers = {"User-Agent": "kb-fleet/1", "Accept": "application/json"}
        if self.token:
            register_secret(self.token)
            if self.user:
                raw = base64.b64encode(f"{self.user}:{self.token}".encode()).decode()
                register_secret(raw)
                headers["Authorization"] = f"Basic {raw}"
            else:
                headers["Authorization"] = f"Bearer {self.token}"
        self.client = httpx.Client(headers=headers, timeout=self.timeouts.httpx(), follow_redirects=False,
                                   trust_env=False)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "PromApi":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------- endpoints

    def query(self, expr: str, time: float) -> list[dict]:
        """Instant query: [{"metric": {labels}, "value": [t, "v"]}] (a vector answer)."""
        data = self._call("POST", "/api/v1/query", {"query": expr, "time": _ts(time)})
        return _result(data, "vector", self.where, expr)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        """Range query: [{"metric": {labels}, "values": [[t, "v"], ...]}] (a matrix answer)."""
        data = self._call("POST", "/api/v1/query_range",
                          {"query": expr, "start": _ts(start), "end": _ts(end), "step": f"{step:g}"})
        return _result(data, "matrix", self.where, expr)

    def label_values(self, label: str, match: str, start: float | None = None, end: float | None = None) -> list[str]:
        """Values of `label` on the series `match` selects (GET /api/v1/label/<label>/values)."""
        params: dict = {"match[]": match}
        if start is not None and end is not None:
            params.update(start=_ts(start), end=_ts(end))
        data = self._call("GET", f"/api/v1/label/{label}/values", params)
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise ServerError(f"{self.where}: label values answer is not a list of names")
        return data

    # ------------------------------------------------------------- transport

    def _call(self, method: str, path: str, params: dict):
        url = self.base.copy_with(path=self.base.path.rstrip("/") + path)
        try:
            if method == "GET":
                req = self.client.build_request("GET", url, params=params)
            else:
                req = self.client.build_request("POST", url, data=params)
            r = self.client.send(req, stream=True)
            try:
                status = r.status_code
                if r.is_redirect:
                    raise ServerError(f"{self.where}: {path} redirects (HTTP {status}); give the URL it moved to")
                limit = ANSWER_CAP if status < 400 else ERROR_BODY_CAP
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        if status >= 400:
                            break
                        raise ServerError(f"{self.where}: {path} answer larger than {ANSWER_CAP // 2**20} MiB; "
                                          f"stopped reading (narrow --selector or the range)")
            finally:
                r.close()
        except httpx.HTTPError as e:
            raise ServerError(f"Prometheus: {describe_error(e, url, self.timeouts)}") from None
        text = bytes(body).decode("utf-8", errors="replace")
        if self.record is not None:
            self.record.append(Recorded(path, dict(params), status, text))
        return _envelope(status, text, path, self.where, bool(self.token))


def _base(url: str) -> httpx.URL:
    u = checked_url(url, "Prometheus's URL", "http://127.0.0.1:9090", "--prometheus-user/--prometheus-token")
    return u.copy_with(path=u.path.rstrip("/") or "", query=None, fragment=None)


def _ts(t: float) -> str:
    return f"{t:.3f}"


def _envelope(status: int, text: str, path: str, where: str, had_token: bool):
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = None
    if status in (401, 403):
        why = ("the token was refused" if had_token else "it needs credentials (--prometheus-token, "
               "--prometheus-user)")
        raise ServerError(f"{where}: {path} answered HTTP {status}: {why}")
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        head = " ".join(text.split())[:120]
        if status >= 400:
            raise ServerError(f"{where}: {path} answered HTTP {status}" + (f": {head}" if head else ""))
        raise ServerError(f"{where}: {path} did not answer as the Prometheus API does (not JSON with a status); "
                          f"is this Prometheus? ({head or 'empty answer'})")
    if doc["status"] == "error" or status >= 400:
        kind = doc.get("errorType") or "error"
        msg = error_line(Exception(str(doc.get("error") or "no message")))
        raise ServerError(f"{where}: {path} answered HTTP {status} ({kind}): {msg}")
    return doc.get("data")


def _result(data, want: str, where: str, expr: str) -> list[dict]:
    if not isinstance(data, dict) or data.get("resultType") != want or not isinstance(data.get("result"), list):
        raise ServerError(f"{where}: expected a {want} answer to {expr[:80]!r}")
    return [r for r in data["result"] if isinstance(r, dict) and isinstance(r.get("metric"), dict)]


def number(v) -> float | None:
    """A sample value as Prometheus sends it (a string: "8", "0.25", "NaN", "+Inf")."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
