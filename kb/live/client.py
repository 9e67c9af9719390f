"""HTTP hygiene shared by the live commands.

- only http:// and https:// URLs with a host;
- connect and read timeouts on every request;
- info and metrics answers are streamed and cut off past a size cap;
- redirects are followed only to the same scheme, host and port (at most 3);
- the API key travels in the Authorization header and nowhere else (never in an
  error message, a report or an output file);
- every httpx error becomes a one-line kb.errors.ServerError here, where it enters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from kb.errors import ServerError
from kb.redact import register_secret

INFO_CAP = 1 * 2**20  # bytes of an info endpoint's answer
METRICS_CAP = 16 * 2**20  # bytes of a /metrics answer
ERROR_BODY_CAP = 2048
MAX_REDIRECTS = 3


@dataclass(frozen=True)
class Timeouts:
    connect: float = 5.0
    read: float = 30.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.read, pool=None)


def checked_url(url: str, what: str, example: str, credentials: str) -> httpx.URL:
    """A URL kb may talk to: a scheme given, http(s) only, a host, no credentials in it
    (they belong in `credentials`, which are never printed)."""
    text = (url or "").strip()
    if "://" not in text:
        raise ServerError(f"{text!r}: give {what} with its scheme, e.g. {example}")
    try:
        u = httpx.URL(text)
    except (httpx.InvalidURL, ValueError) as e:
        raise ServerError(f"{text!r}: not a valid URL ({e})") from None
    if u.scheme not in ("http", "https"):
        raise ServerError(f"{text!r}: only http:// and https:// URLs are supported")
    if not u.host:
        raise ServerError(f"{text!r}: the URL has no host")
    if u.userinfo:
        raise ServerError(f"{shown(u)}: put credentials in {credentials}, not in the URL")
    return u


def base_url(url: str) -> httpx.URL:
    """The server's root URL: http(s) only, a host, no credentials; a trailing `/v1` is dropped."""
    u = checked_url(url, "the server URL", "http://127.0.0.1:8000", "--api-key or KB_API_KEY")
    path = u.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return u.copy_with(path=path or "", query=None, fragment=None)


def shown(u: httpx.URL) -> str:
    """A URL for messages: scheme, host, port and path, nothing else."""
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}{u.path.rstrip('/')}"


def join(base: httpx.URL, path: str) -> httpx.URL:
    return base.copy_with(path=base.path.rstrip("/") + path)


def headers(api_key: str | None) -> dict[str, str]:
    h = {"User-Agent": "kb-live/1", "Accept": "application/json, text/plain;q=0.9, */*;q=0.5"}
    if api_key:
        register_secret(api_key)  # a server that repeats it back gets it redacted in all kb shows or keeps
        h["Authorization"] = f"Bearer {api_key}"
    return h


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def describe_error(e: BaseException, url: httpx.URL, timeouts: Timeouts | None = None) -> str:
    """One line for an httpx (or OS) error, naming the URL and never a header."""
    t = timeouts or Timeouts()
    where = shown(url)
    if isinstance(e, httpx.ConnectTimeout):
        return f"{where}: no connection within {t.connect:g} s (connect timeout)"
    if isinstance(e, (httpx.ReadTimeout, httpx.WriteTimeout)):
        return f"{where}: connected, but no answer within {t.read:g} s (read timeout)"
    if isinstance(e, httpx.PoolTimeout):
        return f"{where}: no free connection (pool timeout)"
    if isinstance(e, httpx.ConnectError):
        text = str(e).lower()
        if "refused" in text:
            return f"{where}: connection refused (is the server running on that port?)"
        if "name or service" in text or "nodename" in text or "resolution" in text or "getaddrinfo" in text:
            return f"{where}: host name does not resolve"
        if "ssl" in text or "certificate" in text:
            return f"{where}: TLS handshake failed ({error_line(e)})"
        return f"{where}: cannot connect ({error_line(e)})"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"{where}: the server closed the connection or broke the HTTP protocol ({error_line(e)})"
    if isinstance(e, httpx.ReadError):
        return f"{where}: the connection broke while reading ({error_line(e)})"
    if isinstance(e, httpx.TooManyRedirects):
        return f"{where}: too many redirects"
    if isinstance(e, httpx.HTTPError):
        return f"{where}: {type(e).__name__}: {error_line(e)}"
    if isinstance(e, OSError):
        return f"{where}: {e.strerror or e}"
    return f"{where}: {type(e).__name__}: {error_line(e)}"


def error_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:200]


@dataclass
class Answer:
    status: int
    url: httpx.URL
    body: bytes
    content_type: str = ""

    def json(self):
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def get(client: httpx.Client, base: httpx.URL, path: str, cap: int = INFO_CAP,
        timeouts: Timeouts | None = None) -> Answer:
    """GET base+path, following same-origin redirects only, reading at most `cap`
    bytes (ServerError beyond). Network errors become ServerError."""
    url = join(base, path)
    for _ in range(MAX_REDIRECTS + 1):
        try:
            with client.stream("GET", url) as r:
                if r.is_redirect:
                    loc = r.headers.get("location", "")
                    nxt = url.join(loc)
                    if not same_origin(base, nxt):
                        raise ServerError(f"{shown(url)}: redirects to another host ({shown(nxt)}); not followed")
                    url = nxt
                    continue
                body = bytearray()
                limit = cap if r.status_code < 400 else ERROR_BODY_CAP
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        if r.status_code >= 400:
                            break
                        raise ServerError(f"{shown(url)}: answer larger than {cap // 1024} KiB; stopped reading")
                return Answer(r.status_code, url, bytes(body), r.headers.get("content-type", ""))
        except httpx.HTTPError as e:
            raise ServerError(describe_error(e, url, timeouts)) from None
    raise ServerError(f"{shown(base)}{path}: more than {MAX_REDIRECTS} redirects")


def sync_client(api_key: str | None, timeouts: Timeouts, verify: bool = True) -> httpx.Client:
    return httpx.Client(headers=headers(api_key), timeout=timeouts.httpx(), follow_redirects=False,
                        trust_env=False, verify=verify)
