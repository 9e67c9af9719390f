"""Question understanding (kb.textnorm.understand_query): names with digits survive
whole, quantities become meaning, shorthand and common typos are understood."""

import pytest
from whoosh.analysis import StemmingAnalyzer

from kb.textnorm import concepts, understand_query


def words(question: str) -> list[str]:
    """The analysed search words kb sends to the index for a question."""
    return [t.text for t in StemmingAnalyzer()(understand_query(question))]


@pytest.mark.parametrize("name, expected", [
    ("A100", ["a100"]),
    ("H200", ["h200"]),
    ("MI300X", ["mi300x"]),
    ("sm120", ["sm120"]),
    ("TP8", ["tp8"]),
    ("fp8_w8a8", ["fp8_w8a8"]),
    ("Qwen3-235B-A22B", ["qwen3", "235b", "a22b"]),
    ("GLM-5", ["glm"]),
    ("DeepSeek-R1", ["deepseek", "r1"]),
    ("Mixtral-8x7B", ["mixtral", "8x7b"]),
    ("E=8,N=2048", ["2048"]),
])
def test_identifiers_with_digits_survive(name, expected):
    assert name in understand_query(f"slow decode on {name} with sglang")
    got = words(f"slow decode on {name} with sglang")  # (the analyser drops one-character words)
    for w in expected:
        assert w in got, (name, got)


def test_bare_number_without_unit_is_kept():
    assert "error 3" in understand_query("cuInit error 3 on rtx pro 6000")
    assert "6000" in words("cuInit error 3 on rtx pro 6000")


@pytest.mark.parametrize("question", ["why does tput plateau at 128 conc", "806 tok/s @ 128 conc",
                                      "throughput flat at c=256", "thruput stuck past 64 concurent users"])
def test_load_level_becomes_concurrency_and_its_number_is_dropped(question):
    got = words(question)
    assert "concurr" in got, got  # the stem of "concurrency"
    for n in ("128", "256", "64"):
        assert n not in got


@pytest.mark.parametrize("question", ["single stream decode only 11 tok/s", "~40 tok/s at bs=1"])
def test_low_tokens_per_second_alone_is_a_slow_single_stream(question):
    q = understand_query(question)
    assert "singlestream" in q.split() and "slow" in q.split()
    assert "11" not in words(question) and "40" not in words(question)


def test_tokens_per_second_under_load_is_not_single_stream():
    assert "singlestream" not in understand_query("40 tok/s per user at 128 concurrency")


def test_big_numbers_with_separators_and_k():
    q = understand_query("only 5,816 tok/s, expected 2k tok/s")
    assert "5,816" not in q and "816" not in q and "2k" not in q
    assert "throughput" in q


@pytest.mark.parametrize("typo, concept", [
    ("conc", "concurrency"), ("concurency", "concurrency"), ("concurent", "concurrency"),
    ("concurrancy", "concurrency"), ("thruput", "throughput"), ("tput", "throughput"),
    ("throughtput", "throughput"), ("thoughput", "throughput"),
])
def test_abbreviations_and_typos_map_to_concepts(typo, concept):
    assert concept in concepts(understand_query(f"low {typo} on 8 gpus"))


def test_shorthand_is_spelled_out_and_kept():
    q = understand_query("attn backend at 20k ctx")
    assert "attn" in q and "attention" in q and "ctx" in q and "context" in q


def test_quantities_in_percent_ms_and_bandwidth_lose_their_number():
    got = words("p2p bw ~53GB/s, TTFT 200 ms, 15% slower")
    assert "53" not in got and "200" not in got and "15" not in got
    assert "ttft" in got and "bandwidth" in got


def test_plain_question_is_unchanged_apart_from_concepts():
    q = "why does throughput plateau"
    assert understand_query(q).startswith(q)
