"""`kb doctor --report` against the real vLLM server (--max-num-seqs 8): the HTML page is
written after the diagnosis and opens in headless Chromium; the saved `kb doctor --json`
is reported the same way."""

import json

import chromium

SWEEP = ["-c", "1,8,16", "--duration", "2", "--input-len", "32", "--output-len", "64"]


def test_doctor_report_and_saved_doctor_json(kb_live, vllm8, tmp_path):
    out, page = tmp_path / "doctor.jsonl", tmp_path / "doctor.html"
    proc = kb_live("doctor", vllm8.url, *SWEEP, "--out", out, "--report", page, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    levels = [lv["max_concurrency"] for lv in doc["sweep"]["levels"]]
    assert levels == [1, 8, 16]
    dom = chromium.Dom(chromium.dump_dom(page))
    assert dom.uses["throughput-total-0"] == len(levels)
    assert "state-running" in dom.ids and "state-waiting" in dom.ids  # /metrics samples of the sweep
    html = page.read_text()
    assert doc["diagnosis"]["signals"], "a server capped at 8 under 16 streams shows signals"
    for s in doc["diagnosis"]["signals"]:
        assert f'data-signal="{s["id"]}"' in html
    saved = tmp_path / "doctor.json"
    saved.write_text(proc.stdout)
    again = tmp_path / "saved.html"
    proc = kb_live("report", saved, "--out", again)
    assert proc.returncode == 0, proc.stderr
    dom = chromium.Dom(again.read_text())
    assert dom.uses["throughput-total-0"] == len(levels)
    assert dom.uses["latency-ttft-p99-0"] == len(levels)  # the doctor file keeps every percentile
    for s in doc["diagnosis"]["signals"]:
        assert f'data-signal="{s["id"]}"' in again.read_text()
