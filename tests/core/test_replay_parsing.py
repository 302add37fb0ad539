"""Lenient JSON extraction and per-call validation of EM replies (SPEC 4)."""

from __future__ import annotations

import asyncio

import pytest

from attunebench import catalogue as cat
from attunebench.replay import prompts as P
from attunebench.replay.parsing import (
    ParseRetriesExhausted,
    ReplyParseError,
    ask_until_valid,
    extract_json,
    parse_analysis,
    parse_judge,
    parse_pairwise,
    parse_post,
    parse_reply,
    repair_json_text,
)


@pytest.mark.parametrize(
    "text",
    [
        '{"response": "hi"}',
        '  \n{"response": "hi"}\n',
        'Sure! Here it is:\n```json\n{"response": "hi"}\n```\nAnything else?',
        '```\n{"response": "hi"}\n```',
        'My answer is {"response": "hi"} and that is final.',
        '{"response": "hi",}',
    ],
)
def test_every_reply_shape_yields_the_object(text):
    assert extract_json(text) == {"response": "hi"}


def test_unescaped_newlines_and_tabs_inside_strings_are_repaired():
    text = '{"response": "line one\nline two\tend", "n": 1}'
    assert extract_json(text) == {"response": "line one\nline two\tend", "n": 1}
    # Newlines between tokens are whitespace and stay as they are.
    assert repair_json_text('{\n"a": "x\ny"\n}') == '{\n"a": "x\\ny"\n}'


def test_braces_and_commas_inside_strings_survive():
    text = 'prose {"response": "use {curly} braces, ]like this,}", "x": [1, 2,]} prose'
    assert extract_json(text) == {"response": "use {curly} braces, ]like this,}", "x": [1, 2]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        (None, "empty"),
        ("I cannot answer that.", "no JSON object"),
        ('{"response": "cut off', "cut off"),
        ('{"response": "cut off", "x": ', "cut off"),
        ('{"a": }', "could not be parsed"),
        ("[1, 2, 3]", "no JSON object"),
    ],
)
def test_unusable_replies_raise_with_a_reason(text, message):
    with pytest.raises(ReplyParseError, match=message):
        extract_json(text)


def test_analysis_keeps_only_panas_emotions_and_normalises_intensity():
    answer = parse_analysis(
        {
            P.KEY_TAGS: [
                {"emotion": "upset", "intensity": "intense"},
                {"emotion": "Sadness", "intensity": 4},
                {"emotion": "Nervous", "intensity": 9.4},
                "hostile",
                {"emotion": "UPSET", "intensity": 1},
            ],
            P.KEY_OM: {"B1": "Yes", "b13": True, "B99": "yes"},
            P.KEY_HUMAN: {"B1": "n/a", "B13": "no"},
        },
        ("B1", "B13"),
        verbose=False,
    )
    assert answer.emotion_tags == [
        {"emotion": "Upset", "intensity": 6},
        {"emotion": "Nervous", "intensity": 7},
        {"emotion": "Hostile", "intensity": None},
    ]
    assert answer.om == {"B1": "yes", "B13": "yes"}  # B99 was not asked and is dropped
    assert answer.human == {"B1": "na", "B13": "no"}


def test_analysis_accepts_a_mapping_of_tags_and_an_empty_list():
    answer = parse_analysis({P.KEY_TAGS: {"Proud": 3}}, (), verbose=False)
    assert answer.emotion_tags == [{"emotion": "Proud", "intensity": 3}]
    assert parse_analysis({P.KEY_TAGS: []}, (), verbose=False).emotion_tags == []


def test_missing_or_invalid_binary_answers_are_rejected():
    with pytest.raises(ReplyParseError, match="no answer for B13"):
        parse_analysis(
            {P.KEY_TAGS: [], P.KEY_OM: {"B1": "yes"}, P.KEY_HUMAN: {"B1": "yes", "B13": "no"}}, ("B1", "B13"), False
        )
    with pytest.raises(ReplyParseError, match="must be yes/no/na"):
        parse_analysis({P.KEY_TAGS: [], P.KEY_OM: {"B1": "maybe"}, P.KEY_HUMAN: {"B1": "yes"}}, ("B1",), False)
    with pytest.raises(ReplyParseError, match='"binary_human_prediction" field is missing'):
        parse_analysis({P.KEY_TAGS: [], P.KEY_OM: {"B1": "yes"}}, ("B1",), False)


def test_pairwise_accepts_letters_response_numbers_and_lists():
    assert parse_pairwise({"selections": {"0": "a", "1": "response_2"}}, (0, 1), False).selections == {
        "0": "A",
        "1": "B",
    }
    assert parse_pairwise({"selections": ["B", "A"]}, (0, 1), False).selections == {"0": "B", "1": "A"}
    with pytest.raises(ReplyParseError, match="comparison 1"):
        parse_pairwise({"selections": {"0": "A"}}, (0, 1), False)
    with pytest.raises(ReplyParseError, match='must be "A" or "B"'):
        parse_pairwise({"selections": {"0": "C"}}, (0,), False)


def test_judge_scores_must_cover_every_dimension_in_range():
    scores = dict.fromkeys(cat.JUDGE_DIMENSIONS, 5)
    answer = parse_judge(
        {"scores": {**scores, "tone_match": "6.5"}, "binary_assessment": {"B1": "yes"}}, ("B1",), False
    )
    assert answer.scores["tone_match"] == 6.5 and answer.binary == {"B1": "yes"}
    with pytest.raises(ReplyParseError, match="1-7"):
        parse_judge({"scores": {**scores, "helpfulness": 9}}, (), False)
    with pytest.raises(ReplyParseError, match="no tone_match"):
        parse_judge({"scores": dict.fromkeys(cat.JUDGE_DIMENSIONS[:3], 4)}, (), False)


def test_the_judge_answers_yes_or_no_and_rates_only_against_a_golden_reply():
    scores = dict.fromkeys(cat.JUDGE_DIMENSIONS, 5)
    # SPEC 3.2 allows only yes|no in em_draft_binary_assessment.
    with pytest.raises(ReplyParseError, match="must be yes/no, got 'n/a'"):
        parse_judge({"scores": scores, "binary_assessment": {"B1": "n/a"}}, ("B1",), False)
    # No golden reply: no ratings were asked for, so none are read (or needed).
    unrated = parse_judge({"binary_assessment": {"B1": "no"}}, ("B1",), False, rated=False)
    assert unrated.scores is None and unrated.binary == {"B1": "no"}


def test_missing_answer_fields_are_errors_not_empty_predictions():
    # An absent list or option would otherwise score as the model's prediction.
    with pytest.raises(ReplyParseError, match='"emotion_tags" field is missing'):
        parse_analysis({P.KEY_OM: {}, P.KEY_HUMAN: {}}, (), False)
    for field in ("q1_lookingFor", "q2_emotionClarity", "q3_modelFit"):
        answer = _post()
        del answer[field]
        with pytest.raises(ReplyParseError, match=f'"{field}" field is missing'):
            parse_post(answer, "absolute", False)
    # Saying "none" explicitly is an answer.
    assert parse_post(_post(q2_emotionClarity=None), "absolute", False).conversation_wide["q2_emotionClarity"] is None


def _post(**overrides):
    answer = {
        "post_panas": {item.lower(): 4 for item in cat.PANAS_ITEMS},
        "q1_lookingFor": ["just listen / let me vent", "something unknown"],
        "q2_emotionClarity": "The answer is: Mixed or conflicted",
        "q3_modelFit": "Mostly well-matched",
        "q3_followUp_whatFeltOff": "Too generic",
        "fourBranchScores": {"Perceiving": 5, "facilitating": 4, "understanding": "3", "managing": 2.6},
    }
    answer.update(overrides)
    return answer


def test_post_conversation_answers_are_matched_to_catalogued_options():
    answer = parse_post(_post(), "absolute", False)
    assert answer.panas["Proud"] == 4 and len(answer.panas) == 20 and not answer.is_change
    wide = answer.conversation_wide
    assert wide["q1_lookingFor"] == ["To just listen or let me vent"]
    assert wide["q2_emotionClarity"] == "Mixed or conflicted"
    assert wide["q3_followUp_whatFeltOff"] == ["Too generic"]
    assert wide["fourBranchScores"] == {"perceiving": 5, "facilitating": 4, "understanding": 3, "managing": 3}


def test_post_conversation_rejects_incomplete_or_out_of_range_answers():
    with pytest.raises(ReplyParseError, match="missing Proud"):
        parse_post(_post(post_panas={"Alert": 3}), "absolute", False)
    with pytest.raises(ReplyParseError, match='"panas_change" field is missing'):
        parse_post(_post(), "delta", False)
    with pytest.raises(ReplyParseError, match="-6-6"):
        parse_post(_post(panas_change=dict.fromkeys(cat.PANAS_ITEMS, 9)), "blind_delta", False)
    with pytest.raises(ReplyParseError, match="q3_modelFit"):
        parse_post(_post(q3_modelFit="fantastic"), "absolute", False)
    changes = parse_post(_post(panas_change=dict.fromkeys(cat.PANAS_ITEMS, -2)), "delta", False)
    assert changes.is_change and changes.panas["Upset"] == -2


def test_verbose_answers_need_reasoning():
    ctx = P.CallContext(
        call_type=P.DRAFT,
        conversation_id="c",
        category="Work",
        subtopic="x",
        mode="verbose",
        turns=(P.VisibleTurn(1, "hi", None),),
        turn_number=1,
    )
    with pytest.raises(ReplyParseError, match="reasoning"):
        parse_reply(ctx, '{"response": "hello"}')
    assert parse_reply(ctx, '{"reasoning": "because", "response": "hello"}').reasoning == "because"


def test_ask_until_valid_retries_with_the_error_then_gives_up():
    replies = iter(["nonsense", '{"response": ""}', '{"response": "fine"}'])
    sent: list[list[dict[str, str]]] = []

    async def send(messages):
        sent.append(messages)
        return next(replies)

    def parse(text):
        obj = extract_json(text)
        if not obj.get("response"):
            raise ReplyParseError("empty response")
        return obj["response"]

    base = [{"role": "user", "content": "draft please"}]
    result = asyncio.run(ask_until_valid(base, send, lambda t: t, parse, attempts=3))
    assert result.value == "fine" and len(result.completions) == 3
    assert result.errors == ["the reply contains no JSON object", "empty response"]
    assert sent[0] == base and sent[2][:1] == base and sent[2][-2]["content"] == '{"response": ""}'

    async def always_bad(messages):
        return "nope"

    with pytest.raises(ParseRetriesExhausted) as failure:
        asyncio.run(ask_until_valid(base, always_bad, lambda t: t, parse, attempts=2))
    assert len(failure.value.completions) == 2


def test_every_problem_of_a_reply_is_named_at_once():
    # The retry shows the model all that was wrong, not just the first field.
    with pytest.raises(ReplyParseError) as failure:
        parse_analysis({P.KEY_TAGS: "Upset", P.KEY_OM: {"B1": "maybe"}}, ("B1",), False)
    assert str(failure.value) == (
        '"emotion_tags" must be a list of {"emotion", "intensity"} objects; '
        "\"binary_om_assessment\".B1 must be yes/no/na, got 'maybe'; "
        'the "binary_human_prediction" field is missing'
    )
