"""benchmarks/sweep_vs_vllm.py runs end to end against the live server: kb's sweep and
vLLM's own serving benchmark on the same server, their ratio, and the client's CPU use.
(The figures themselves are measured on a quiet machine. Here each figure is the median
of three interleaved runs, so one run slowed by whatever else this 2-core machine runs
does not decide, and the bounds only catch gross errors such as miscounted tokens.)"""

import re
import subprocess
import sys

from live.vllm_server import ROOT


def test_sweep_vs_vllm_script(vllm8):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_vs_vllm.py"), "--url", vllm8.url,
                           "--concurrency", "4", "--requests", "32", "--repeat", "3", "--cpu-streams", "32"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "kb sweep vs vLLM benchmarks/serve.py" in out
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("4 "))
    ratios = [float(x) for x in row.split()[3::3]]  # kb, vLLM, ratio for each of the four figures
    assert len(ratios) == 4, row
    total, output = ratios[0], ratios[1]
    assert 0.4 < total < 2.5 and 0.4 < output < 2.5, out
    m = re.search(r"client CPU at 32 concurrent streams: 64 requests, .* = ([\d.]+)% of one core", out)
    assert m, out
    assert 0 < float(m.group(1)) < 100
