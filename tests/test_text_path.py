"""The diagnosis text path on prose: which findings a paragraph's words may propose,
how close the words are, how many proposals survive, and how a finding's engine
version range reads when the prose states no version. Prose written for these tests."""

from pathlib import Path

from ingest.run import read_run
from kb.diagnose import diagnose
from kb.evidence import RunEvidence, TextLine
from kb.flagdata import versions
from kb.flags import catalog
from kb.match import TEXT_TOP, Check, Facts, Match, check, feature_named, run_words, text_scores
from kb.recommend import MAX_FROM_FINDINGS, TEXT_MIN, select
from kb.records import Condition, Finding


def finding(fid: str, fix_class: str, title: str, when: tuple = ()) -> Finding:
    return Finding(id=fid, title=title, fix=f"apply the fix of {fid}", fix_classes=[fix_class], confidence="low",
                   applies_when=list(when))


def searching(*ranked: tuple[Finding, float]):
    """A stand-in for the `kb ask` index: these hits, in this order, for any text."""
    return lambda text: list(ranked)


def prose_run(tmp_path: Path, text: str, engine: str = "vllm") -> RunEvidence:
    p = tmp_path / "notes.txt"
    p.write_text(text + "\n")
    return read_run([p], engine=engine)


LORA = finding("tx-lora-eager", "lora", "LoRA adapters under --enforce-eager decode slowly")
EAGER = finding("tx-eager", "eager-mode", "--enforce-eager turns CUDA graphs off and slows decode")


def test_a_feature_bound_fix_is_not_proposed_when_the_prose_never_names_the_feature(tmp_path):
    """The closest words belong to a LoRA finding, but this run serves no adapter: the
    eager-mode finding is proposed first and the LoRA one not at all."""
    ev = prose_run(tmp_path, "Our vLLM server runs in eager mode on one workstation GPU and token generation is "
                             "very slow, about eleven tokens per second for a single user.")
    dx = diagnose(ev, [LORA, EAGER], search=searching((LORA, 12.0), (EAGER, 11.5)))
    classes = [r.fix_class for r in dx.recommendations]
    assert not ev.launch_argv  # words only: no launch command for a rule to read
    assert classes[0] == "eager-mode" and dx.recommendations[0].basis == "text"
    assert "lora" not in classes


def test_the_same_fix_is_proposed_when_the_prose_names_the_feature(tmp_path):
    ev = prose_run(tmp_path, "We serve four LoRA adapters from vLLM in eager mode and token generation is "
                             "very slow, about eleven tokens per second for a single user.")
    dx = diagnose(ev, [LORA, EAGER], search=searching((LORA, 12.0), (EAGER, 11.5)))
    assert [r.fix_class for r in dx.recommendations] == ["lora", "eager-mode"]


def test_feature_words_come_from_the_setup_too():
    """A hybrid model named only by its repo id, an AMD GPU named only by the hardware."""
    hybrid = finding("tx-hyb", "hybrid-state-cache", "state cache too small")
    aiter = finding("tx-aiter", "rocm-aiter", "AITER kernels off")
    assert feature_named(hybrid, run_words(RunEvidence(model_path="Qwen/Qwen3-Next-80B-A3B-Instruct")))
    assert not feature_named(hybrid, run_words(RunEvidence(model_path="meta-llama/Llama-3.1-8B-Instruct")))
    assert not feature_named(aiter, run_words(RunEvidence(model_path="meta-llama/Llama-3.1-8B-Instruct")))
    assert feature_named(EAGER, " nothing at all ")  # not a feature-bound class: never gated


def test_text_similarity_falls_with_the_score_not_only_the_rank():
    a, b, c = (finding(f"tx-{n}", "eager-mode", n) for n in "abc")
    q = "decode is slow after the upgrade and the server log shows no warnings at all"
    got = text_scores(q, searching((a, 10.0), (b, 9.0), (c, 2.0)))
    assert got["tx-a"] == 1.0
    assert got["tx-b"] >= TEXT_MIN  # close to the best: still proposed on words
    assert got["tx-c"] < TEXT_MIN  # third by rank (0.72 by rank alone), a fifth of the best by score


def test_text_scores_keep_only_the_best_hits():
    many = [(finding(f"tx-{i}", "eager-mode", str(i)), 10.0 - i * 0.1) for i in range(TEXT_TOP + 4)]
    got = text_scores("decode is slow after the upgrade with the same flags", searching(*many))
    assert len(got) == TEXT_TOP


def test_names_with_digits_count_as_words_of_a_short_question():
    hit = finding("tx-pp", "pipeline-parallelism", "pipeline parallel over PCIe")
    assert text_scores("tp4 pp2 on 8 pcie gpus", searching((hit, 3.0)))
    assert not text_scores("slow!", searching((hit, 3.0)))


def test_a_version_range_that_includes_the_catalog_version_holds_when_the_prose_states_none():
    newest = versions("vllm")[-1]
    facts = Facts.of(RunEvidence(engine="vllm"), "vllm", catalog("vllm", None), [])
    held = check(Condition(key="engine", value=f"vllm >={newest}"), facts)
    assert held.state == "held" and "version unknown" in held.detail
    # an old bug, fixed since: the run may still be that old, so it is unknown, not held or failed
    assert check(Condition(key="engine", value="vllm <0.5.0"), facts).state == "unknown"
    assert check(Condition(key="engine", value="sglang >=0.4"), facts).state == "failed"


def test_the_cut_keeps_the_closest_words_over_context_checks():
    """Seven context checks (each with more held conditions, so a higher match score) and
    one finding the run's words resemble: the cut at MAX_FROM_FINDINGS keeps the latter."""
    held = [Check(Condition(key="gpu", value="H100"), "held", "GPU H100"),
            Check(Condition(key="model family", value="qwen3"), "held", "model family qwen3")]
    context = [Match(finding(f"tx-ctx{i}", "quantization", f"context {i}"), list(held), closeness=0.8, score=3.0)
               for i in range(MAX_FROM_FINDINGS + 1)]
    words = Match(finding("tx-words", "eager-mode", "words"), [], text=TEXT_MIN + 0.1, score=1.0)
    chosen = select([*context, words])
    assert len(chosen) == MAX_FROM_FINDINGS
    assert chosen[0].finding.id == "tx-words"


def test_a_text_condition_matches_whole_words_only():
    # a finding's `text: "ViT"` fired inside "connectivity" and put a vision-encoder fix first on
    # an all-reduce case; the phrase must stand as words in the prose
    def state(prose: str) -> str:
        ev = RunEvidence(engine="sglang", text=[TextLine(text=prose, kind="prose")])
        return check(Condition(key="text", value='"ViT"'), Facts.of(ev, "sglang", None, [])).state
    assert state("custom all-reduce fails: no P2P connectivity between the two cards") == "failed"
    assert state("the ViT encoder takes 300 ms per image") == "held"
    assert state("vit-encoder time grows with the image size") == "held"


def test_the_prose_naming_a_fix_class_lifts_that_class_among_the_text_hits():
    from kb.match import NAMED_BONUS, classes_named
    ev = RunEvidence(engine="vllm", launch_argv=["vllm", "serve", "m", "--max-num-seqs", "8"],
                     text=[TextLine(text="fp8_e4m3 KV cache is 40% slower than fp16 at long context", kind="prose")])
    named = classes_named(ev)
    assert "kv-cache-dtype" in named
    assert "max-running-requests" not in named  # a flag in the launch is not a complaint about it
    near = Match(finding("kv", "kv-cache-dtype", "FP8 KV slow path"), [], text=TEXT_MIN - NAMED_BONUS + 0.05,
                 named=True)
    far = Match(finding("other", "prefix-caching", "prefix cache"), [], text=TEXT_MIN - NAMED_BONUS + 0.05)
    assert near.wording >= TEXT_MIN > far.wording
    assert [m.finding.id for m in select([far, near])] == ["kv"]


def test_each_prose_files_first_line_of_words_is_a_query_of_its_own():
    from kb.match import title_queries
    lines = [TextLine(text="# [Bug] FP4 KV cache decode collapses to 90 tok/s", kind="prose",
                      where={"path": "a.txt", "line": 1}),
             TextLine(text="On 4x B200 with Qwen3-32B the decode is slow.", kind="prose",
                      where={"path": "a.txt", "line": 3}),
             TextLine(text="Mean TTFT (ms): 12.3", kind="prose", where={"path": "b.txt", "line": 1}),
             TextLine(text="LoRA adapters make every request slower here", kind="prose",
                      where={"path": "b.txt", "line": 2})]
    facts = Facts.of(RunEvidence(engine="sglang", text=lines), "sglang", None, [])
    assert title_queries(facts) == ["[Bug] FP4 KV cache decode collapses to 90 tok/s".lstrip("[ "),
                                    "LoRA adapters make every request slower here"]


def test_tp2_over_pcie_with_the_link_unread_is_a_check_unless_the_prose_asks_about_it(tmp_path):
    launch = tmp_path / "launch.txt"
    launch.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2\n")

    def pcie(*files):
        dx = diagnose(read_run(list(files), gpu="2x L40S", engine="vllm"), [])
        return next((r.basis for r in dx.recommendations if r.fix_class == "pcie-topology"), None)
    assert pcie(launch) == "context"  # two PCIe GPUs are a setup fact, not a symptom
    prose = tmp_path / "notes.txt"
    prose.write_text("Decode tops out at 45 tok/s on our two cards: no NVLink, and P2P is off over PCIe.\n")
    assert pcie(launch, prose) == "text"  # the user names the part: the check answers their words


def test_a_flag_the_prose_says_the_server_runs_with_counts_as_set():
    # "with --reasoning-parser gemma4" in a pasted issue: a finding whose fix is to set a reasoning
    # parser must not be proposed to someone who wrote they already use one
    def state(prose: str) -> tuple[str, str]:
        ev = RunEvidence(engine="vllm", text=[TextLine(text=prose, kind="prose")])
        c = check(Condition(key="setting", value="reasoning-parser absent"),
                  Facts.of(ev, "vllm", catalog("vllm", "0.19.1"), []))
        return c.state, c.detail
    assert state("Serving on vLLM 0.19 with --reasoning-parser gemma4 for an agent; reasoning leaks") == (
        "failed", "--reasoning-parser set to gemma4")
    assert state("Serving on vLLM 0.19 for an agent; the reasoning leaks into content")[0] == "unknown"
    # an engine message or a question naming the flag is not how the server runs
    assert state('"auto" tool choice requires --reasoning-parser to be set')[0] == "unknown"
    assert state("Should I add --reasoning-parser qwen3 here?")[0] == "unknown"
