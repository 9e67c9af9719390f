"""Words of the user's launch command kept as the shell and the engine read them."""

from kb.flagdata import versions
from kb.flags import catalog, infer_version, nearest_version
from kb.launchcmd import apply, render


def test_a_negative_value_is_a_value_not_a_flag():
    # sglang's `--chunked-prefill-size -1` (no chunking): a change replaces the -1, it does not keep it
    argv = ["python3", "-m", "sglang.launch_server", "--chunked-prefill-size", "-1", "--tp", "4"]
    out = apply(argv, [("--chunked-prefill-size", 16384, [])])
    assert out == ["python3", "-m", "sglang.launch_server", "--chunked-prefill-size", "16384", "--tp", "4"]


def test_a_shell_variable_is_left_for_the_shell_and_nothing_else_runs():
    line = render(["python3", "-m", "sglang.launch_server", "--port", "${SERVER_PORT}", "--host", "$HOST",
                   "--model-path", "$(rm -rf ~)", "--served-model-name", "a b"])
    assert '--port "${SERVER_PORT}" --host "$HOST"' in line
    assert "'$(rm -rf ~)'" in line and "'a b'" in line


def test_a_version_between_catalogs_reads_the_nearer_one():
    known = versions("vllm")
    assert {"0.11.0", "0.32.0"} <= set(known)
    assert nearest_version(known, "0.28.1rc1") == "0.32.0"  # 4 minors away, not 17
    assert nearest_version(known, "0.12.0") == "0.11.0"
    assert catalog("vllm", "0.28.1rc1").has("--attention-backend")


def test_vllm_underscore_spelling_pins_the_version_like_the_dashed_one():
    # vLLM's parser reads --max_num_batched_tokens as --max-num-batched-tokens; the removed
    # --disable-log-requests then pins the newest catalog that still has it
    hit = infer_version("vllm", ["--disable-log-requests", "--max_num_batched_tokens"])
    assert hit is not None and hit[0] == "0.11.0"
    assert catalog("vllm", "0.11.0").check("--max_num_batched_tokens", 8192) is None
    assert catalog("sglang", "0.5.23").check("--max_running_requests", 8) is not None
