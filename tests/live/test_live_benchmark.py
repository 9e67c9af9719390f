"""benchmarks/sweep_vs_vllm.py runs end to end against the live server: kb's sweep and
vLLM's own serving benchmark on the same server, alternating, their ratios, the workload
each sent and each client's CPU. (The figures themselves are measured in the benchmark
run docs/PERFORMANCE.md reports. Here the bounds only catch gross errors, such as
miscounted tokens or different workloads, not this shared machine's load.)"""

import re
import subprocess
import sys

from live.vllm_server import ROOT


def test_sweep_vs_vllm_script(vllm8):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_vs_vllm.py"), "--url", vllm8.url,
                           "--concurrency", "4", "--requests", "32", "--repeat", "3"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "kb sweep vs vllm.benchmarks.serve" in out and "3 alternating runs per level" in out
    rows = {m.group(1).strip(): [float(x.replace(",", "")) for x in m.groups()[1:]]
            for m in re.finditer(r"^\s+4  (.{13}) +([\d,.]+) +([\d,.]+) +([\d.]+) +([\d.]+) \(", out, re.M)}
    assert set(rows) == {"total tok/s", "output tok/s", "TTFT p50 ms", "TPOT p50 ms"}, out
    for kb, vllm, ratio, _ in rows.values():
        assert kb > 0 and vllm > 0 and abs(ratio - kb / vllm) < 0.01 * ratio, out
    assert 0.4 < rows["total tok/s"][2] < 2.5, out
    # the same workload: both sent about 32 prompt tokens and exactly 64 output tokens a request
    m = re.search(r"c=4 kb ([\d.]+) in / (\d+) out, vLLM ([\d.]+) in / (\d+) out", out)
    assert m, out
    kb_in, kb_out, v_in, v_out = float(m.group(1)), int(m.group(2)), float(m.group(3)), int(m.group(4))
    assert (kb_out, v_out) == (64, 64) and abs(kb_in - v_in) <= 0.1 * v_in, out
    m = re.search(r"c=4 kb ([\d.]+), vLLM ([\d.]+)", out)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
