"""Write kb/data/moe_configs/vllm-VERSION.txt: the tuned fused-MoE Triton configs an
installed vLLM ships (the file names of vllm/model_executor/layers/fused_moe/configs,
one a line, without `.json`), so KB105 can say whether this shape on this GPU has one.

    python scripts/gen_moe_config_list.py [--python /root/.cache/kb/engines-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "kb" / "data" / "moe_configs"
PROBE = ("import json, os, vllm, vllm.model_executor.layers.fused_moe as f; "
         "d = os.path.join(os.path.dirname(f.__file__), 'configs'); "
         "print(json.dumps([vllm.__version__, sorted(n[:-5] for n in os.listdir(d) "
         "if n.startswith('E=') and n.endswith('.json'))]))")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/root/.cache/kb/engines-venv/bin/python",
                    help="the Python of an environment with vLLM installed")
    args = ap.parse_args()
    version, names = json.loads(subprocess.run([args.python, "-c", PROBE], check=True, capture_output=True,
                                               text=True, timeout=300).stdout.strip().splitlines()[-1])
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"vllm-{version}.txt"
    path.write_text("\n".join(names) + "\n")
    print(f"wrote {path} ({len(names)} configs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
