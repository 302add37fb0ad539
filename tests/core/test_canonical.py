"""The canonical reader: every lenient normalisation of SPEC 3.1 and every rejection path.

Rejections are checked by the exact text a researcher would see
("file: json.path: message"), because that text is the contract of `attune
validate` and `attune import`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import (
    CanonicalError,
    ConversationFile,
    check_conversation_options,
    dumps_canonical,
    dumps_line,
    format_location,
    format_timestamp,
    load_conversation,
    load_run,
    looks_like_run,
    normalise_intensity,
    normalise_winner,
    normalise_yes_no_na,
    parse_conversation,
    parse_run,
    parse_timestamp,
)


def judgement(qid: str, observed: Any = "yes", preferred: Any = "no") -> dict[str, Any]:
    return {"questionId": qid, "observedBehavior": observed, "preferredBehavior": preferred}


def minimal_conversation(turns: int = 4) -> dict[str, Any]:
    return {
        "conversationId": "c-1",
        "metadata": {
            "model": "om/x",
            "provider": "p",
            "timestamp": "2025-03-01T10:00:00Z",
            "category": "Work",
            "subtopic": "Stress and burnout",
        },
        "turns": [
            {
                "turnNumber": n,
                "userMessage": f"message {n}",
                "llmResponse": f"reply {n}",
                "moodShiftTags": [{"emotion": "Nervous", "intensity": 3}],
                "annotations": {
                    "binaryJudgements": [judgement("B1"), judgement("B13"), judgement("B19")],
                    "alternateResponses": {"llmImproved": "better", "humanEdited": "mine"},
                    "pairwiseComparisons": [
                        {"questionId": "general", "responseA": "original", "responseB": "human", "winner": "B"},
                    ],
                    "selectedPairwiseQuestions": ["general"],
                },
            }
            for n in range(1, turns + 1)
        ],
    }


def minimal_run() -> dict[str, Any]:
    return {
        "conversationId": "c-1",
        "em_model": "em/y",
        "mode": "default",
        "run_timestamp": "2025-04-01T10:00:00Z",
        "turns": [
            {
                "turnNumber": 1,
                "em_emotion_tags": [{"emotion": "nervous", "intensity": 4}],
                "em_drafted_response": "draft",
                "em_binary_om_assessment": {"B1": "yes"},
                "em_binary_human_prediction": {"B1": "no"},
                "em_pairwise_selections": {"0": "A"},
                "em_draft_judge_scores": {"overall_score": 5, "helpfulness": None},
                "em_draft_binary_assessment": {"B1": "yes"},
            }
        ],
        "post_conversation": {
            "panas_strategy": "delta",
            "predicted_post_panas": {"items": {"Proud": 3}},
            "predicted_conversation_wide": {"q2_emotionClarity": "something free"},
        },
    }


def problems_of(data: Any, parse=parse_conversation) -> list[str]:
    with pytest.raises(CanonicalError) as caught:
        parse(data, "file")
    return [str(p) for p in caught.value.problems]


def mutated(change) -> dict[str, Any]:
    data = minimal_conversation()
    change(data)
    return data


# ---------------------------------------------------------------------------
# Lenient normalisations (SPEC 3.1)
# ---------------------------------------------------------------------------


class TestYesNoNa:
    @pytest.mark.parametrize(
        "raw, expected",
        [
            ("yes", "yes"),
            ("YES ", "yes"),
            ("y", "yes"),
            (True, "yes"),
            (1, "yes"),
            ("1", "yes"),
            ("true", "yes"),
            ("no", "no"),
            ("N", "no"),
            (False, "no"),
            (0, "no"),
            ("0", "no"),
            ("false", "no"),
            ("na", "na"),
            ("n/a", "na"),
            ("N/A", "na"),
            ("not applicable", "na"),
            (None, None),
        ],
    )
    def test_it_accepts_the_spellings_spec_allows(self, raw: Any, expected: str | None) -> None:
        assert normalise_yes_no_na(raw) == expected
        data = mutated(lambda d: d["turns"][0]["annotations"]["binaryJudgements"][0].update(observedBehavior=raw))
        parsed = parse_conversation(data)
        assert parsed.turns[0].annotations.binaryJudgements[0].observedBehavior == expected

    @pytest.mark.parametrize("raw", ["maybe", 2, "", [], 0.5])
    def test_it_rejects_anything_else_with_path_and_value(self, raw: Any) -> None:
        data = mutated(lambda d: d["turns"][3]["annotations"]["binaryJudgements"][2].update(observedBehavior=raw))
        shown = repr(raw) if isinstance(raw, str) else json.dumps(raw)
        assert problems_of(data) == [
            f"file: turns[3].annotations.binaryJudgements[2].observedBehavior: expected yes/no/na, got {shown}"
        ]

    def test_the_documented_example_message_is_reproduced_exactly(self) -> None:
        data = mutated(lambda d: d["turns"][3]["annotations"]["binaryJudgements"][2].update(observedBehavior="maybe"))
        assert problems_of(data) == [
            "file: turns[3].annotations.binaryJudgements[2].observedBehavior: expected yes/no/na, got 'maybe'"
        ]

    def test_preferred_and_llm_value_are_normalised_too(self) -> None:
        data = mutated(
            lambda d: d["turns"][0]["annotations"]["binaryJudgements"][0].update(
                preferredBehavior="Y", llmValue=False, observedBehavior=None
            )
        )
        j = parse_conversation(data).turns[0].annotations.binaryJudgements[0]
        assert (j.observedBehavior, j.preferredBehavior, j.llmValue) == (None, "yes", "no")


class TestIntensity:
    @pytest.mark.parametrize(
        "raw, expected",
        [
            (3, 3),
            (3.4, 3),
            (3.5, 4),
            (6.6, 7),
            (0, 1),
            (-4, 1),
            (9, 7),
            (12.2, 7),
            ("mild", 2),
            ("Moderate", 4),
            (" intense ", 6),
            ("5", 5),
            ("2.5", 3),
            (None, None),
            ("", None),
        ],
    )
    def test_it_rounds_clamps_and_reads_words(self, raw: Any, expected: int | None) -> None:
        assert normalise_intensity(raw) == expected
        data = mutated(lambda d: d["turns"][1].update(moodShiftTags=[{"emotion": "afraid", "intensity": raw}]))
        tag = parse_conversation(data).turns[1].moodShiftTags[0]
        assert (tag.emotion, tag.intensity) == ("Afraid", expected)

    @pytest.mark.parametrize("raw", ["huge", True, [3], float("inf")])
    def test_it_rejects_non_intensities(self, raw: Any) -> None:
        data = mutated(lambda d: d["turns"][0].update(moodShiftTags=[{"emotion": "Upset", "intensity": raw}]))
        (problem,) = problems_of(data)
        assert problem.startswith(
            "file: turns[0].moodShiftTags[0].intensity: expected an intensity 1-7 or mild/moderate/intense, got "
        )

    def test_emotion_words_take_catalogue_spelling_and_empty_is_rejected(self) -> None:
        data = mutated(lambda d: d["turns"][0].update(moodShiftTags=[{"emotion": " jittery "}]))
        assert parse_conversation(data).turns[0].moodShiftTags[0].emotion == "Jittery"
        data = mutated(lambda d: d["turns"][0].update(moodShiftTags=[{"emotion": "  "}]))
        assert problems_of(data) == ["file: turns[0].moodShiftTags[0].emotion: expected a non-empty string, got '  '"]

    def test_neutral_means_no_change_and_other_words_outside_panas_are_rejected(self) -> None:
        # SPEC 2.1: "Neutral / no change is recorded as an empty tag list".
        data = mutated(lambda d: d["turns"][0].update(moodShiftTags=[{"emotion": "Neutral"}]))
        assert parse_conversation(data).turns[0].moodShiftTags == []
        data = mutated(
            lambda d: d["turns"][0].update(moodShiftTags=[{"emotion": "Upset"}, {"emotion": "happy", "intensity": 3}])
        )
        assert problems_of(data) == [
            "file: turns[0].moodShiftTags[1].emotion: expected one of the 20 PANAS items "
            "(no change is an empty list), got 'happy'"
        ]

    def test_an_em_tag_outside_panas_is_dropped_not_an_error(self) -> None:
        # SPEC 4 step 2: only the 20 items; anything else is dropped.
        run = minimal_run()
        run["turns"][0]["em_emotion_tags"] = [{"emotion": "bored"}, {"emotion": "upset", "intensity": 4}, "Neutral"]
        assert [t.emotion for t in parse_run(run).turns[0].em_emotion_tags] == ["Upset"]
        # An entry with no word to read is malformed, not an off-list word: still an error.
        run["turns"][0]["em_emotion_tags"] = [{"intensity": 4}]
        with pytest.raises(CanonicalError, match=r"em_emotion_tags\[0\]\.emotion"):
            parse_run(run)


class TestWinner:
    @pytest.mark.parametrize(
        "raw, expected",
        [
            ("A", "A"),
            ("b", "B"),
            ("response_1", "A"),
            ("Response_2", "B"),
            (None, None),
        ],
    )
    def test_it_accepts_letters_and_response_numbers(self, raw: Any, expected: str | None) -> None:
        assert normalise_winner(raw) == expected
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(winner=raw))
        assert parse_conversation(data).turns[0].annotations.pairwiseComparisons[0].winner == expected

    @pytest.mark.parametrize("raw", ["C", "response_3", 1, "original"])
    def test_it_rejects_other_winners(self, raw: Any) -> None:
        data = mutated(lambda d: d["turns"][2]["annotations"]["pairwiseComparisons"][0].update(winner=raw))
        shown = repr(raw) if isinstance(raw, str) else json.dumps(raw)
        assert problems_of(data) == [
            f"file: turns[2].annotations.pairwiseComparisons[0].winner: "
            f"expected A/B or response_1/response_2, got {shown}"
        ]


class TestPanas:
    def test_totals_are_derived_from_items_when_absent(self) -> None:
        items = dict.fromkeys(cat.POSITIVE_AFFECT_ITEMS, 3) | dict.fromkeys(cat.NEGATIVE_AFFECT_ITEMS, 5)
        data = mutated(lambda d: d.update(prePanas={"items": items}))
        panas = parse_conversation(data).prePanas
        # 10 items x 3 = 30 and 10 x 5 = 50.
        assert (panas.totalPositiveAffect, panas.totalNegativeAffect) == (30, 50)

    def test_a_partial_side_derives_no_total(self) -> None:
        items = dict.fromkeys(cat.POSITIVE_AFFECT_ITEMS, 3) | {"Afraid": 6}
        panas = parse_conversation(mutated(lambda d: d.update(prePanas={"items": items}))).prePanas
        assert (panas.totalPositiveAffect, panas.totalNegativeAffect) == (30, None)

    def test_given_totals_win_over_items_and_are_clamped_to_10_70(self) -> None:
        items = dict.fromkeys(cat.PANAS_ITEMS, 7)
        data = mutated(
            lambda d: d.update(prePanas={"items": items, "totalPositiveAffect": 95, "totalNegativeAffect": 3})
        )
        panas = parse_conversation(data).prePanas
        assert (panas.totalPositiveAffect, panas.totalNegativeAffect) == (70, 10)

    def test_given_totals_are_rounded(self) -> None:
        data = mutated(lambda d: d.update(postPanas={"totalPositiveAffect": 33.6, "totalNegativeAffect": None}))
        panas = parse_conversation(data).postPanas
        assert (panas.totalPositiveAffect, panas.totalNegativeAffect, panas.items) == (34, None, {})

    def test_item_names_are_matched_case_insensitively(self) -> None:
        data = mutated(lambda d: d.update(prePanas={"items": {"proud": 2, " AFRAID ": 6}}))
        assert parse_conversation(data).prePanas.items == {"Proud": 2, "Afraid": 6}

    def test_unknown_item_is_rejected(self) -> None:
        data = mutated(lambda d: d.update(prePanas={"items": {"Happy": 3}}))
        assert problems_of(data) == ["file: prePanas.items: 'Happy' is not one of the 20 PANAS items"]

    def test_item_given_twice_in_two_spellings_is_rejected(self) -> None:
        data = mutated(lambda d: d.update(prePanas={"items": {"Proud": 3, "proud": 4}}))
        assert problems_of(data) == ["file: prePanas.items: 'Proud' is given twice"]

    @pytest.mark.parametrize(
        "raw, message",
        [
            (0, "expected a rating 1-7, got 0"),
            (8, "expected a rating 1-7, got 8"),
            (3.5, "expected a whole-number a rating 1-7, got 3.5"),
            ("high", "expected a rating 1-7, got 'high'"),
            (True, "expected a rating 1-7, got true"),
        ],
    )
    def test_out_of_range_or_non_numeric_rating_is_rejected(self, raw: Any, message: str) -> None:
        data = mutated(lambda d: d.update(postPanas={"items": {"Upset": raw}}))
        assert problems_of(data) == [f"file: postPanas.items.Upset: {message}"]

    def test_non_numeric_total_is_rejected(self) -> None:
        data = mutated(lambda d: d.update(prePanas={"totalPositiveAffect": "high"}))
        assert problems_of(data) == [
            "file: prePanas.totalPositiveAffect: expected a PANAS total (number) or null, got 'high'"
        ]


class TestOlderKeyNames:
    """SPEC 3.1: the benchmark's own tools write older key names; they read as the canonical ones."""

    @pytest.mark.parametrize("key", ["did_occur", "humanValue", "actualValue"])
    def test_observed_aliases(self, key: str) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"].update(binaryJudgements=[{"questionId": "B1", key: "y"}]))
        j = parse_conversation(data).turns[0].annotations.binaryJudgements[0]
        assert (j.observedBehavior, j.preferredBehavior) == ("yes", None)

    @pytest.mark.parametrize("key", ["should_occur", "humanPreference"])
    def test_preferred_aliases(self, key: str) -> None:
        data = mutated(
            lambda d: d["turns"][0]["annotations"].update(binaryJudgements=[{"questionId": "B1", key: "n/a"}])
        )
        j = parse_conversation(data).turns[0].annotations.binaryJudgements[0]
        assert (j.observedBehavior, j.preferredBehavior) == (None, "na")

    def test_canonical_key_wins_over_an_older_one(self) -> None:
        judgements = [
            {
                "questionId": "B1",
                "did_occur": "yes",
                "observedBehavior": "no",
                "should_occur": "no",
                "preferredBehavior": None,
            },
            {"questionId": "B13", "humanValue": "no", "actualValue": "yes", "humanPreference": "yes"},
        ]
        data = mutated(lambda d: d["turns"][0]["annotations"].update(binaryJudgements=judgements))
        first, second = parse_conversation(data).turns[0].annotations.binaryJudgements
        assert (first.observedBehavior, first.preferredBehavior) == ("no", None)
        # two older names for one key: the first listed in SPEC 3.1 (humanValue before actualValue) wins
        assert (second.observedBehavior, second.preferredBehavior) == ("no", "yes")

    def test_blinded_alternates_and_response_numbers(self) -> None:
        def change(d: dict[str, Any]) -> None:
            d["turns"][0]["annotations"]["alternateResponses"] = {"alternate1": "better", "alternate2": "mine"}
            d["turns"][0]["annotations"]["pairwiseComparisons"] = [
                {"questionId": "general", "response_1": "original", "response_2": "human", "winner": "response_2"}
            ]

        ann = parse_conversation(mutated(change)).turns[0].annotations
        assert (ann.alternateResponses.llmImproved, ann.alternateResponses.humanEdited) == ("better", "mine")
        c = ann.pairwiseComparisons[0]
        assert (c.responseA, c.responseB, c.winner) == ("original", "human", "B")

    def test_canonical_alternate_and_response_keys_win(self) -> None:
        def change(d: dict[str, Any]) -> None:
            d["turns"][0]["annotations"]["alternateResponses"] = {"alternate1": "old", "llmImproved": "new"}
            d["turns"][0]["annotations"]["pairwiseComparisons"] = [
                {"questionId": "general", "response_1": "alternate", "responseA": "original", "responseB": "human"}
            ]

        ann = parse_conversation(mutated(change)).turns[0].annotations
        assert ann.alternateResponses.llmImproved == "new"
        assert ann.pairwiseComparisons[0].responseA == "original"

    def test_survey_question_keys_in_conversations_and_runs(self) -> None:
        wide = {
            "Q1": ["Other"],
            "Q2": "implied or indirect",
            "Q3": "Mostly well-matched",
            "q3_modelFit": "Mostly off-target or intrusive",
        }
        read = parse_conversation(mutated(lambda d: d.update(conversationWideQuestions=wide))).conversationWideQuestions
        assert (read.q1_lookingFor, read.q2_emotionClarity) == (["Other"], "Implied or indirect")
        assert read.q3_modelFit == "Mostly off-target or intrusive"  # the canonical key wins
        run = minimal_run()
        run["post_conversation"]["predicted_conversation_wide"] = {
            "Q1": ["just listen / let me vent"],
            "Q3": "MOSTLY WELL-MATCHED",
        }
        predicted = parse_run(run).post_conversation.predicted_conversation_wide
        assert (predicted.q1_lookingFor, predicted.q3_modelFit) == (
            ["To just listen or let me vent"],
            "Mostly well-matched",
        )

    def test_panas_items_at_top_level_or_in_responses_any_case_numeric_strings(self) -> None:
        top = {"proud": "5", "UPSET": 2, "totalNegativeAffect": 30}
        responses = {"responses": {"Alert": " 4 ", "hostile": 3.0}}
        data = mutated(lambda d: d.update(prePanas=top, postPanas=responses))
        parsed = parse_conversation(data)
        assert parsed.prePanas.items == {"Proud": 5, "Upset": 2}
        assert parsed.prePanas.totalNegativeAffect == 30
        assert parsed.postPanas.items == {"Alert": 4, "Hostile": 3}

    def test_panas_items_object_wins_over_responses_over_top_level(self) -> None:
        panas = {"items": {"Proud": 1}, "responses": {"proud": 2, "Alert": 3}, "PROUD": 4, "alert": 5, "Upset": 6}
        parsed = parse_conversation(mutated(lambda d: d.update(postPanas=panas)))
        assert parsed.postPanas.items == {"Proud": 1, "Alert": 3, "Upset": 6}

    def test_all_twenty_top_level_items_derive_totals(self) -> None:
        # PA 10 items x 3 = 30; NA 10 items x "2" = 20
        panas = {**dict.fromkeys(cat.POSITIVE_AFFECT_ITEMS, 3), **{i.lower(): "2" for i in cat.NEGATIVE_AFFECT_ITEMS}}
        parsed = parse_conversation(mutated(lambda d: d.update(postPanas=panas))).postPanas
        assert (parsed.totalPositiveAffect, parsed.totalNegativeAffect) == (30, 20)

    def test_other_keys_in_a_panas_object_are_still_rejected(self) -> None:
        assert problems_of(mutated(lambda d: d.update(postPanas={"Proud": 3, "mood": 2}))) == [
            "file: postPanas.mood: unknown field"
        ]

    def test_export_writes_canonical_keys_only(self) -> None:
        def change(d: dict[str, Any]) -> None:
            ann = d["turns"][0]["annotations"]
            ann["binaryJudgements"] = [{"questionId": "B1", "did_occur": "yes", "should_occur": "no"}]
            ann["alternateResponses"] = {"alternate1": "better", "alternate2": "mine"}
            ann["pairwiseComparisons"] = [{"questionId": "general", "response_1": "original", "response_2": "human"}]
            d["conversationWideQuestions"] = {"Q1": ["Other"], "Q2": "Mixed or conflicted", "Q3": "Mostly well-matched"}
            d["postPanas"] = {"responses": {"Proud": 2}}

        text = dumps_canonical(parse_conversation(mutated(change)))
        for old in (
            "did_occur",
            "should_occur",
            "alternate1",
            "alternate2",
            "response_1",
            "response_2",
            '"Q1"',
            '"Q2"',
            '"Q3"',
            '"responses"',
        ):
            assert old not in text, old
        assert '"observedBehavior": "yes"' in text and '"llmImproved": "better"' in text and '"Proud": 2' in text


# ---------------------------------------------------------------------------
# Rejections of structure and catalogued values
# ---------------------------------------------------------------------------


class TestConversationRejections:
    def test_unknown_question_id(self) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"]["binaryJudgements"][1].update(questionId="B99"))
        assert problems_of(data) == [
            "file: turns[0].annotations.binaryJudgements[1].questionId: "
            "'B99' is not one of the 36 behaviour question ids"
        ]

    def test_question_answered_twice_in_one_turn(self) -> None:
        data = mutated(lambda d: d["turns"][1]["annotations"]["binaryJudgements"].append(judgement("B1")))
        assert problems_of(data) == ["file: turns[1].annotations.binaryJudgements: question B1 is answered twice"]

    def test_bad_response_label(self) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(responseA="gold"))
        assert problems_of(data) == [
            "file: turns[0].annotations.pairwiseComparisons[0].responseA: expected original/alternate/human, got 'gold'"
        ]

    def test_labels_are_case_insensitive(self) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(responseA="Alternate"))
        assert parse_conversation(data).turns[0].annotations.pairwiseComparisons[0].responseA == "alternate"

    def test_same_label_on_both_sides(self) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(responseB="original"))
        assert problems_of(data) == [
            "file: turns[0].annotations.pairwiseComparisons[0]: responseA and responseB are both 'original'"
        ]

    def test_unknown_pairwise_question(self) -> None:
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(questionId="PW16"))
        assert problems_of(data) == [
            "file: turns[0].annotations.pairwiseComparisons[0].questionId: "
            "'PW16' is not 'general', PW1-PW15 or 'custom:<text>'"
        ]

    def test_custom_pairwise_question_is_accepted_but_empty_custom_is_not(self) -> None:
        data = mutated(
            lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(
                questionId="custom:Which felt warmer?"
            )
        )
        assert parse_conversation(data).turns[0].annotations.pairwiseComparisons[0].questionId.startswith("custom:")
        data = mutated(lambda d: d["turns"][0]["annotations"]["pairwiseComparisons"][0].update(questionId="custom: "))
        assert len(problems_of(data)) == 1

    def test_duplicate_turn_numbers(self) -> None:
        data = mutated(lambda d: d["turns"][2].update(turnNumber=1))
        assert problems_of(data) == ["file: turns: turn number 1 appears twice"]

    def test_turn_number_below_one(self) -> None:
        data = mutated(lambda d: d["turns"][0].update(turnNumber=0))
        (problem,) = problems_of(data)
        assert problem.startswith("file: turns[0].turnNumber: Input should be greater than or equal to 1")

    def test_turns_are_sorted_by_number(self) -> None:
        data = mutated(lambda d: d["turns"].reverse())
        assert [t.turnNumber for t in parse_conversation(data).turns] == [1, 2, 3, 4]

    @pytest.mark.parametrize("raw", ["yesterday", "2025-13-01T00:00:00Z", 20250101, None])
    def test_bad_timestamp(self, raw: Any) -> None:
        data = mutated(lambda d: d["metadata"].update(timestamp=raw))
        shown = repr(raw) if isinstance(raw, str) else json.dumps(raw)
        assert problems_of(data) == [f"file: metadata.timestamp: expected an ISO 8601 timestamp, got {shown}"]

    def test_missing_required_field(self) -> None:
        data = mutated(lambda d: d["metadata"].pop("model"))
        assert problems_of(data) == ["file: metadata.model: required field is missing"]

    def test_unknown_field_in_a_strict_section(self) -> None:
        data = mutated(lambda d: d["turns"][0].update(mood="sad"))
        assert problems_of(data) == ["file: turns[0].mood: unknown field"]

    def test_extra_metadata_and_profile_keys_are_kept(self) -> None:
        def change(d: dict[str, Any]) -> None:
            d["metadata"]["synthetic"] = True
            d["participant_profile"] = {"participant_id": "p1", "diagnoses": ["None"], "consent_version": "v2"}

        parsed = parse_conversation(mutated(change))
        dumped = json.loads(dumps_canonical(parsed))
        assert dumped["metadata"]["synthetic"] is True
        assert dumped["participant_profile"]["consent_version"] == "v2"

    def test_turn_count_is_filled_in_when_absent(self) -> None:
        assert parse_conversation(minimal_conversation(3)).metadata.turnCount == 3

    def test_off_list_answers_are_read_as_given_and_reported_by_the_check(self) -> None:
        # SPEC 2.4: reading keeps an off-list answer (score warns and scores it);
        # check_conversation_options is what validate and import report as errors.
        data = mutated(
            lambda d: d.update(
                conversationWideQuestions={"q1_lookingFor": ["A hug"], "q2_emotionClarity": "Very clear", "Q3": "Meh"}
            )
        )
        conversation = parse_conversation(data, "file")
        wide = conversation.conversationWideQuestions
        assert (wide.q1_lookingFor, wide.q2_emotionClarity, wide.q3_modelFit) == (["A hug"], "Very clear", "Meh")
        assert [str(p) for p in check_conversation_options(conversation, "file")] == [
            "file: conversationWideQuestions.q1_lookingFor[0]: 'A hug' is not one of the listed options "
            "for q1_lookingFor",
            "file: conversationWideQuestions.q2_emotionClarity: 'Very clear' is not one of the listed options "
            "for q2_emotionClarity",
            "file: conversationWideQuestions.q3_modelFit: 'Meh' is not one of the listed options for q3_modelFit",
        ]

    def test_listed_options_pass_the_check(self) -> None:
        data = mutated(
            lambda d: d.update(
                conversationWideQuestions={
                    "q1_lookingFor": list(cat.Q1_OPTIONS),
                    "q2_emotionClarity": cat.Q2_OPTIONS[3],
                    "q3_modelFit": cat.Q3_OPTIONS[2],
                }
            )
        )
        assert check_conversation_options(parse_conversation(data, "file"), "file") == []

    def test_options_take_the_listed_spelling_from_variants_and_old_wording(self) -> None:
        data = mutated(
            lambda d: d.update(
                conversationWideQuestions={
                    "q1_lookingFor": [
                        "just listen / let me vent",
                        "To just listen or let me vent",
                        "help me think through options or decide",
                        "to help with something urgent, risky or high-stakes",
                    ],
                    "q2_emotionClarity": " mixed or conflicted ",
                    "q3_modelFit": "",
                    "fourBranchScores": {"Perceiving": 5},
                }
            )
        )
        conversation = parse_conversation(data, "file")
        wide = conversation.conversationWideQuestions
        # case and surrounding spaces are forgiven, and the old wording is mapped; a punctuation
        # variant ("To" added to the old wording, no comma after "risky") is off the list (SPEC 2.4)
        assert wide.q1_lookingFor == [
            "To just listen or let me vent",
            "To help me think through options or make a decision",
            "to help with something urgent, risky or high-stakes",
        ]
        assert (wide.q2_emotionClarity, wide.q3_modelFit) == ("Mixed or conflicted", None)
        assert wide.fourBranchScores == {"perceiving": 5}
        assert [str(p) for p in check_conversation_options(conversation, "file")] == [
            "file: conversationWideQuestions.q1_lookingFor[2]: 'to help with something urgent, risky or high-stakes' "
            "is not one of the listed options for q1_lookingFor"
        ]

    def test_unknown_branch_and_out_of_range_branch_rating(self) -> None:
        data = mutated(lambda d: d.update(conversationWideQuestions={"fourBranchScores": {"empathy": 3}}))
        assert problems_of(data) == [
            "file: conversationWideQuestions.fourBranchScores: "
            "'empathy' is not one of perceiving, facilitating, understanding, managing"
        ]
        data = mutated(lambda d: d.update(conversationWideQuestions={"fourBranchScores": {"managing": 9}}))
        assert problems_of(data) == [
            "file: conversationWideQuestions.fourBranchScores.managing: expected a rating 1-7, got 9"
        ]

    def test_every_problem_is_reported_not_only_the_first(self) -> None:
        def change(d: dict[str, Any]) -> None:
            d["metadata"]["timestamp"] = "soon"
            d["turns"][1]["annotations"]["binaryJudgements"][0]["preferredBehavior"] = "perhaps"
            d["turns"][2]["annotations"]["pairwiseComparisons"][0]["winner"] = "Z"

        assert len(problems_of(mutated(change))) == 3

    @pytest.mark.parametrize("top, name", [([1, 2], "list"), ("text", "str"), (3, "int"), (None, "NoneType")])
    def test_non_object_top_level(self, top: Any, name: str) -> None:
        assert problems_of(top) == [f"file: expected a JSON object at the top level, got {name}"]

    def test_invalid_json(self) -> None:
        with pytest.raises(CanonicalError) as caught:
            load_conversation(b'{"conversationId": ', "file")
        assert [str(p) for p in caught.value.problems] == ["file: not valid JSON: Expecting value at line 1 column 20"]

    def test_non_utf8_bytes(self) -> None:
        with pytest.raises(CanonicalError) as caught:
            load_conversation(b'{"a": "\xff"}', "file")
        assert str(caught.value.problems[0]).startswith("file: not UTF-8 text")


# ---------------------------------------------------------------------------
# EM run output (SPEC 3.2)
# ---------------------------------------------------------------------------


class TestRunOutput:
    def test_a_well_formed_run_is_read_and_normalised(self) -> None:
        run = parse_run(minimal_run())
        assert run.turns[0].em_emotion_tags[0].emotion == "Nervous"
        # One PA item is not a whole side: no total is derived from it.
        assert run.post_conversation.predicted_post_panas.totalPositiveAffect is None
        # Predictions may be free strings: only ground truth must be catalogued.
        assert run.post_conversation.predicted_conversation_wide.q2_emotionClarity == "something free"

    def test_selection_keys_are_normalised_indices(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_pairwise_selections"] = {" 01 ": "response_2", "2": "a"}
        assert parse_run(data).turns[0].em_pairwise_selections == {"1": "B", "2": "A"}

    def test_bad_run_mode(self) -> None:
        data = minimal_run() | {"mode": "fast"}
        assert problems_of(data, parse_run) == [
            "file: mode: expected one of default, verbose, omniscient, verbose_omniscient, got 'fast'"
        ]

    def test_bad_judge_dimension(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_draft_judge_scores"] = {"kindness": 4}
        assert problems_of(data, parse_run) == [
            "file: turns[0].em_draft_judge_scores: 'kindness' is not a judge dimension "
            "(overall_score, emotional_appropriateness, helpfulness, tone_match)"
        ]

    def test_boolean_judge_score_is_rejected_not_read_as_one(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_draft_judge_scores"] = {"tone_match": True}
        assert problems_of(data, parse_run) == [
            "file: turns[0].em_draft_judge_scores: tone_match: expected a score 1-7, got true"
        ]

    @pytest.mark.parametrize("score", [0, 7.5, True, "high"])
    def test_judge_score_out_of_range_or_not_a_number(self, score: Any) -> None:
        data = minimal_run()
        data["turns"][0]["em_draft_judge_scores"] = {"tone_match": score}
        (problem,) = problems_of(data, parse_run)
        assert problem.startswith("file: turns[0].em_draft_judge_scores")

    def test_bad_panas_strategy(self) -> None:
        data = minimal_run()
        data["post_conversation"]["panas_strategy"] = "guess"
        assert problems_of(data, parse_run) == [
            "file: post_conversation.panas_strategy: expected one of absolute, delta, blind_delta, got 'guess'"
        ]

    def test_bad_selection_key_and_binary_value(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_pairwise_selections"] = {"first": "A"}
        data["turns"][0]["em_binary_om_assessment"] = {"B1": "maybe"}
        assert problems_of(data, parse_run) == [
            "file: turns[0].em_binary_om_assessment.B1: expected yes/no/na, got 'maybe'",
            "file: turns[0].em_pairwise_selections: expected a comparison index such as '0', got 'first'",
        ]

    def test_answers_in_canonical_spelling_are_kept_and_others_normalised_in_one_object(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_binary_om_assessment"] = {"B1": "yes", "B2": None, "B3": "na"}
        data["turns"][0]["em_binary_human_prediction"] = {"B1": "yes", "B2": "Y", "B3": True, "B4": 0}
        data["turns"][0]["em_draft_binary_assessment"] = {"B1": "no", "B2": " N/A "}
        turn = parse_run(data, "file").turns[0]
        assert turn.em_binary_om_assessment == {"B1": "yes", "B2": None, "B3": "na"}
        assert turn.em_binary_human_prediction == {"B1": "yes", "B2": "yes", "B3": "yes", "B4": "no"}
        assert turn.em_draft_binary_assessment == {"B1": "no", "B2": "na"}

    def test_a_bad_answer_among_canonical_ones_is_named_by_its_path(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_binary_human_prediction_hp"] = {"B1": "yes", "B2": ["yes"], "B3": "no"}
        data["turns"][0]["em_draft_binary_assessment"] = {"B1": "yes", "B2": "perhaps"}
        assert problems_of(data, parse_run) == [
            'file: turns[0].em_binary_human_prediction_hp.B2: expected yes/no/na, got ["yes"]',
            "file: turns[0].em_draft_binary_assessment.B2: expected yes/no/na, got 'perhaps'",
        ]

    def test_answers_that_are_not_an_object_are_refused(self) -> None:
        data = minimal_run()
        data["turns"][0]["em_binary_om_assessment"] = ["yes", "no"]
        (problem,) = problems_of(data, parse_run)
        assert problem.startswith("file: turns[0].em_binary_om_assessment: ")

    def test_duplicate_run_turns(self) -> None:
        data = minimal_run()
        data["turns"].append(copy.deepcopy(data["turns"][0]))
        assert problems_of(data, parse_run) == ["file: turns: turn number 1 appears twice"]

    def test_run_detection(self) -> None:
        assert looks_like_run(minimal_run())
        assert not looks_like_run(minimal_conversation())
        assert not looks_like_run([minimal_run()])

    def test_load_run_from_bytes(self) -> None:
        assert load_run(json.dumps(minimal_run()).encode(), "f").em_model == "em/y"


# ---------------------------------------------------------------------------
# Writing: one byte-stable spelling
# ---------------------------------------------------------------------------


class TestCanonicalText:
    def test_dump_parse_dump_is_byte_stable(self) -> None:
        data = minimal_conversation()
        data["turns"][0]["annotations"]["binaryJudgements"][0]["observedBehavior"] = True
        data["prePanas"] = {"items": {"proud": 4}}
        first = dumps_canonical(parse_conversation(data))
        second = dumps_canonical(load_conversation(first))
        assert first == second
        assert first.endswith("}\n") and '\n  "conversationId"' in first

    def test_run_dump_is_byte_stable(self) -> None:
        first = dumps_canonical(parse_run(minimal_run()))
        assert dumps_canonical(load_run(first)) == first

    def test_jsonl_line_is_compact_and_single_line(self) -> None:
        line = dumps_line(parse_conversation(minimal_conversation()))
        assert "\n" not in line and json.loads(line)["conversationId"] == "c-1"

    def test_timestamps(self) -> None:
        moment = parse_timestamp("2025-03-01T10:00:00")
        assert moment.tzinfo is not None
        assert format_timestamp(moment) == "2025-03-01T10:00:00Z"
        assert format_timestamp(parse_timestamp("2025-03-01T12:00:00+02:00")) == "2025-03-01T10:00:00Z"

    def test_location_formatting(self) -> None:
        assert (
            format_location(("turns", 3, "annotations", "binaryJudgements", 2))
            == "turns[3].annotations.binaryJudgements[2]"
        )

    def test_model_class_is_exported(self) -> None:
        assert isinstance(parse_conversation(minimal_conversation()), ConversationFile)
