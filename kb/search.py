"""`kb ask`: question understanding, BM25F retrieval, and a light re-rank.

The re-rank prefers complete findings (a fix with commands and measured gains) over
notes, and rewards a question's concepts matched across several fields — it never
invents relevance the text search did not find.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from kb import index as kbindex
from kb.records import Finding
from kb.textnorm import CONCEPTS, concepts, understand_query

# Weight of the question's adjacent word pairs found adjacent in a record ("kv cache hit",
# "chunk size", "max num batched tokens"): words that stand together in the question and
# in the notes say more than the same words scattered.
PHRASE = 0.5
OWN_NOTES = 1.2  # a team's own notes over a shipped finding with close words
_TOKEN = re.compile(r"[a-z0-9]+(?:[._][a-z0-9]+)*")


@dataclass
class Answer:
    finding: Finding
    score: float


def ask(index_dir: Path, question: str, limit: int = 5, boost: dict[str, float] | None = None) -> list[Answer]:
    """Best findings for a question. `boost` (fix class → 0..1) lifts findings whose fix
    this run's diagnosis calls for (`kb ask --run`)."""
    text = understand_query(question)
    hits = kbindex.search_terms(index_dir, text, limit=max(50, limit * 5))
    wanted = set(concepts(text))
    wanted_rx = [(rx, c) for rx, c in CONCEPTS if c in wanted]
    pairs = word_pairs(question)
    answers = []
    for f, score in hits:
        # Completeness (commands, measured gains) lifts a record wherever it comes from: a
        # section of a team's own notes is not ranked below a shipped finding as a class.
        score *= 1.0 + 0.1 * bool(f.commands) + 0.1 * bool(f.gains) + 0.05 * (f.confidence == "high")
        # A section of the team's own notes (its source is the file it was read from, where a
        # shipped finding names a public URL) is what happened on their hardware: at close
        # scores it goes first. Without it, 468 shipped findings crowd the notes out of the
        # top 3 for questions only the notes answer (tests/test_ask_practitioner_notes.py).
        if f.sources and f.sources[0].path and not f.sources[0].url:
            score *= OWN_NOTES
        if pairs:
            score *= 1.0 + PHRASE * _pairs_in(f, pairs) / len(pairs)
        if wanted:
            doc = " ".join([f.title, *f.symptoms, f.root_cause or "", f.fix or ""])
            have = sum(1 for rx, _ in wanted_rx if rx.search(doc))  # only the question's concepts are looked for
            score *= 1.0 + 0.25 * have / len(wanted)
        if boost:
            score *= 1.0 + 0.6 * max((boost.get(fc, 0.0) for fc in f.fix_classes), default=0.0)
        answers.append(Answer(f, score))
    answers.sort(key=lambda a: -a.score)
    return answers[:limit]


def word_pairs(question: str) -> list[tuple[str, str, re.Pattern[str]]]:
    """The question's adjacent word pairs (lower case), each with the pattern that finds
    the two words side by side; pairs of two stop words ("of the") are left out."""
    from whoosh.analysis import STOP_WORDS

    words = _TOKEN.findall(question.lower())
    pairs = {(a, b) for a, b in pairwise(words) if not (a in STOP_WORDS and b in STOP_WORDS)}
    return [(a, b, re.compile(rf"(?<![a-z0-9]){re.escape(a)}[^a-z0-9]+{re.escape(b)}(?![a-z0-9])"))
            for a, b in sorted(pairs)]


def _pairs_in(f: Finding, pairs: list[tuple[str, str, re.Pattern[str]]]) -> int:
    text = " ".join([f.title, *f.symptoms, f.root_cause or "", f.fix or "", *f.commands, f.body]).lower()
    return sum(1 for a, b, rx in pairs if a in text and b in text and rx.search(text))


def searcher(index_dir: Path, limit: int = 24):
    """text → [(finding, score)] over the same index and ranking as `kb ask`: the
    matcher's text similarity between a run's evidence and the findings. More hits than
    the matcher ranks (kb.match.TEXT_TOP): it skips the ones the run's facts exclude."""
    return lambda text: [(a.finding, a.score) for a in ask(index_dir, text, limit)]
