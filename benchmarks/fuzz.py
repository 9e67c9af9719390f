"""Fuzzing every ingest entry point: hypothesis-generated input and mutations of the
real samples in tests/data (truncation, byte flips, shuffled lines, huge lines,
non-UTF-8, empty, binary, splices).

    python benchmarks/fuzz.py [--cases 10000] [--only NAME ...] [--seed N]

The only exceptions allowed out of a parser are kb.errors.KbError subclasses that
name the file (and, for a line parser, the line). Anything else is an "escape".
Prints a table (parser, cases, escapes, seconds) and the first escapes found;
exits 1 when any escaped. tests/test_fuzz.py runs the same targets on a small budget.
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hypothesis import (  # noqa: E402
    HealthCheck,
    Phase,
    given,
    settings,
    strategies as st,  # noqa: E402
)

from kb.errors import InputError, KbError  # noqa: E402

DATA = ROOT / "tests" / "data"
FAKE_PATH = "/fuzz/input-file.txt"

# ---------------------------------------------------------------- samples


@lru_cache(maxsize=None)
def sample_files() -> tuple[Path, ...]:
    files = [p for p in sorted(DATA.rglob("*")) if p.is_file() and p.stat().st_size < 2**20]
    return tuple(files)


@lru_cache(maxsize=None)
def sample_bytes() -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in sample_files())


@lru_cache(maxsize=None)
def text_samples() -> tuple[str, ...]:
    out = []
    for data in sample_bytes():
        if b"\x00" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not text.lstrip().startswith(("{", "[")):
            out.append(text)
    return tuple(out)


@lru_cache(maxsize=None)
def markdown_samples() -> tuple[str, ...]:
    files = sorted((ROOT / "findings").glob("*.md"))[:20] + sorted((DATA / "markdown").glob("*.md"))
    files += [p for p in sample_files() if p.suffix == ".md"]
    return tuple(p.read_text(encoding="utf-8") for p in files)


@lru_cache(maxsize=None)
def sample_lines() -> tuple[str, ...]:
    lines = {ln for t in text_samples() for ln in t.splitlines() if ln.strip()}
    return tuple(sorted(lines))


@lru_cache(maxsize=None)
def json_docs() -> tuple[Any, ...]:
    docs = []
    for p in sample_files():
        if p.suffix not in (".json", ".jsonl"):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        try:
            docs.append(json.loads(text))
        except ValueError:
            for line in text.splitlines():
                try:
                    docs.append(json.loads(line))
                except ValueError:
                    pass
    return tuple(docs)


@lru_cache(maxsize=None)
def config_docs() -> tuple[dict, ...]:
    return tuple(json.loads(p.read_text()) for p in sorted((DATA / "samples" / "model_configs").glob("*.json")))


def _keys(doc: Any, out: set[str], depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(doc, dict):
        for k, v in list(doc.items())[:200]:
            out.add(str(k))
            _keys(v, out, depth + 1)
    elif isinstance(doc, list):
        for v in doc[:5]:
            _keys(v, out, depth + 1)


@lru_cache(maxsize=None)
def known_keys() -> tuple[str, ...]:
    keys: set[str] = set()
    for d in json_docs():
        _keys(d, keys)
    return tuple(sorted(keys))


# ---------------------------------------------------------------- mutations

HOSTILE = ["\x00", "\ufeff", "\r", "\u2028", "\x1b[31m", "'", '"', "\\", "`", "$(", "${", "{", "}", "[", "]",
           "(", ")", "|", ",", ": ", "=", "nan", "inf", "-inf", "1e999", "9" * 5000, "-0", "0x1f", "\t"]


_DIGITS = re.compile(rb"\d+")


def mutate_bytes(data: bytes, rnd: random.Random) -> bytes:
    """One or a few random damages to a file's bytes."""
    # One draw from hypothesis seeds a plain Random for the rest: each call to hypothesis'
    # own Random is a recorded draw (~30 µs), and a 4 KB binary blob or a burst of byte
    # flips took thousands of them, which made generation, not parsing, the cost of a case.
    rnd = random.Random(rnd.getrandbits(64))
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        op = rnd.randrange(14)
        n = len(data)
        if op == 0 and n:  # truncation
            data = data[: rnd.randrange(n)]
        elif op == 1 and n:  # byte flips
            b = bytearray(data)
            for _ in range(rnd.randint(1, 16)):
                b[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
            data = bytes(b)
        elif op == 2:  # shuffled lines
            lines = data.split(b"\n")
            rnd.shuffle(lines)
            data = b"\n".join(lines)
        elif op == 3:  # a huge line
            piece = data[rnd.randrange(n): rnd.randrange(n) + 64] if n else b"x"
            piece = piece.replace(b"\n", b" ") or b"x"
            pos = rnd.randrange(n + 1)
            data = data[:pos] + piece * (rnd.randint(2_000, 40_000) // len(piece) + 1) + data[pos:]
        elif op == 4:  # non-UTF-8
            pos = rnd.randrange(n + 1)
            data = data[:pos] + rnd.choice([b"\xff\xfe", b"\xc3", b"\xe2\x82", b"\x80", b"\xed\xa0\x80"]) + data[pos:]
        elif op == 5:  # latin-1 / utf-16 re-encoding
            try:
                data = data.decode("utf-8").encode(rnd.choice(["latin-1", "utf-16", "cp1252"]), errors="replace")
            except UnicodeDecodeError:
                pass
        elif op == 6:  # empty, or whitespace only
            data = rnd.choice([b"", b"\n", b"   \n\t\n", b"\xef\xbb\xbf"])
        elif op == 7:  # binary
            data = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 4096)))
        elif op == 8 and n:  # duplicated or deleted lines
            lines = data.split(b"\n")
            i = rnd.randrange(len(lines))
            if rnd.random() < 0.5:
                lines[i:i] = [lines[i]] * rnd.randint(1, 200)
            else:
                del lines[i: i + rnd.randint(1, 50)]
            data = b"\n".join(lines)
        elif op == 9:  # a splice of another sample
            other = rnd.choice(sample_bytes())
            a = rnd.randrange(len(other) + 1)
            pos = rnd.randrange(n + 1)
            data = data[:pos] + other[a: a + rnd.randint(1, 4096)] + data[pos:]
        elif op == 10:  # hostile tokens
            pos = rnd.randrange(n + 1)
            data = data[:pos] + rnd.choice(HOSTILE).encode("utf-8", "surrogatepass") + data[pos:]
        elif op in (11, 12):  # numbers: huge, negative, fractional, exponent, NaN
            numbers = list(_DIGITS.finditer(data))
            for m in rnd.sample(numbers, min(len(numbers), rnd.randint(1, 8))):
                new = rnd.choice([b"9" * rnd.choice((20, 400, 4400, 6000)), b"-" + m.group(0), m.group(0) + b".5",
                                  b"1e999", b"nan", b"0", b"-1", b"1" + b"0" * 30])
                data = data[:m.start()] + new + data[m.end():] if len(new) == len(m.group(0)) else \
                    data.replace(m.group(0), new, 1)
        else:  # a NUL or control byte
            pos = rnd.randrange(n + 1)
            data = data[:pos] + bytes([rnd.choice((0, 1, 8, 12, 27, 127))]) + data[pos:]
    return data


def mutate_text(text: str, rnd: random.Random) -> str:
    return mutate_bytes(text.encode("utf-8"), rnd).decode("utf-8", errors=rnd.choice(["replace", "ignore"]))


def mutate_json(doc: Any, rnd: random.Random, values: list[Any]) -> Any:
    """Replace (or delete) a few random nodes of a decoded document with other JSON
    values. The containers along each path are copied, the rest is shared: the
    samples themselves are never changed."""
    for v in values or [None]:
        doc = _replace(doc, rnd, v)
    return doc


def _replace(node: Any, rnd: random.Random, value: Any) -> Any:
    if not isinstance(node, (dict, list)) or not node or rnd.random() >= 0.8:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    key = rnd.choice(list(copy)) if isinstance(copy, dict) else rnd.randrange(len(copy))
    if isinstance(copy, dict) and rnd.random() < 0.15:
        del copy[key]
    else:
        copy[key] = _replace(copy[key], rnd, value)
    return copy


# ---------------------------------------------------------------- strategies

_floats = st.floats(allow_nan=True, allow_infinity=True)
json_leaves = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70) | _floats
               | st.text(max_size=40) | st.sampled_from(["", "inf", "nan", "1,234.5", "12%", "sglang", "vllm",
                                                          "concurrent", "throughput", "ms", "s", "True"]))


@lru_cache(maxsize=None)
def json_values() -> st.SearchStrategy:
    keys = st.sampled_from(known_keys()) | st.text(max_size=12)
    return st.recursive(json_leaves, lambda children: st.lists(children, max_size=6)
                        | st.dictionaries(keys, children, max_size=8), max_leaves=40)


@lru_cache(maxsize=None)
def json_documents() -> st.SearchStrategy:
    mutated = st.builds(mutate_json, st.sampled_from(json_docs()), st.randoms(use_true_random=False),
                        st.lists(json_values(), max_size=4))
    return st.one_of(json_values(), mutated, mutated)


@lru_cache(maxsize=None)
def config_documents() -> st.SearchStrategy:
    keys = st.sampled_from(sorted({k for c in config_docs() for k in c} | {"text_config", "rope_scaling"}))
    value = st.one_of(json_leaves, json_leaves, st.lists(json_leaves, max_size=4),
                      st.dictionaries(keys, json_leaves, max_size=4))
    random_cfg = st.dictionaries(keys | st.text(max_size=10), value, max_size=20)
    mutated = st.builds(mutate_json, st.sampled_from(config_docs()), st.randoms(use_true_random=False),
                        st.lists(json_values(), min_size=1, max_size=4))
    quant_docs = [d for d in config_docs() if "quantization" in d or "producer" in d] \
        + [d["quantization_config"] for d in config_docs() if isinstance(d.get("quantization_config"), dict)]
    quant = st.none() | json_values() | st.builds(mutate_json, st.sampled_from(quant_docs),
                                                  st.randoms(use_true_random=False),
                                                  st.lists(json_values(), max_size=3))
    return st.tuples(st.one_of(random_cfg, mutated, mutated, mutated), quant)


@lru_cache(maxsize=None)
def texts(samples: tuple[str, ...]) -> st.SearchStrategy:
    mutated = st.builds(mutate_text, st.sampled_from(samples), st.randoms(use_true_random=False))
    lines = st.lists(st.sampled_from(sample_lines()) | st.text(max_size=200), max_size=30).map("\n".join)
    return st.one_of(st.text(), lines, mutated, mutated, mutated)


@lru_cache(maxsize=None)
def line_lists() -> st.SearchStrategy:
    mutated = st.builds(mutate_text, st.sampled_from(text_samples()), st.randoms(use_true_random=False)) \
        .map(lambda t: t.splitlines()[:1000])
    sample_line = st.sampled_from(sample_lines())
    damaged = st.builds(mutate_text, sample_line, st.randoms(use_true_random=False))
    mixed = st.lists(sample_line | damaged | st.text(max_size=300), max_size=60)
    return st.one_of(mixed, mutated, mutated)


@lru_cache(maxsize=None)
def file_bytes() -> st.SearchStrategy:
    mutated = st.builds(mutate_bytes, st.sampled_from(sample_bytes()), st.randoms(use_true_random=False))
    return st.one_of(st.binary(max_size=2048), st.text().map(lambda t: t.encode("utf-8", "surrogatepass")),
                     mutated, mutated, mutated, mutated)


@lru_cache(maxsize=None)
def launch_texts() -> st.SearchStrategy:
    cmds = [ln for ln in sample_lines() if "launch_server" in ln or " serve" in ln or "api_server" in ln]
    cmds += [t for t in text_samples() if "launch_server" in t or "vllm serve" in t][:20]
    mutated = st.builds(mutate_text, st.sampled_from(cmds), st.randoms(use_true_random=False))
    built = st.lists(st.sampled_from(["python -m sglang.launch_server", "vllm serve", "--tp", "8", "--model-path",
                                      "'a b'", '"', "'", "\\\n", "--api-key=x", "HF_TOKEN=hf_x", "|", ";", "#",
                                      "2>&1", "$(id)", "`id`", "--x=", "-", "--", "="]) | st.text(max_size=20),
                     max_size=30).map(" ".join)
    return st.one_of(st.text(), built, mutated, mutated)


# ---------------------------------------------------------------- targets


class Escape(Exception):
    """An exception that should not have left a parser."""


def check_error(e: BaseException, path: str, line: int | None = None) -> None:
    """Raise Escape unless `e` is a KbError naming `path` (and `line` when given)."""
    if not isinstance(e, KbError):
        raise Escape(f"{type(e).__name__}: {e}"[:500]) from e
    if path not in str(e):
        raise Escape(f"{type(e).__name__} does not name the file: {e}"[:500]) from e
    if line is not None and isinstance(e, InputError) and e.line is not None and e.line != line:
        raise Escape(f"InputError names line {e.line}, the line fed was {line}: {e}"[:500]) from e


MASKED: list[str] = []  # KbErrors made by a safety net (bench_common.guarded) from another exception


def _call(fn: Callable[[], Any], path: str, line: int | None = None) -> None:
    try:
        fn()
    except (Escape, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - that is the point
        check_error(e, path, line)
        if e.__cause__ is not None and not isinstance(e.__cause__, KbError):
            MASKED.append(f"{type(e.__cause__).__name__}: {e.__cause__}"[:200])


def _markdown(text: str) -> None:
    from ingest.markdown import parse_findings

    _call(lambda: parse_findings(text, FAKE_PATH), FAKE_PATH)


def _launch(text: str) -> None:
    from ingest.launch_command import parse_launch_command
    from kb.records import Where

    _call(lambda: parse_launch_command(text, Where(path=FAKE_PATH, line=1)), FAKE_PATH)


def _config(arg: tuple[Any, Any]) -> None:
    from ingest.hf_config import profile_from_config

    doc, quant = arg
    if isinstance(quant, dict) and len(quant) % 2:
        quant = {**quant, "_file": "quantize_config.json"}
    _call(lambda: profile_from_config(doc, quant=quant if isinstance(quant, dict) else None,
                                      source=FAKE_PATH, name="fuzz"), FAKE_PATH)


_TMP: dict[str, Path] = {}


def _tmpdir() -> Path:
    if "d" not in _TMP:
        _TMP["d"] = Path(tempfile.mkdtemp(prefix="kb-fuzz-"))
        atexit.register(shutil.rmtree, _TMP["d"], True)  # every run (and test session) used to leave one
    return _TMP["d"]


def _read_file(data: bytes) -> None:
    from ingest.run import read_file, read_run

    p = _tmpdir() / "input.txt"
    p.write_bytes(data)
    if len(data) % 4 == 0:  # read_run calls read_file; now and then on its own too
        _call(lambda: read_file(p, []), str(p))
    _call(lambda: read_run([p]), str(p))


def line_parser_target(cls) -> Callable[[list[str]], None]:
    def run(lines: list[str]) -> None:
        parser = cls(FAKE_PATH)
        for n, line in enumerate(lines, 1):
            _call(lambda n=n, line=line: parser.feed(n, line), FAKE_PATH, n)
        _call(parser.results, FAKE_PATH)
        _call(parser.results, FAKE_PATH)  # idempotent: a second call must not break either

    return run


def json_reader_target(reader) -> Callable[[tuple[Any, int | None]], None]:
    def run(arg: tuple[Any, int | None]) -> None:
        doc, line = arg
        _call(lambda: reader.read(doc, FAKE_PATH, line), FAKE_PATH, line)

    return run


@dataclass
class Target:
    name: str
    strategy: Callable[[], st.SearchStrategy]
    run: Callable[[Any], None]


def target_name(f) -> str:
    """A format's target: `module.Class` for a line parser, `json.Class` for a JSON reader."""
    cls = f.reader
    return f"{cls.__module__.split('.')[-1]}.{cls.__name__}" if f.shape == "lines" else f"json.{cls.__name__}"


def targets() -> list[Target]:
    """Every entry point: the line parsers and JSON readers are taken from the format
    registry (ingest/formats.py), so a format added there is fuzzed without a change here."""
    from ingest.formats import FORMATS

    out = [
        Target("markdown.parse_findings", lambda: texts(markdown_samples()), _markdown),
        Target("run.read_file+read_run", file_bytes, _read_file),
        Target("hf_config.profile_from_config", config_documents, _config),
        Target("launch_command.parse_launch_command", launch_texts, _launch),
    ]
    for f in FORMATS:
        if f.shape == "lines":
            out.append(Target(target_name(f), line_lists, line_parser_target(f.reader)))
        else:
            out.append(Target(target_name(f), lambda: st.tuples(json_documents(), st.none() | st.integers(1, 10**6)),
                              json_reader_target(f.reader())))
    return out


# ---------------------------------------------------------------- running


@dataclass
class Result:
    name: str
    cases: int
    escapes: list[tuple[str, str, list[str]]]  # (message, repr of the input, cut; traceback tail)
    seconds: float
    masked: list[str]


def run_target(t: Target, cases: int, seed: int | None = None) -> Result:
    found: list[tuple[str, str]] = []
    count = [0]

    @settings(max_examples=cases, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=seed is not None)
    @given(t.strategy())
    def body(example):
        count[0] += 1
        try:
            t.run(example)
        except Escape as e:
            found.append((str(e), repr(example)[:300], traceback.format_exception(e.__cause__)[-3:]))

    MASKED.clear()
    start = time.perf_counter()
    body()
    return Result(t.name, count[0], found, time.perf_counter() - start, list(MASKED))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000, help="examples per parser (default 10000)")
    ap.add_argument("--only", nargs="*", help="run only the targets whose name contains one of these")
    ap.add_argument("--seed", type=int, default=None, help="derandomize (same cases every run)")
    args = ap.parse_args(argv)
    chosen = [t for t in targets() if not args.only or any(o in t.name for o in args.only)]
    results = []
    print(f"{'parser':42} {'cases':>7} {'escapes':>8} {'seconds':>8} {'masked':>7}", flush=True)
    for t in chosen:
        r = run_target(t, args.cases, args.seed)
        results.append(r)
        print(f"{r.name:42} {r.cases:>7} {len(r.escapes):>8} {r.seconds:>8.1f} {len(r.masked):>7}", flush=True)
    total = sum(r.cases for r in results)
    escapes = sum(len(r.escapes) for r in results)
    print(f"{'total':42} {total:>7} {escapes:>8} {sum(r.seconds for r in results):>8.1f} "
          f"{sum(len(r.masked) for r in results):>7}")
    print("escapes: exceptions other than a KbError naming the file (and line); masked: KbErrors that a "
          "safety net (bench_common.guarded) made from another exception, i.e. parser bugs it contained")
    for r in results:
        for text in sorted(set(r.masked))[:3]:
            print(f"  masked in {r.name}: {text}")
    for r in results:
        seen = set()
        for msg, example, tb in r.escapes:
            key = msg.split(":")[0] + "".join(tb[-2:-1])
            if key in seen:
                continue
            seen.add(key)
            print(f"\n[{r.name}] {msg}\n  input: {example}\n  " + "  ".join(tb))
    return 1 if escapes else 0


if __name__ == "__main__":
    sys.exit(main())
