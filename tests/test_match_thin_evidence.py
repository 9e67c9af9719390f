"""Matcher mechanisms for thin evidence (issue 13): facts read from prose, a model's
name, punctuation-only phrases, and the text path's ranks and order."""

from __future__ import annotations

from pathlib import Path

from ingest.run import read_run
from kb.diagnose import diagnose
from kb.evidence import RunEvidence
from kb.match import Facts, _params_in_name, check, text_scores
from kb.records import Condition, Finding


def _facts(tmp_path: Path, prose: str, **launch) -> Facts:
    p = tmp_path / "notes.txt"
    p.write_text(prose)
    ev = read_run([p], **launch)
    return Facts.of(ev, ev.engine, None, [])


def _state(facts: Facts, key: str, value: str) -> str:
    return check(Condition(key=key, value=value), facts).state


def test_punctuation_only_phrase_matches_only_where_written(tmp_path):
    quiet = _facts(tmp_path, "Decode throughput halves once the batch passes 32 requests on sglang.\n")
    assert _state(quiet, "text", '"!!!!"') == "failed"  # normalised to "", it once matched every line
    loud = _facts(tmp_path, "With EAGLE on, some replies come back as !!!!!!!! up to max tokens.\n")
    assert _state(loud, "text", '"!!!!"') == "held"


def test_prose_facts_hold_for_any_value_the_prose_names(tmp_path):
    f = _facts(tmp_path, "We moved from the bf16 checkpoint to fp8 on Qwen3 and to Llama 3 for comparison; "
                         "the fp8 one is slower at batch 64.\n")
    # the prose names fp8 and bf16, Qwen3 and Llama: each is a possible fact, none excludes
    assert _state(f, "quantization", "bf16") == "held"
    assert _state(f, "quantization", "fp8") == "held"
    assert _state(f, "quantization", "awq") == "failed"
    assert _state(f, "model family", "llama") == "held"
    assert _state(f, "model family", "deepseek") == "failed"


def test_config_facts_are_not_widened_by_prose():
    from kb.records import ModelProfile

    ev = RunEvidence(model=ModelProfile(family="llama", quantization="fp8"))
    facts = Facts.of(ev, None, None, [])
    assert _state(facts, "quantization", "bf16") == "failed"


def test_model_name_with_active_parameters_is_moe(tmp_path):
    f = _facts(tmp_path, "Serving Qwen3.5-35B-A3B at 64 concurrent requests, decode is slow after warmup.\n")
    assert _state(f, "model", "moe") == "held"
    assert _state(f, "model", "dense") == "failed"


def test_parameters_from_the_model_name():
    assert _params_in_name("Qwen/Qwen3-8B") == 8.0
    assert _params_in_name("meta-llama/Llama-3.1-70B-Instruct") == 70.0
    assert _params_in_name("Qwen/Qwen3-235B-A22B-FP8") == 235.0  # total, not the 22 active
    assert _params_in_name("Qwen/Qwen3-0.6B") == 0.6
    assert _params_in_name("mistralai/Mixtral-8x7B-v0.1") is None  # 46.7B, not 8 x 7
    assert _params_in_name("Qwen/Qwen2.5-Coder") is None  # a version is not a size
    ev = RunEvidence(engine="vllm", model_path="Qwen/Qwen3-8B", launch_argv=["vllm", "serve", "Qwen/Qwen3-8B"])
    facts = Facts.of(ev, "vllm", None, [])
    assert _state(facts, "params", "<=14") == "held"
    assert _state(facts, "params", ">=30") == "failed"


def _finding(fid: str, words: str, **kw) -> Finding:
    return Finding(id=fid, title=words, symptoms=[words], fix="set `--max-num-seqs 128`",
                   fix_classes=[kw.pop("fix_class", "max-running-requests")], confidence="low", **kw)


def test_text_rank_counts_only_findings_that_could_be_proposed():
    hits = [(_finding(f"fx-{i}", "w"), 1.0) for i in range(7)]
    search = lambda q: hits  # noqa: E731
    query = "decode throughput collapses under many concurrent requests"
    every = text_scores(query, search)
    assert every["fx-5"] < 0.5  # sixth hit: below the words-alone bar
    some = text_scores(query, search, lambda f: f.id not in {"fx-0", "fx-1", "fx-2"})
    assert some["fx-3"] == 1.0 and some["fx-5"] > 0.5 and "fx-0" not in some


def test_too_few_words_no_text_path_four_is_enough():
    search = lambda q: [(_finding("fx-a", "w"), 1.0)]  # noqa: E731
    assert text_scores("slow decode", search) == {}
    assert text_scores("async scheduling vllm gain", search) == {"fx-a": 1.0}


def test_excluded_top_hits_leave_room_for_an_applicable_one(tmp_path):
    """Five sglang findings the words resemble most, then a vLLM one: on a vLLM run the
    sglang ones are excluded and the vLLM finding is proposed on words alone."""
    words = "requests pile up in the waiting queue while running stays at 256 and ttft grows"
    sg = [_finding(f"fx-sg{i}", words, applies_when=[Condition(key="engine", value="sglang")]) for i in range(5)]
    vl = _finding("fx-vllm", words, applies_when=[Condition(key="engine", value="vllm")])
    p = tmp_path / "notes.txt"
    p.write_text(f"On vLLM 0.11 {words}.\n")
    ev = read_run([p], engine="vllm")
    dx = diagnose(ev, [*sg, vl], search=lambda q: [(f, 1.0) for f in [*sg, vl]])
    rec = next(r for r in dx.recommendations if r.rule == "finding fx-vllm")
    assert rec.basis == "text"


def test_text_tier_orders_by_words_before_measured_gain(tmp_path):
    words = "prefill of long prompts stalls decode for every other request on the server"
    close = _finding("fx-close", words, fix_class="chunked-prefill")
    far = _finding("fx-far", words, fix_class="long-prefill")
    far.fix = "set `--max-num-batched-tokens 8192`"
    from kb.records import Context, Gain

    # measured 3x in a context as close as this run's (same engine): its score is the higher
    far.gains = [Gain(metric="throughput", before=100.0, after=300.0, unit="tok/s")]
    far.context = Context(engine="vllm")
    p = tmp_path / "notes.txt"
    p.write_text(words + "\n")
    dx = diagnose(read_run([p], engine="vllm"), [close, far], search=lambda q: [(close, 2.0), (far, 1.0)])
    recs = {r.rule: r for r in dx.recommendations}
    assert recs["finding fx-far"].score > recs["finding fx-close"].score
    order = [r.rule for r in dx.recommendations if r.basis == "text"]
    assert order[:2] == ["finding fx-close", "finding fx-far"]


def test_mla_from_a_family_that_only_has_mla_models():
    ev = RunEvidence(engine="vllm", model_path="deepseek-ai/DeepSeek-V3.2",
                     launch_argv=["vllm", "serve", "deepseek-ai/DeepSeek-V3.2"])
    assert _state(Facts.of(ev, "vllm", None, []), "model", "moe, mla") == "held"
    llama = RunEvidence(engine="vllm", model_path="meta-llama/Llama-3.1-8B")
    assert _state(Facts.of(llama, "vllm", None, []), "model", "mla") == "unknown"  # no config, not an MLA family


def test_prose_in_a_language_without_spaces_is_text_evidence(tmp_path):
    # A Chinese issue ("one stream is fast, at 3-6 tasks it drops to 1 token/s") with the
    # user's flag in it: read as text, so its flag and numbers reach the matcher; before,
    # a file without three Latin-letter words was skipped as "not a recognised format".
    p = tmp_path / "issue.txt"
    p.write_text("单并发很快很准 任务数量在3-6时就每秒1t了 很慢\n启动参数 --max-num-seqs 4 --enforce-eager\n")
    ev = read_run([p])
    assert ev.files[0].get("kind") == "text", ev.files
    assert any("--enforce-eager" in t.text for t in ev.text)
    data = tmp_path / "data.txt"
    data.write_text("0.1 0.2 0.3\n1 2 3\n")  # numbers alone are still not text
    assert "skipped" in read_run([data]).files[0]


def test_a_sentence_with_an_inline_command_stays_prose(tmp_path):
    # people paste the command inside their sentence; the line is a launch command (read as
    # one) and a sentence (kept as prose for `text:` conditions and similarity) at once
    p = tmp_path / "issue.md"
    p.write_text("We launched with `vllm serve Qwen/Qwen3-8B --tensor-parallel-size 8` and decode is only "
                 "10 tok/s per user on H100.\n")
    ev = read_run([p])
    assert ev.launch_argv and ev.arg("tensor-parallel-size") in (8, "8")
    assert [t.kind for t in ev.text] == ["prose"]
    q = tmp_path / "cmd.txt"  # a bare command line is not prose
    q.write_text("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 8 --max-model-len 32768\n")
    assert all(t.kind != "prose" for t in read_run([q]).text)
