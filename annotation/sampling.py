"""Which behaviour questions a turn asks (SPEC 2.2: "questions may be sampled per turn").

The sample is a pure function of the conversation id, the turn number and k, so
a refresh, a second device or a later audit always sees the same questions for
the same turn. Questions keep catalogue order, so grouping by category and
paging stay stable too.
"""

from __future__ import annotations

import hashlib
import random

from attunebench import catalogue as cat


def sample_question_ids(conversation_id: str, turn_number: int, k: int) -> list[str]:
    """k question ids for this turn in catalogue order; k <= 0 or k >= 36 asks all of them."""
    ids = list(cat.BINARY_QUESTION_IDS)
    if k <= 0 or k >= len(ids):
        return ids
    seed = int.from_bytes(hashlib.sha256(f"{conversation_id}#{turn_number}#{k}".encode()).digest()[:8], "big")
    chosen = set(random.Random(seed).sample(ids, k))
    return [qid for qid in ids if qid in chosen]


def pages_by_category(question_ids: list[str]) -> list[tuple[str, list[cat.BinaryQuestion]]]:
    """The questions grouped into one page per category (empty categories skipped), in catalogue order."""
    wanted = set(question_ids)
    pages = []
    for category in cat.BINARY_CATEGORIES:
        questions = [q for q in cat.BINARY_QUESTIONS if q.category == category and q.id in wanted]
        if questions:
            pages.append((category, questions))
    return pages
