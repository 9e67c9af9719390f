"""The fast log reader (ingest/logscan.py) gives exactly what the line-by-line reader
gave (tests/reference_read_lines.py, kept verbatim): every sample log, a mixed log long
enough for the down-sampler to skip lines, the fuzz corpus, and the awkward line ends."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from ingest import logscan, run
from tests.reference_read_lines import read_lines_reference

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "data" / "samples"
LOGS = sorted(SAMPLES.glob("*_logs/*.log"))


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


log_parse = _module("log_parse")
fuzz = sys.modules.get("kb_fuzz") or _module("fuzz")


def dump(result: tuple[list, list[str]]) -> tuple[list, list[str]]:
    """The parsers' records and kinds. The lines kept as text evidence (ingest/textevidence.py,
    for findings' log conditions) and the benchmark commands found as text (BenchCommandText,
    ingest/run.py) came after the reference reader and are left out here; a prose file's are
    its only records, so its kind "text" is left out with them."""
    from kb.evidence import BenchCommandText, TextLine

    records, kinds = result
    return ([r.model_dump() for r in records if not isinstance(r, (TextLine, BenchCommandText))],
            [k for k in kinds if k != "text"])


def assert_same(path: Path) -> tuple[list, list[str]]:
    new = dump(run._read_lines(path))
    assert new == dump(read_lines_reference(path)), path.name
    return new


def test_sample_dirs_hold_logs():
    assert len(LOGS) >= 40


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_sample_log_reads_the_same(path):
    records, kinds = assert_same(path)
    assert kinds  # every sample is recognised as something


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("mixed") / "server.log"
    log_parse.generate_mixed(p, 3)
    return p


def test_mixed_log_reads_the_same_and_mostly_fast(mixed, monkeypatch):
    fed = []
    real = run._line_parsers

    def counting(path):
        parsers = real(path)
        for p in parsers:
            if p.kind == "sglang-log":
                orig = p.feed
                p.feed = lambda n, line, orig=orig: (fed.append(n), orig(n, line))
        return parsers

    monkeypatch.setattr(run, "_line_parsers", counting)
    records, _ = assert_same(mixed)
    traces = [r for r in records if r.get("engine") in ("sglang", "vllm")]
    assert {t["engine"] for t in traces} == {"sglang", "vllm"}
    lines = mixed.read_bytes().count(b"\n")
    for t in traces:
        assert t["stats"]["samples"] > 4000 and t["stats"]["sample_stride"] > 1  # the sampler skipped lines
        assert t["lines"] == lines
    assert len(fed) < lines / 4  # most lines never reach a per-line parser (the old reader fed all)


def test_line_numbers_of_kept_samples_point_at_their_lines(mixed):
    text = mixed.read_bytes().split(b"\n")
    for t in run._read_lines(mixed)[0]:
        if getattr(t, "engine", None) == "sglang":
            assert t.samples and all(b" batch" in text[s.line - 1] for s in t.samples)


LINE_ENDS = {
    "crlf": lambda u: u.replace(b"\n", b"\r\n"),
    "lone-cr": lambda u: u.replace(b"\n", b"\r", 50),
    "no-final-newline": lambda u: u.rstrip(b"\n"),
    "bad-utf8": lambda u: u.replace(b"Decode batch", b"Decode\xff batch", 3).replace(b"INFO", b"\xe2\x82INFO", 5),
    "blank-lines": lambda u: u.replace(b"\n", b"\n\n", 200),
}


@pytest.mark.parametrize("name", sorted(LINE_ENDS))
def test_awkward_line_ends_read_the_same(tmp_path, name):
    unit = log_parse.mixed_unit(lines=6000, seed=3)
    p = tmp_path / "log"
    p.write_bytes(LINE_ENDS[name](unit * 2))
    assert_same(p)


@pytest.mark.parametrize("cr", [False, True])
def test_overlong_lines_are_cut_as_before(tmp_path, cr):
    unit = log_parse.mixed_unit(lines=3000, seed=5)
    long = b"Decode batch, x: 1, " * (5 * 2**20 // 20)  # past logscan.OVERLONG without a \n
    if cr:
        long = long[: 3 * 2**20] + b"\r" + long
    p = tmp_path / "log"
    p.write_bytes(unit + long + b"\n" + unit + long + b"\r\n" + unit + long)
    assert len(long) > logscan.OVERLONG
    assert_same(p)


def test_every_stats_marker_orders_the_fast_rows():
    for m in run.STATS_MARKERS:
        assert logscan._ORDERED.search(m.encode())


def test_damaged_long_logs_read_the_same(tmp_path, monkeypatch):
    """Seeded damage (benchmarks/fuzz.py mutate_bytes) to every sample log, repeated past
    the sampler's first strides so the fast rows are folded, not only fed. The sampler's cap
    is lowered from 2,000 to 100 kept rows: the same stride doublings then happen within a
    tenth of the lines (at the full cap this test took ~170 s of the suite's 15 minutes)."""
    from ingest.serverlog import LineSampler

    monkeypatch.setattr(LineSampler.__init__, "__defaults__", (100,))
    assert LineSampler().cap == 100
    rnd = random.Random(16)
    for i, path in enumerate(LOGS):
        data = fuzz.mutate_bytes(path.read_bytes(), rnd)
        p = tmp_path / f"{i}.log"
        p.write_bytes(data * max(1, 400 // max(1, data.count(b"\n"))) + log_parse.mixed_unit(lines=1000, seed=i))
        assert_same(p)
        lines = p.read_bytes().splitlines()
        sglang = sum(b"Decode batch" in x or b"Prefill batch" in x for x in lines)
        vllm = sum(b"Avg prompt throughput" in x for x in lines)
        assert sglang > 4 * 100 and vllm > 100, (p.name, sglang, vllm)  # each engine's sampler doubles its stride


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(fuzz.file_bytes())
def test_fuzz_corpus_reads_the_same(data):
    d = fuzz._tmpdir()
    p = d / "same.log"
    p.write_bytes(data)
    assert dump(run._read_lines(p)) == dump(read_lines_reference(p))


# ---------------------------------------------------------------- the shape path (logscan._Shapes)
# Lines of one shape (digits written as 0) share one classification; these inputs aim at
# what that could get wrong: digit values the row pattern reads literally, shapes that
# interleave in one block, the sampler's kept rows at block edges, caps reached inside a block.

def _shape_path_blocks(monkeypatch) -> list[bool]:
    taken = []
    real = logscan._Shapes.block
    monkeypatch.setattr(logscan._Shapes, "block", lambda self, data: taken.append(real(self, data)) or taken[-1])
    return taken


def test_random_line_orders_read_the_same(tmp_path, monkeypatch):
    taken = _shape_path_blocks(monkeypatch)
    lines = log_parse.mixed_unit(lines=20_000, seed=7).splitlines(keepends=True)
    for seed in range(3):
        random.Random(seed).shuffle(lines)
        p = tmp_path / f"{seed}.log"
        p.write_bytes(b"".join(lines) * 3)
        assert_same(p)
    assert taken and all(taken)  # the shuffled mixed log is all read by the shape path


ACCESS = b'[2025-11-18 22:46:09] INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'


@pytest.mark.parametrize("bad", [
    b'[2025-11-18 22:46:09] INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server '
    b'Error\n',
    b'[2025-11-18 22:46:09] INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 500 OK\n',  # 200's shape
    b'[2025-11-18 22:46:09] INFO:     127.0.0.1:54321 - "POST /v9/chat/completions HTTP/1.1" 200 OK\n',
    b'[2025-11-18 22:46:09] INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/2.0" 200 OK\n',
])
def test_access_lines_with_the_shape_of_a_good_one_but_other_digits(tmp_path, bad):
    unit = log_parse.mixed_unit(lines=4000, seed=11)
    p = tmp_path / "log"
    p.write_bytes((unit + ACCESS * 50 + bad + ACCESS * 50) * 4)
    assert_same(p)


def test_digit_widths_and_graph_flags_interleave(tmp_path, monkeypatch):
    """Decode lines of one release with every width of each number, cuda graph True and
    False, several ranks and accept lengths, shuffled: many shapes of one layout in a block."""
    taken = _shape_path_blocks(monkeypatch)
    rnd = random.Random(5)
    out = []
    for _ in range(30_000):
        run = rnd.choice([0, 7, 42, 512, 1024])
        out.append(
            f"[2025-11-18 22:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d} DP{rnd.randint(0, 3)} "
            f"TP{rnd.randint(0, 15)}] "
            f"Decode batch, #running-req: {run}, #token: {rnd.randint(0, 999999)}, token usage: {rnd.random():.2f}, "
            f"accept len: {rnd.uniform(1, 4):.{rnd.randint(1, 3)}f}, cuda graph: {rnd.choice(['True', 'False'])}, "
            f"gen throughput (token/s): {rnd.uniform(0, 9999):.{rnd.randint(1, 2)}f}, #queue-req: "
            f"{rnd.choice([0, 0, 3, 77])}\n")
        if rnd.random() < 0.2:
            out.append(f"[2025-11-18 22:46:09 TP0] Prefill batch, #new-seq: 1, #new-token: {rnd.randint(1, 9000)}, "
                       f"#cached-token: {rnd.randint(0, 9000)}, token usage: 0.{rnd.randint(0, 99):02d}, "
                       f"#running-req: {run}, #queue-req: 0, \n")
    p = tmp_path / "log"
    p.write_text("".join(out))
    (records, _) = assert_same(p)
    trace = next(r for r in records if r.get("engine") == "sglang")
    assert trace["stats"]["cuda_graph_false"] > 0 and len(trace["stats"]["ranks"]) > 30
    assert any(taken)


def test_ranks_past_the_cap_read_the_same(tmp_path):
    """More distinct ranks than serverlog.MAX_RANKS: which are kept depends on their order."""
    lines = [f"[2025-11-18 22:46:09 TP{i}] Decode batch, #running-req: 1, #token: 5, token usage: 0.01, "
             f"gen throughput (token/s): 1.{i % 10}, #queue-req: 0\n" for i in range(600)]
    random.Random(2).shuffle(lines)
    p = tmp_path / "log"
    p.write_text("".join(lines) * 2)
    assert_same(p)


def test_shapes_past_the_limit_read_the_same(tmp_path, monkeypatch):
    """More layouts than the shape path remembers (a damaged log can invent rank names):
    new ones take the row path, with the same results."""
    monkeypatch.setattr(logscan, "MAX_SHAPES", 8)
    unit = log_parse.mixed_unit(lines=20_000, seed=1)
    p = tmp_path / "log"
    p.write_bytes(unit * 2)
    assert_same(p)


def test_v1_preemption_lines_fold_once_their_events_are_only_counted(tmp_path, monkeypatch):
    """vLLM V1 stats lines with `Preemptions: N` (N preempt events each; the 0.33.0 sample's
    lines), mixed with V0 preemption warnings and errors whose events come first: the parser
    reads them while it still keeps preempt events in full, the shape path folds the rest."""
    v1 = [ln for ln in (SAMPLES / "vllm_logs" / "src-vllm-0.33.0_v1_glm-4.5-air-fp8_tp2_ep.log").read_bytes()
          .splitlines(keepends=True) if b"Avg prompt throughput" in ln]
    warn = next(ln for ln in (SAMPLES / "vllm_logs" / "src-vllm-0.6.4.post1_v0_mixtral-8x7b_tp4_l40s.log")
                .read_bytes().splitlines(keepends=True) if b"is preempted by PreemptionMode" in ln)
    rnd = random.Random(9)
    out = [rnd.choice(v1) if rnd.random() < 0.97 else warn for _ in range(60_000)]
    p = tmp_path / "log"
    p.write_bytes(b"".join(out))
    read = []
    real = logscan._State.text_lines
    monkeypatch.setattr(logscan._State, "text_lines", lambda self, data: (read.append(data), real(self, data))[1])
    records, _ = assert_same(p)
    trace = next(r for r in records if r.get("engine") == "vllm")
    preempts = sum(int(ln.split(b"Preemptions: ")[1].split(b",")[0]) for ln in out if b"Preemptions: " in ln)
    assert preempts > 1000
    assert trace["stats"]["events"]["preempt"] == preempts + out.count(warn)
    assert trace["stats"]["extra_max"]["Preemptions"] == max(
        float(ln.split(b"Preemptions: ")[1].split(b",")[0]) for ln in out if b"Preemptions: " in ln)
    with_field = sum(b"Preemptions: " in ln for ln in out)
    assert sum(b"Preemptions: " in d for d in read) < with_field / 20  # the rest folded, not read line by line


# ---------------------------------------------------------------- two processes (logscan._parallel)
# Forced on small inputs (PARALLEL_MIN 0): this process reads up to a line start near SPLIT of
# the file, a worker plans the blocks after it, this process applies the plans in file order.

def _parallel(monkeypatch) -> dict:
    """Every read from here on by two processes; counts of the worker's plans applied here."""
    monkeypatch.setattr(logscan, "PARALLEL_MIN", 0)
    seen = {"replays": 0, "applied": 0, "workers": []}
    real_apply, real_replay, real_popen = logscan._Shapes.apply, logscan._replay, subprocess.Popen

    def apply(self, plan, lines_of):
        ok = real_apply(self, plan, lines_of)
        seen["applied"] += ok and isinstance(lines_of, logscan.partial)  # a plan from the worker
        return ok

    def replay(*a):
        seen["replays"] += 1
        return real_replay(*a)

    def popen(*a, **k):
        seen["workers"].append(real_popen(*a, **k))
        return seen["workers"][-1]

    monkeypatch.setattr(logscan._Shapes, "apply", apply)
    monkeypatch.setattr(logscan, "_replay", replay)
    monkeypatch.setattr(subprocess, "Popen", popen)  # (logscan imports it when it starts the worker)
    return seen


def test_parallel_every_sample_log_reads_the_same(monkeypatch):
    seen = _parallel(monkeypatch)
    split = 0
    for path in LOGS:
        assert_same(path)
        with open(path, "rb") as fh:
            split += logscan._split_point(fh, 0) is not None  # (not: no line end after SPLIT of it)
    assert seen["replays"] == split > 30  # every worker ended well and its plans were applied
    assert all(w.returncode == 0 for w in seen["workers"])


def test_parallel_mixed_log_reads_the_same_with_samples_kept_on_both_sides(mixed, monkeypatch):
    seen = _parallel(monkeypatch)
    records, _ = assert_same(mixed)
    assert seen["applied"] >= 3  # the worker's blocks (3 MB from 45%: ~3 blocks of 512 KiB) were its plans
    with open(mixed, "rb") as fh:
        mid = logscan._split_point(fh, 0)
    mid_line = mixed.read_bytes()[:mid].count(b"\n")
    for t in (r for r in records if r.get("engine") in ("sglang", "vllm")):
        lines = [s["line"] for s in t["samples"]]
        assert min(lines) <= mid_line < max(lines)  # kept samples from both processes' parts


@pytest.mark.parametrize("name", sorted(LINE_ENDS))
def test_parallel_awkward_line_ends_read_the_same(tmp_path, monkeypatch, name):
    seen = _parallel(monkeypatch)
    unit = log_parse.mixed_unit(lines=6000, seed=3)
    p = tmp_path / "log"
    p.write_bytes(LINE_ENDS[name](unit * 2))
    assert_same(p)
    assert seen["replays"] == 1


@pytest.mark.parametrize("cr", [False, True])
def test_parallel_overlong_lines_read_the_same(tmp_path, monkeypatch, cr):
    _parallel(monkeypatch)
    unit = log_parse.mixed_unit(lines=3000, seed=5)
    long = b"Decode batch, x: 1, " * (5 * 2**20 // 20)
    if cr:
        long = long[: 3 * 2**20] + b"\r" + long
    p = tmp_path / "log"
    p.write_bytes(unit + long + b"\n" + unit + long + b"\r\n" + unit + long)
    assert_same(p)


def test_parallel_shuffled_ranks_caps_and_preemptions_read_the_same(tmp_path, monkeypatch):
    """Blocks whose plans this process must decline: ranks past the cap, V1 Preemptions
    lines while preempt events are still kept in full; and shuffled mixed lines."""
    seen = _parallel(monkeypatch)
    lines = log_parse.mixed_unit(lines=20_000, seed=7).splitlines(keepends=True)
    random.Random(1).shuffle(lines)
    ranks = [f"[2025-11-18 22:46:09 TP{i}] Decode batch, #running-req: 1, #token: 5, token usage: 0.01, "
             f"gen throughput (token/s): 1.{i % 10}, #queue-req: 0\n".encode() for i in range(600)]
    v1 = [ln for ln in (SAMPLES / "vllm_logs" / "src-vllm-0.33.0_v1_glm-4.5-air-fp8_tp2_ep.log").read_bytes()
          .splitlines(keepends=True) if b"Preemptions: " in ln]
    for i, data in enumerate([b"".join(lines) * 3, b"".join(lines) + b"".join(ranks) * 2,
                              b"".join(lines) + b"".join(v1) * 20 + b"".join(lines)]):
        p = tmp_path / f"{i}.log"
        p.write_bytes(data)
        assert_same(p)
    assert seen["replays"] == 3 and seen["applied"] > 0


def test_parallel_damaged_logs_read_the_same(tmp_path, monkeypatch):
    from ingest.serverlog import LineSampler

    _parallel(monkeypatch)
    monkeypatch.setattr(LineSampler.__init__, "__defaults__", (100,))
    rnd = random.Random(61)
    for i, path in enumerate(LOGS):
        data = fuzz.mutate_bytes(path.read_bytes(), rnd)
        p = tmp_path / f"{i}.log"
        p.write_bytes(data * max(1, 400 // max(1, data.count(b"\n"))) + log_parse.mixed_unit(lines=1000, seed=i))
        assert_same(p)


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(fuzz.file_bytes())
def test_parallel_fuzz_corpus_reads_the_same(data):
    d = fuzz._tmpdir()
    p = d / "parallel.log"
    p.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logscan, "PARALLEL_MIN", 0)
        new = dump(run._read_lines(p))
    assert new == dump(read_lines_reference(p))


def test_parallel_worker_that_fails_leaves_its_part_to_this_process(mixed, monkeypatch):
    seen = _parallel(monkeypatch)
    monkeypatch.setattr(logscan, "_WORKER", "import sys; sys.exit(3)")
    assert_same(mixed)
    assert seen["workers"][0].returncode == 3 and seen["applied"] == 0


def test_parallel_worker_stops_when_this_process_fails(mixed, monkeypatch, tmp_path):
    seen = _parallel(monkeypatch)
    made = []
    real_tmp = tempfile.TemporaryDirectory
    monkeypatch.setattr(tempfile, "TemporaryDirectory", lambda **k: made.append(real_tmp(**k)) or made[-1])
    real = run._line_parsers

    def failing(path):
        parsers = real(path)
        for p in parsers:
            if p.kind == "sglang-log":
                def feed(n, line, orig=p.feed):
                    if n > 5000:
                        raise KeyboardInterrupt  # as Ctrl-C in the middle of this process's part
                    orig(n, line)
                p.feed = feed
        return parsers

    monkeypatch.setattr(run, "_line_parsers", failing)
    with pytest.raises(KeyboardInterrupt):
        run._read_lines(mixed)
    (worker,) = seen["workers"]
    assert worker.returncode is not None  # ended and reaped: no orphan
    assert made and not Path(made[0].name).exists()  # its plans removed


def test_plan_reader_refuses_any_other_class():
    # the worker's records are read back with an unpickler that builds only the plan class
    # and Counter: a record naming anything else (os.system, say) is refused, not run
    import io
    import pickle
    from collections import Counter

    plan = logscan._Plan(3, None, [], fold={"dec": None, "runs": Counter({4: 2})})
    back = logscan._PlanReader(io.BytesIO(pickle.dumps(("block", 0, 10, plan)))).load()
    assert back[3].n == 3 and back[3].fold["runs"] == Counter({4: 2})
    hostile = b"cos\nsystem\n(S'touch /tmp/kb-pwned'\ntR."  # protocol 0: os.system('touch …')
    with pytest.raises(pickle.UnpicklingError, match="os.system"):
        logscan._PlanReader(io.BytesIO(hostile)).load()


def test_kept_rows_lines_read_in_pieces_are_the_blocks_own(tmp_path):
    """The worker's block lines this process reads back for kept rows (logscan._lines, 64 KiB
    at a time): the same bytes as the block's own split, wherever the pieces cut a line."""
    rnd = random.Random(7)
    block = b"".join(bytes(rnd.choice(b"ab ") for _ in range(rnd.randint(0, 40_000))) + b"\n" for _ in range(40))
    block += b"".join(bytes(rnd.choice(b"ab ") for _ in range(rnd.randint(0, 300))) + b"\n" for _ in range(3000))
    path = tmp_path / "block.log"
    path.write_bytes(b"head line\n" + block + b"tail line\n")
    lines = block.split(b"\n")
    with open(path, "rb") as fh:
        for _ in range(100):
            wanted = set(rnd.sample(range(len(lines) - 1), rnd.randint(1, 25)))
            assert logscan._lines(fh.fileno(), 10, len(block), wanted) == {i: lines[i] for i in wanted}
        assert logscan._lines(fh.fileno(), 10, len(block), {len(lines) - 2}) == {len(lines) - 2: lines[-2]}
