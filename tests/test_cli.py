"""`kb` end to end: ask, show, ingest --report, and bad input (exit 1, one line,
file and line named, index untouched)."""

import pytest
from conftest import DATA

PLATEAU_Q = "why does throughput plateau at 128 concurrency"


def test_ask_json_has_stable_keys(kb):
    out = kb("ask", PLATEAU_Q, "--json", check_json=True)
    assert out["question"] == PLATEAU_Q
    first = out["answers"][0]
    for key in ("rank", "score", "id", "title", "kind", "symptoms", "context", "root_cause", "fix",
                "fix_classes", "commands", "gains", "sources", "confidence"):
        assert key in first
    assert first["rank"] == 1


def test_plateau_question_top3_are_real_causes_with_command_gain_source(kb):
    out = kb("ask", PLATEAU_Q, "--json", "-n", "3", check_json=True)
    # classes whose findings explain a throughput plateau; quantization kernels that do not
    # batch (bitsandbytes dequantizing per matmul, qk-vllm-bnb-no-concurrency-scaling) are one
    causes = {"max-running-requests", "cuda-graph-max-bs", "kv-cache-capacity", "moe-kernel-config",
              "moe-runner-backend", "scheduler-policy", "chunked-prefill", "mem-fraction", "quantization-kernel"}
    top = out["answers"]
    assert len(top) == 3
    assert all(set(a["fix_classes"]) & causes for a in top), [a["id"] for a in top]
    with_all = [a for a in top if a["commands"] and a["gains"] and a["sources"]]
    assert with_all, "at least one of the top three carries a command, a measured gain and a source"


def test_ask_text_report(kb):
    proc = kb("ask", PLATEAU_Q)
    assert proc.returncode == 0
    assert "1. " in proc.stdout and "command" in proc.stdout and "source" in proc.stdout


def test_show_prints_one_finding_whole(kb):
    fid = kb("ask", PLATEAU_Q, "--json", check_json=True)["answers"][0]["id"]
    proc = kb("show", fid)
    assert proc.returncode == 0 and f"- **ID:** {fid}" in proc.stdout
    assert kb("show", "no-such-finding").returncode == 1


def test_ingest_report_lists_found_and_missing(kb):
    proc = kb("ingest", DATA / "markdown" / "messy_FINDINGS.md", "--report")
    assert proc.returncode == 0, proc.stderr
    assert "messy_FINDINGS.md: findings, added, 14 records" in proc.stdout
    assert "found:" in proc.stdout and "missing:" in proc.stdout
    # the ingested notes are searchable right away
    out = kb("ask", "nccl env that did nothing", "--json", check_json=True)
    assert out["answers"][0]["id"].startswith("messy-findings-nccl")


def _bad_files(tmp_path):
    binary = tmp_path / "weights.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"# ok\n\nsecond line caf\xe9\n")
    plain = tmp_path / "plain.md"
    plain.write_text("just some words\nno headings at all\n")
    table = tmp_path / "table.md"
    table.write_text("# t\n\n## x\n\n- **ID:** x-1\n- **Confidence:** low\n\n| Metric | Before | After | Unit | "
                     "Concurrency | Runs |\n"
                     "|---|---|---|---|---|---|\n| throughput | fast | 3740 | tok/s | 256 | 1 |\n")
    return [(binary, "binary", None), (empty, "empty file", None), (latin, "not UTF-8", 3),
            (plain, "not markdown", None), (table, "Before", 10), (tmp_path / "missing.md", "no such file", None)]


def test_bad_input_is_one_line_exit_1_and_index_untouched(kb, tmp_path):
    kb("ingest", DATA / "markdown" / "messy_FINDINGS.md")
    before = kb("ask", "nccl env that did nothing", "--json", check_json=True)
    for path, words, line in _bad_files(tmp_path):
        proc = kb("ingest", path)
        assert proc.returncode == 1, (path, proc.stderr)
        err = proc.stderr.strip()
        assert err.count("\n") == 0 and "Traceback" not in err
        assert str(path) in err and words in err
        if line:
            assert f"{path}:{line}:" in err
    assert kb("ask", "nccl env that did nothing", "--json", check_json=True) == before


def test_named_file_that_yields_nothing_is_an_error_but_skipped_inside_a_directory(kb, tmp_path):
    """4 KB of random bytes named on the command line: one line naming it, exit 1, and
    the findings named with it are not stored. The same file met in a directory walk is
    reported and skipped (exit 0)."""
    import os

    blob = tmp_path / "run" / "capture.bin"
    blob.parent.mkdir()
    blob.write_bytes(os.urandom(4096))
    notes = DATA / "markdown" / "messy_FINDINGS.md"
    proc = kb("ingest", notes, blob)
    err = proc.stderr.strip()
    assert proc.returncode == 1 and err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"kb: error: {blob}: not a recognised format") and "nothing was ingested" in err
    assert not any(a["id"].startswith("messy-findings")
                   for a in kb("ask", "nccl env that did nothing", "--json", check_json=True)["answers"])
    walked = kb("ingest", blob.parent)
    assert walked.returncode == 0, walked.stderr
    assert f"{blob}: skipped (not a recognised format" in walked.stdout


def test_unreadable_path(kb, tmp_path):
    # under a regular file, so it cannot be opened even by root
    f = tmp_path / "file.md"
    f.write_text("# x\n")
    proc = kb("ingest", f / "child.md")
    assert proc.returncode == 1 and "child.md" in proc.stderr and "Traceback" not in proc.stderr


def test_permission_denied_is_named(tmp_path, monkeypatch):
    from kb.errors import InputError
    from kb.textfile import read_text

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    (tmp_path / "x.md").write_text("# x\n")
    monkeypatch.setattr("kb.textfile.os.open", deny)  # tests run as root: chmod would not deny
    with pytest.raises(InputError, match="permission denied"):
        read_text(tmp_path / "x.md")


def test_usage_error_exits_2(kb):
    assert kb("ask").returncode == 2
    assert kb("frobnicate").returncode == 2
