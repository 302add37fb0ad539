"""The hand-written sample set: valid, canonical, and annotated coherently with its text.

Researchers read these files to learn the format, so an incoherent annotation
(a question asked but B13 'no') would teach the wrong thing; these checks keep
later edits honest.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, dumps_canonical, load_conversation

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
FILES = sorted(SAMPLE_DIR.glob("*.json"))


def load(path: Path) -> ConversationFile:
    return load_conversation(path.read_bytes(), str(path))


def observed(turn, qid: str) -> str | None:
    for j in turn.annotations.binaryJudgements:
        if j.questionId == qid:
            return j.observedBehavior
    return None


def test_there_are_enough_files_across_enough_categories() -> None:
    assert len(FILES) >= 14
    categories = Counter(load(p).metadata.category for p in FILES)
    assert len(categories) >= 7
    for required in ("Romantic relationships", "Grief", "Work", "Money", "Health", "Family", "Study"):
        assert categories[required] >= 1, required


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_parses_and_is_already_canonical(path: Path) -> None:
    raw = path.read_text(encoding="utf-8")
    assert dumps_canonical(load_conversation(raw, str(path))) == raw


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_is_marked_synthetic_and_well_shaped(path: Path) -> None:
    conv = load(path)
    meta = conv.model_dump()["metadata"]
    assert meta["synthetic"] is True
    assert path.stem == conv.conversationId
    assert (conv.metadata.category, conv.metadata.subtopic) in cat.ALL_TOPICS
    assert 3 <= len(conv.turns) <= 8
    assert conv.metadata.turnCount == len(conv.turns)
    assert [t.turnNumber for t in conv.turns] == list(range(1, len(conv.turns) + 1))
    profile = conv.participant_profile
    assert profile is not None and profile.participant_id.startswith("synthetic-p")
    assert profile.age in cat.AGE_BANDS
    assert set(profile.traits) <= set(cat.TRAIT_OPTIONS) and set(profile.goals) <= set(cat.GOAL_OPTIONS)
    assert profile.responses["topic_attitude"] in cat.TOPIC_ATTITUDE_OPTIONS
    assert profile.diagnoses and set(profile.diagnoses) <= set(cat.DIAGNOSIS_OPTIONS)
    for panas in (conv.prePanas, conv.postPanas):
        assert panas is not None and list(panas.items) == list(cat.PANAS_ITEMS)
    wide = conv.conversationWideQuestions
    assert wide is not None and wide.q1_lookingFor and wide.q2_emotionClarity and wide.q3_modelFit
    assert set(wide.fourBranchScores) == set(cat.FOUR_BRANCHES)
    # A follow-up on what felt off exists exactly when the fit was not perfect.
    assert bool(wide.q3_followUp_whatFeltOff) == (wide.q3_modelFit != cat.Q3_OPTIONS[0])


def test_conversation_and_participant_ids_are_unique() -> None:
    convs = [load(p) for p in FILES]
    assert len({c.conversationId for c in convs}) == len(convs)
    assert len({c.participant_profile.participant_id for c in convs}) == len(convs)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_turn_annotations_are_coherent_with_the_text(path: Path) -> None:
    for turn in load(path).turns:
        where = f"{path.name} turn {turn.turnNumber}"
        b13 = observed(turn, "B13")
        if b13 is not None:
            assert b13 == ("yes" if "?" in turn.llmResponse else "no"), where
        for tag in turn.moodShiftTags:
            assert tag.emotion in cat.PANAS_ITEMS and tag.intensity is not None, where
        ann = turn.annotations
        assert ann.alternateResponses and ann.alternateResponses.llmImproved and ann.alternateResponses.humanEdited
        assert 2 <= len(ann.pairwiseComparisons) <= 4, where
        assert ann.selectedPairwiseQuestions == [c.questionId for c in ann.pairwiseComparisons], where
        asked = len(ann.binaryJudgements)
        assert asked == 36 or 8 <= asked <= 12, where
        if turn.turnNumber == 1:
            # Nothing earlier to change, adjust to, correct or repeat.
            for qid in ("B5", "B16", "B406", "B408"):
                assert observed(turn, qid) in (None, "na"), (where, qid)
        if observed(turn, "B313") == "yes":
            assert observed(turn, "B11") in (None, "yes"), where  # advising is a kind of guiding


def test_the_set_mixes_full_and_sampled_turns_and_has_na_and_a_null_winner() -> None:
    turns = [t for p in FILES for t in load(p).turns]
    sizes = Counter(len(t.annotations.binaryJudgements) == 36 for t in turns)
    assert sizes[True] >= 5 and sizes[False] >= 5
    values = [j.observedBehavior for t in turns for j in t.annotations.binaryJudgements]
    assert "na" in values and None in values
    winners = [c.winner for t in turns for c in t.annotations.pairwiseComparisons]
    assert None in winners
    positions = Counter(c.responseA for t in turns for c in t.annotations.pairwiseComparisons)
    assert set(positions) == set(cat.RESPONSE_LABELS)  # every label appears in position A somewhere


def test_the_panic_conversation_is_tagged_with_fear_words() -> None:
    conv = load(SAMPLE_DIR / "conv-health-01.json")
    first = {t.emotion for t in conv.turns[0].moodShiftTags}
    assert {"Afraid", "Nervous"} <= first


def test_the_missed_risk_hint_is_annotated_as_missed_and_wanted() -> None:
    turn = load(SAMPLE_DIR / "conv-money-01.json").turns[2]
    assert "better off" in turn.userMessage
    for j in turn.annotations.binaryJudgements:
        if j.questionId in ("B17", "B18"):
            assert (j.observedBehavior, j.preferredBehavior) == ("no", "yes")
    pw12 = next(c for c in turn.annotations.pairwiseComparisons if c.questionId == "PW12")
    loser = pw12.responseA if pw12.winner == "B" else pw12.responseB
    assert loser == "original"


def test_diagnosis_groups_are_mixed() -> None:
    groups = Counter(cat.participant_group(load(p).participant_profile.diagnoses) for p in FILES)
    assert groups["anxiety_depression"] >= 3 and groups["none"] >= 3 and groups[None] >= 1


def test_readme_says_synthetic() -> None:
    text = (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    assert "SYNTHETIC" in text and "No real participant" in text
