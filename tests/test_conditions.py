"""The "Applies when" grammar (findings/FORMAT.md): conditions are read into the
finding, written back unchanged, and a bad one is an error naming file, line and
what was expected. Free-form notes get `log` conditions from the lines they quote."""

import pytest

from ingest.markdown import parse_findings, render
from kb import conditions
from kb.errors import InputError

HEAD = """# t

## Default MoE config on SM120

- **ID:** moe-sm120
- **Symptoms:** throughput flat
- **Engine:** sglang
- **Root cause:** untuned kernels
- **Fix:** tune
- **Fix classes:** moe-kernel-config
- **Confidence:** medium
- **Sources:** https://example.org/a
- **Measured on:** sglang 0.5.8; default changed in 0.5.10
- **Applies when:**
"""


def read(conds: str):
    return parse_findings(HEAD + conds, "f.md")[0]


def test_conditions_and_measured_on_are_read():
    f = read('  - engine: sglang >=0.5.0,<0.5.10\n  - gpu count: >=4\n  - log: "Using default MoE kernel config"\n'
             '  - setting: max-running-requests <256\n')
    assert [(c.key, c.value, c.line) for c in f.applies_when] == [
        ("engine", "sglang >=0.5.0,<0.5.10", 15), ("gpu count", ">=4", 16),
        ("log", '"Using default MoE kernel config"', 17), ("setting", "max-running-requests <256", 18)]
    assert f.measured_on == "sglang 0.5.8; default changed in 0.5.10"
    assert not any(c.inferred for c in f.applies_when)
    p = conditions.parse("engine", "sglang >=0.5.0,<0.5.10")
    assert p.names == ("sglang",) and p.versions == (("sglang", ">=", "0.5.0"), ("sglang", "<", "0.5.10"))
    both = conditions.parse("engine", "vllm >=0.10.2, sglang >=0.5.8")
    assert both.names == ("vllm", "sglang") and both.versions == (("vllm", ">=", "0.10.2"), ("sglang", ">=", "0.5.8"))
    assert conditions.parse("params", "<30B").compare == (("<", 30.0),)
    s = conditions.parse("setting", "attention-backend = triton")
    assert (s.setting, s.op, s.operand) == ("attention-backend", "=", "triton")


def test_conditions_round_trip_through_render():
    f = read('  - model: moe, mla\n  - log regex: `KV cache pool is full\\. Retract`\n  - text: "bs32 collapses"\n')
    again = parse_findings("# t\n\n" + render(f), "f.md")[0]
    assert [(c.key, c.value) for c in again.applies_when] == [(c.key, c.value) for c in f.applies_when]
    assert again.measured_on == f.measured_on


@pytest.mark.parametrize("cond, expected", [
    ("  - engine: sglong >=0.5\n", "expected sglang, vllm or trtllm"),
    ("  - gpu count: lots\n", "expected a number or comparisons"),
    ("  - params: >=big\n", "params in billions"),
    ("  - model: moe, sparse\n", "expected traits among"),
    ("  - log: Using default MoE kernel config\n", "expected a text in double quotes"),
    ("  - log regex: `KV cache (`\n", "not a valid regular expression"),
    ("  - setting: max-running-requests maybe\n", "expected present, absent, a comparison"),
    ("  - setting: max-running-requests < many\n", "needs a number"),
    ("  - colour: blue\n", "unknown condition key 'colour'"),
    ("  - no colon here\n", "expected a condition 'key: value'"),
])
def test_bad_condition_names_file_line_and_expected(cond, expected):
    with pytest.raises(InputError) as e:
        read("  - engine: sglang\n" + cond)
    assert e.value.path == "f.md" and e.value.line == 16
    assert expected in e.value.message and "Applies when" in e.value.message


def test_inline_value_instead_of_nested_bullets_is_an_error():
    with pytest.raises(InputError) as e:
        parse_findings(HEAD.replace("- **Applies when:**", "- **Applies when:** engine sglang"), "f.md")
    assert e.value.line == 14 and "nested bullets" in e.value.message


def test_freeform_note_quotes_become_log_conditions():
    text = """# Notes

## Scheduler stalls on 0.9

After the upgrade the server printed this every few seconds:

```
[2026-03-01 10:00:01 TP0] WARNING scheduler.py:88: Detected a frozen decode loop, falling back to synchronous mode
```

Fixed by `python -m sglang.launch_server --model-path m --disable-overlap-schedule`, throughput 800 -> 1400 tok/s.
"""
    f = next(x for x in parse_findings(text, "notes.md") if "Scheduler" in x.title)
    logs = [c for c in f.applies_when if c.key in ("log", "log regex")]
    assert logs and logs[0].inferred
    p = conditions.parse(logs[0].key, logs[0].value)
    # the time, level and process prefix are gone; the line number may differ in another run
    assert p.regex.search("[2026-04-11 08:00:00 TP3] WARNING scheduler.py:91: Detected a frozen decode loop, "
                          "falling back to synchronous mode")
    assert not p.regex.search("WARNING scheduler.py:91: Detected a slow decode loop")


def test_inferred_conditions_from_context_and_quoted_symptoms():
    f = read("  - gpu count: >=4\n").model_copy(update={
        "symptoms": ['server log prints "Using default MoE kernel config for E=257"'],
        "context": read("  - gpu count: >=4\n").context.model_copy(update={"experts": 256})})
    inferred = [(c.key, c.value) for c in conditions.infer(f)]
    assert ("engine", "sglang") in inferred and ("model", "moe") in inferred
    assert ("log regex", r"`Using\ default\ MoE\ kernel\ config\ for\ E=\d+`") in inferred


def test_measured_on_a_moe_model_binds_only_the_experts_own_fixes():
    # an FP4 KV-cache finding measured on DeepSeek was excluded for dense Qwen3-32B by an inferred
    # "model: moe"; only a fix to the experts' path (kernel configs, MoE backends, EP) needs experts
    moe = read("  - gpu count: >=4\n")
    moe = moe.model_copy(update={"context": moe.context.model_copy(update={"experts": 256})})
    assert ("model", "moe") in [(c.key, c.value) for c in conditions.infer(moe)]
    kv = moe.model_copy(update={"fix_classes": ["kv-cache-dtype", "kv-cache-capacity"]})
    assert "model" not in [c.key for c in conditions.infer(kv)]
