"""What kb writes into a printed launch command must parse: a user's one-dash typo of a
long flag is repaired (and said), and a finding that names a switch both ways sets neither.
Both seen on a real launch line: `vllm serve $MODEL -pp 4 ... -no-async-scheduling`
(vLLM PR 32618's reproduction), which vLLM 0.32's parser reads as `-n o-async-scheduling`."""

from __future__ import annotations

from ingest.run import read_run
from kb import launchcmd
from kb.diagnose import diagnose
from kb.fixflags import for_version
from kb.flags import catalog
from kb.launchcmd import repair_dashes
from kb.records import Finding

VLLM = catalog("vllm", "0.32.0")


def test_one_dash_long_flag_is_written_with_two_and_said():
    argv = ["vllm", "serve", "m", "-pp", "4", "-no-async-scheduling", "--max-num-seqs", "128"]
    fixed, notes = repair_dashes(argv, VLLM)
    assert fixed == ["vllm", "serve", "m", "-pp", "4", "--no-async-scheduling", "--max-num-seqs", "128"]
    assert len(notes) == 1 and "-n o-async-scheduling" in notes[0]


def test_real_short_spellings_and_values_are_left_alone():
    argv = ["vllm", "serve", "m", "-tp", "2", "-pp", "2", "--max-model-len", "-1"]
    assert repair_dashes(argv, VLLM) == (argv, [])


def test_a_fix_naming_a_switch_both_ways_sets_neither():
    f = Finding(id="fx-both", title="async scheduling", confidence="low", fix_classes=["async-scheduling"],
                fix="use `--async-scheduling`; on 0.11.0 with penalties use `--no-async-scheduling` "
                    "and `--max-num-seqs 64`")
    changes, notes = for_version(f, "vllm", VLLM)
    assert [c[0] for c in changes] == ["--max-num-seqs"]
    assert any("--async-scheduling and --no-async-scheduling" in n for n in notes)


def test_diagnose_builds_on_the_repaired_command_and_says_so(tmp_path):
    launch = tmp_path / "launch.txt"
    launch.write_text("vllm serve Qwen/Qwen3-30B-A3B -pp 4 --port 9256 --max-num-seqs 128 -no-async-scheduling\n")
    ev = read_run([launch])
    base = launchcmd.current(ev, "vllm", VLLM)  # what every printed command is built on
    assert "--no-async-scheduling" in base.argv and "-no-async-scheduling" not in base.argv
    assert "256" in launchcmd.apply(base.argv, [("--max-num-seqs", 256, [])])
    dx = diagnose(ev, [])
    assert any("-no-async-scheduling in your command" in w for w in dx.warnings)
