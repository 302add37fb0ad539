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
    assert len(cat.Q1_OPTIONS) == 7
    assert len(cat.Q2_OPTIONS) == 4
    assert len(cat.Q3_OPTIONS) == 4
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
    lists = [cat.Q1_OPTIONS, cat.Q2_OPTIONS, cat.Q3_OPTIONS]
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


def test_survey_options_are_the_benchmark_strings_exactly():
    # SPEC 2.4, character for character: files made by the benchmark's own tools use these.
    assert cat.Q1_OPTIONS == (
        "To just listen or let me vent",
        "To help me understand or sort out my feelings",
        "To help me think through options or make a decision",
        "To help with something urgent, risky, or high-stakes",
        "To get specific information or advice",
        "To help me calm down or feel steadier",
        "Other",
    )
    assert cat.Q2_OPTIONS == (
        "Clear and explicitly stated",
        "Implied or indirect",
        "Mixed or conflicted",
        "Unclear / evolving as I talked",
    )
    assert cat.Q3_OPTIONS == (
        "Very well-matched and adaptive",
        "Mostly well-matched",
        "Mixed, some good moments, some misses",
        "Mostly off-target or intrusive",
    )


@pytest.mark.parametrize("old, listed", sorted(cat.LEGACY_OPTION_ALIASES.items()))
def test_every_old_wording_normalises_to_its_listed_string(old, listed):
    assert listed in cat.Q1_OPTIONS
    assert cat.normalise_option("q1", old) == listed
    assert cat.normalise_option("Q1", old.upper()) == listed
    assert cat.normalise_option("q1_lookingFor", f" {old.lower()} ") == listed
    # the replay parser also forgives punctuation in it
    assert cat.match_option(f" {old.lower()}. ", cat.Q1_OPTIONS) == listed


@pytest.mark.parametrize(
    "question, answer, listed",
    [
        ("q1", "to just listen or let me vent", "To just listen or let me vent"),
        ("q1", "OTHER", "Other"),
        ("q2", "unclear / evolving as i talked", "Unclear / evolving as I talked"),
        ("q2_emotionClarity", "  Implied or indirect ", "Implied or indirect"),
        ("Q3", "MOSTLY WELL-MATCHED", "Mostly well-matched"),
    ],
)
def test_a_stored_answer_is_its_listed_string_in_any_case(question, answer, listed):
    # SPEC 2.4: scoring compares the listed strings case-insensitively
    assert cat.normalise_option(question, answer) == listed


@pytest.mark.parametrize(
    "question, answer",
    [
        ("q1", "Just listen, or let me vent!"),  # punctuation, no leading "To"
        ("q1", "Specific information or advice."),  # an old wording, plus a full stop
        ("q2", "implied, or indirect"),
        ("q2", "unclear/evolving as i talked"),
        ("q3", "Mostly well matched"),  # no hyphen
    ],
)
def test_a_stored_answer_that_differs_beyond_case_is_off_the_list(question, answer):
    # ... and nothing else: such a variant in a file matches nothing (SPEC 2.4), though the replay
    # parser, reading a model's free-form reply, maps it to the listed string
    assert cat.normalise_option(question, answer) is None
    assert cat.match_option(answer, cat.question_options(question)) is not None


@pytest.mark.parametrize(
    "question, answer, listed",
    [
        ("q1", "to just listen or let me vent", "To just listen or let me vent"),
        ("q1", "Just listen, or let me vent!", "To just listen or let me vent"),  # punctuation, no leading "To"
        (
            "q1",
            "help with something urgent risky or high stakes",
            "To help with something urgent, risky, or high-stakes",
        ),
        ("q1", "OTHER", "Other"),
        ("q2", "unclear/evolving as i talked", "Unclear / evolving as I talked"),
        ("q2_emotionClarity", "  Implied or indirect ", "Implied or indirect"),
        ("q3", "mixed - some good moments - some misses", "Mixed, some good moments, some misses"),
        ("q3_modelFit", "very well matched and adaptive", "Very well-matched and adaptive"),
    ],
)
def test_the_replay_parser_matches_variants_of_case_and_punctuation(question, answer, listed):
    assert cat.match_option(answer, cat.question_options(question)) == listed


@pytest.mark.parametrize(
    "question, answer",
    [("q1", "A hug"), ("q1", ""), ("q1", "Mixed or conflicted"), ("q2", "Just listen / let me vent"), ("q3", "Meh")],
)
def test_off_list_answers_normalise_to_none(question, answer):
    # an old Q1 wording is no answer to Q2: aliases apply within their own question only
    assert cat.normalise_option(question, answer) is None


def test_unknown_question_is_an_error_naming_it():
    with pytest.raises(KeyError, match="q4"):
        cat.normalise_option("q4", "Other")


def test_no_two_options_or_aliases_of_one_question_collapse_to_one_answer():
    # the tolerant matching must never make two listed answers indistinguishable
    for options in (cat.Q1_OPTIONS, cat.Q2_OPTIONS, cat.Q3_OPTIONS):
        assert [cat.match_option(o, options) for o in options] == list(options)
    keys = [cat._option_key(o) for o in cat.Q1_OPTIONS]
    old_keys = [cat._option_key(o) for o in cat.LEGACY_OPTION_ALIASES]
    assert len(set(keys)) == len(keys) and len(set(old_keys)) == len(old_keys)


def test_panas_totals_sum_each_full_side_and_clamp():
    # all ten PA items 7 -> 70; all ten NA items 1 -> 10 (any letter case)
    items = {**dict.fromkeys(cat.POSITIVE_AFFECT_ITEMS, 7), **{i.lower(): 1 for i in cat.NEGATIVE_AFFECT_ITEMS}}
    assert cat.panas_totals(items) == (70, 10)
    # PA items 1..7 cycling: 1+2+3+4+5+6+7+1+2+3 = 34; NA side has 3 items only -> no total
    pa = {item: i % 7 + 1 for i, item in enumerate(cat.POSITIVE_AFFECT_ITEMS)}
    assert cat.panas_totals({**pa, "Upset": 3, "afraid": 2, "Guilty": 1}) == (34, None)
    assert cat.panas_totals({}) == (None, None)
