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
    # a default or must-be-set modifier (`${ENGINE_TP:?}`) is still one variable; a command in it is not
    line = render(["vllm", "serve", "m", "--tensor-parallel-size", "${ENGINE_TP:?}", "--port", "${PORT:-8000}",
                   "--host", "${H:-$(id)}"])
    assert '--tensor-parallel-size "${ENGINE_TP:?}" --port "${PORT:-8000}"' in line
    assert "'${H:-$(id)}'" in line


def test_a_version_between_catalogs_reads_the_nearer_one():
    known = versions("vllm")
    assert {"0.11.0", "0.19.1", "0.27.1", "0.29.0", "0.32.0"} <= set(known)
    # 0.28.1 lies one minor from 0.27.1 and from 0.29.0: a tie goes to the older catalog, so no
    # flag a later release added is taken as present
    assert nearest_version(known, "0.28.1rc1") == "0.27.1"
    assert nearest_version(known, "0.10.2") == "0.10.1.1"
    assert nearest_version(known, "0.40.0") == "0.32.0"
    assert catalog("vllm", "0.28.1rc1").has("--attention-backend")


def test_a_2026_vllm_release_is_checked_against_its_own_flags():
    # the 2026 catalogs (0.13.0-0.31.0): 0.19.1 was read against 0.11.0 before them, which lacks
    # flags 0.19.1 has; --disable-log-requests is gone in 0.17.1 (vLLM removed the deprecated flag)
    assert catalog("vllm", "0.19.1").version == "0.19.1"
    assert catalog("vllm", "0.19.1").has("--async-scheduling") and not catalog("vllm", "0.11.0").has(
        "--kv-offloading-size")
    assert catalog("vllm", "0.15.1").has("--disable-log-requests")
    assert not catalog("vllm", "0.17.1").has("--disable-log-requests")


def test_vllm_underscore_spelling_pins_the_version_like_the_dashed_one():
    # vLLM's parser reads --max_num_batched_tokens as --max-num-batched-tokens; the removed
    # --disable-log-requests then pins the newest catalog that still has it
    hit = infer_version("vllm", ["--disable-log-requests", "--max_num_batched_tokens"])
    assert hit is not None and hit[0] == "0.15.1"
    assert catalog("vllm", "0.11.0").check("--max_num_batched_tokens", 8192) is None
    assert catalog("sglang", "0.5.23").check("--max_running_requests", 8) is not None
