"""The instrument catalogue: counts and values the SPEC fixes."""

import math

import pytest

from attunebench import catalogue as cat


def test_counts_match_the_spec():
    assert len(cat.PANAS_ITEMS) == 20
    assert len(cat.POSITIVE_AFFECT_ITEMS) == len(cat.NEGATIVE_AFFECT_ITEMS) == 10
    assert len(cat.BINARY_QUESTIONS) == 36
    assert len(set(cat.BINARY_QUESTION_IDS)) == 36
    assert len(cat.PAIRWISE_QUESTIONS) == 16
    assert cat.PAIRWISE_QUESTION_IDS[0] == "general"
    assert set(cat.PAIRWISE_QUESTION_IDS[1:]) == {f"PW{i}" for i in range(1, 16)}
    assert len(cat.ALL_TOPICS) == 50
    assert len(set(cat.ALL_TOPICS)) == 50
    assert "Romantic relationships" in cat.TOPIC_CATEGORIES
    assert len(cat.Q1_LOOKING_FOR_OPTIONS) == 7
    assert len(cat.Q2_EMOTION_CLARITY_OPTIONS) == 4
    assert len(cat.Q3_MODEL_FIT_OPTIONS) == 4
    assert cat.FOUR_BRANCHES == ("perceiving", "facilitating", "understanding", "managing")


def test_binary_categories_follow_spec_2_2():
    by_category = {c: [q.id for q in cat.BINARY_QUESTIONS if q.category == c] for c in cat.BINARY_CATEGORIES}
    assert by_category["perceiving"] == ["B1", "B2", "B3", "B108", "B109"]
    assert by_category["understanding"] == ["B4", "B5", "B6", "B7", "B206", "B207"]
    assert by_category["using"] == [
        "B8",
        "B9",
        "B10",
        "B11",
        "B12",
        "B13",
        "B14",
        "B15",
        "B310",
        "B311",
        "B313",
        "B315",
        "B316",
    ]
    assert by_category["regulating"] == ["B16", "B17", "B18", "B19", "B20", "B406", "B408"]
    assert by_category["cognitive_framing"] == ["B501", "B502", "B503", "B504", "B505"]


def test_every_question_is_worded_both_ways():
    for question in cat.BINARY_QUESTIONS:
        assert "participant" in question.third_person or "reply" in question.third_person
        assert question.first_person.endswith("?") and question.third_person.endswith("?")
        assert " I" in question.first_person or " me" in question.first_person or " my" in question.first_person


def test_no_option_string_is_duplicated_across_lists():
    lists = [cat.Q1_LOOKING_FOR_OPTIONS, cat.Q2_EMOTION_CLARITY_OPTIONS, cat.Q3_MODEL_FIT_OPTIONS]
    flat = [o.casefold() for options in lists for o in options]
    assert len(flat) == len(set(flat))


def test_valence_arousal_similarity():
    # afraid (0.073, 0.84) vs scared (0.083, 0.82): distance sqrt(0.01² + 0.02²) = 0.0223607
    # sim = 1 - 0.0223607 / 1.4142136 = 0.98419 -> 0.9842
    assert cat.emotion_similarity("Afraid", " scared ") == 0.9842
    assert cat.emotion_similarity("proud", "proud") == 1.0
    assert cat.emotion_similarity("proud", "happy") == 0.0
    expected = round(1 - math.dist((0.073, 0.84), (0.9, 0.7)) / math.sqrt(2), 4)
    assert cat.emotion_similarity("afraid", "inspired") == expected


@pytest.mark.parametrize(
    "diagnoses, group",
    [
        (["Anxiety"], "anxiety_depression"),
        (["Depression", "ADHD"], "anxiety_depression"),
        (["None"], "none"),
        (["Prefer not to say"], None),
        ([], None),
        (None, None),
        (["PTSD"], None),
    ],
)
def test_participant_group(diagnoses, group):
    assert cat.participant_group(diagnoses) == group


def test_catalogue_imports_no_django():
    import subprocess
    import sys

    code = (
        "import sys, attunebench.catalogue, attunebench.canonical, attunebench.sources; print('django' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
