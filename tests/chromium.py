"""Headless Chromium (Debian's `chromium` package) for the report tests: the DOM after
rendering, a screenshot, and the network requests a page made.

Never skipped: without chromium the tests fail and say what to install (.ci/run does it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

INSTALL = "apt-get update && apt-get install -y chromium"
# Required on this machine's closed network: no QUIC, no first-run, no background fetches.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def binary() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if not found:
        pytest.fail(f"chromium is not installed; the report tests open reports in it: run `{INSTALL}`", pytrace=False)
    return found


def run(page: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="kb-chromium-") as profile:
        return subprocess.run([binary(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)


def dump_dom(page: Path) -> str:
    proc = run(page, "--dump-dom")
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 2400) -> Path:
    proc = run(page, f"--screenshot={png}", f"--window-size={width},{height}")
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return png


def page_requests(page: Path, netlog: Path) -> list[str]:
    """URLs the page asked the network stack for, from Chromium's net log. The browser's own
    background requests (component updater, accounts) carry the initiator "not an origin";
    a page's requests carry its origin ("null" for a file:// page)."""
    proc = run(page, "--dump-dom", f"--log-net-log={netlog}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    assert log["events"], "the net log is empty: Chromium did not record anything"
    jobs = [ev["params"] for ev in log["events"] if ev["type"] == start and "url" in ev.get("params", {})]
    return [p["url"] for p in jobs if p.get("initiator") != "not an origin"]


class Dom(HTMLParser):
    """Element ids in nesting order: how many <use> markers and what text each holds."""

    def __init__(self, text: str):
        super().__init__()
        self.stack: list[tuple[str, str | None]] = []
        self.uses: dict[str, int] = {}
        self.texts: dict[str, list[str]] = {}
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}
        self.attrs: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs.append((tag, a))
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "use":
            for _, i in self.stack:
                if i:
                    self.uses[i] = self.uses.get(i, 0) + 1
        if tag not in ("meta", "br", "img", "input", "link", "hr"):
            self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag):
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                del self.stack[k:]
                return

    def handle_data(self, data):
        for _, i in self.stack:
            if i:
                self.texts.setdefault(i, []).append(data)

    def text(self, id_: str) -> str:
        return " ".join("".join(self.texts.get(id_, [])).split())
