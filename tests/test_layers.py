"""The layers of docs/ARCHITECTURE.md hold: `lint-imports` keeps the contracts in
pyproject.toml (layers, knowledge without formats, no cycles), every module sits in a
layer, and a forbidden import really breaks the check."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _lint(cwd: Path, env_path: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(env_path)} if env_path else None
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_import_contracts_are_kept():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 kept, 0 broken" in r.stdout


def test_every_module_is_in_a_layer():
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    listed = [m.strip() for layer in layers for m in layer.replace("|", ":").split(":")]
    graph = grimp.build_graph("kb", "ingest", cache_dir=None)
    # the package `kb` itself only re-exports the facade (kb.app) and the version
    outside = sorted(m for m in graph.modules if m != "kb"
                     and not any(m == p or m.startswith(p + ".") for p in listed))
    assert not outside, f"modules in no layer of pyproject.toml's contract: {outside}"
    assert len(listed) == len(set(listed)), "a module is listed in two layers"


def test_an_upward_import_breaks_the_check(tmp_path):
    """A core module importing the store (knowledge) must fail lint-imports."""
    for pkg in ("kb", "ingest"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    records = tmp_path / "kb" / "records.py"
    records.write_text(records.read_text() + "\nfrom kb.store import Store  # noqa: E402\n")
    r = _lint(tmp_path, env_path=tmp_path)
    assert r.returncode != 0
    assert "kb.records -> kb.store" in r.stdout
    assert "layers: core < formats < knowledge < rules < application < CLI BROKEN" in r.stdout
