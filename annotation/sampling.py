"""Which behaviour questions a turn asks (SPEC 2.2: "questions may be sampled per turn").

With a per-study sample size k (``Study.binary_sample_size``, 0 = all 36, the
paper's protocol) the questions *rotate*: the study walks one fixed cycle of the
36 questions, and each sampled turn takes the next k of it. The start is the
number of questions the study has already asked, so across turns and
participants every question is asked as often as every other, give or take one
(exactly, when turns are answered one after another; two participants shown
their pages at the same moment may start at the same place). The cycle
interleaves the five categories, so even 5 questions span all of them.

What a turn asked is recorded by its ``BinaryJudgement`` rows (created, with
their answers, when the participant saves them); the canonical export lists
exactly those. Questions are shown in catalogue order.
"""

from __future__ import annotations

from itertools import zip_longest

from attunebench import catalogue as cat


def _rotation_cycle() -> tuple[str, ...]:
    """The 36 ids, one category at a time round-robin: B1, B4, B8, B16, B501, B2, B5, ..."""
    by_category = [[q.id for q in cat.BINARY_QUESTIONS if q.category == c] for c in cat.BINARY_CATEGORIES]
    return tuple(qid for row in zip_longest(*by_category) for qid in row if qid is not None)


ROTATION_CYCLE: tuple[str, ...] = _rotation_cycle()


def sample_question_ids(asked_before: int, k: int) -> list[str]:
    """The k question ids a turn asks, in catalogue order; k <= 0 or k >= 36 asks all of them.

    ``asked_before`` is how many behaviour questions the study has asked so far
    (its stored judgement rows): the window of the rotation cycle starts there.
    """
    ids = list(cat.BINARY_QUESTION_IDS)
    if k <= 0 or k >= len(ids):
        return ids
    start = asked_before % len(ROTATION_CYCLE)
    chosen = {ROTATION_CYCLE[(start + i) % len(ROTATION_CYCLE)] for i in range(k)}
    return [qid for qid in ids if qid in chosen]
