"""`kb ask`: question understanding, BM25F retrieval, and a light re-rank.

The re-rank prefers complete findings (a fix with commands and measured gains) over
notes, and rewards a question's concepts matched across several fields — it never
invents relevance the text search did not find.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kb import index as kbindex
from kb.records import Finding
from kb.textnorm import CONCEPTS, concepts, understand_query


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
    answers = []
    for f, score in hits:
        if f.kind == "note":
            score *= 0.6
        else:
            score *= 1.0 + 0.1 * bool(f.commands) + 0.1 * bool(f.gains) + 0.05 * (f.confidence == "high")
        if wanted:
            doc = " ".join([f.title, *f.symptoms, f.root_cause or "", f.fix or ""])
            have = sum(1 for rx, _ in wanted_rx if rx.search(doc))  # only the question's concepts are looked for
            score *= 1.0 + 0.25 * have / len(wanted)
        if boost:
            score *= 1.0 + 0.6 * max((boost.get(fc, 0.0) for fc in f.fix_classes), default=0.0)
        answers.append(Answer(f, score))
    answers.sort(key=lambda a: -a.score)
    return answers[:limit]
