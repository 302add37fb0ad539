"""Files in the benchmark's own format score exactly like the same data in canonical form.

The benchmark's own tools write older key names (SPEC 3.1) and this platform's
old exports hold the previous option wording (SPEC 2.4). Here the sample data
and seeded runs are rewritten into that shape (every older key name used at
least once, old wording, case variants, PANAS items outside ``items``), then
validated and scored beside the canonical originals: everything must agree.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from attunebench import catalogue as cat
from attunebench.canonical import dumps_canonical, parse_conversation, parse_run
from attunebench.metrics import ScoringReport, score_documents
from attunebench.synth import synth_runs
from datasets.management.commands.validate import check_paths

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = ROOT / "sample_data"
OLD_WORDING = {listed: old for old, listed in cat.LEGACY_OPTION_ALIASES.items()}
OBSERVED_NAMES = ("did_occur", "humanValue", "actualValue")
PREFERRED_NAMES = ("should_occur", "humanPreference")


def _old_option(value: str, i: int) -> str:
    """The previous wording where there is one; otherwise a case variant."""
    if value in OLD_WORDING and i % 2 == 0:
        return OLD_WORDING[value]
    return value.upper() if i % 2 else value.lower()


def _old_panas(panas: dict[str, Any] | None, i: int) -> dict[str, Any] | None:
    if panas is None:
        return None
    out = {k: v for k, v in panas.items() if k != "items"}
    items = {name.lower() if n % 2 else name.upper(): str(v) for n, (name, v) in enumerate(panas["items"].items())}
    if i % 2:
        out["responses"] = items
    else:
        out.update(items)
    return out


def _old_wide(wide: dict[str, Any] | None, i: int) -> dict[str, Any] | None:
    if wide is None:
        return None
    out = {k: v for k, v in wide.items() if k not in ("q1_lookingFor", "q2_emotionClarity", "q3_modelFit")}
    out["Q1"] = [_old_option(v, i + n) for n, v in enumerate(wide["q1_lookingFor"])]
    out["Q2"] = None if wide["q2_emotionClarity"] is None else _old_option(wide["q2_emotionClarity"], i + 1)
    out["Q3"] = None if wide["q3_modelFit"] is None else _old_option(wide["q3_modelFit"], i)
    return out


def benchmark_conversation(canonical: dict[str, Any], i: int) -> dict[str, Any]:
    """The conversation as the benchmark's own tools (and old exports) write it."""
    data = copy.deepcopy(canonical)
    data["prePanas"] = _old_panas(data["prePanas"], i)
    data["postPanas"] = _old_panas(data["postPanas"], i + 1)
    data["conversationWideQuestions"] = _old_wide(data["conversationWideQuestions"], i)
    for t, turn in enumerate(data["turns"]):
        ann = turn["annotations"]
        judgements = []
        for n, j in enumerate(ann["binaryJudgements"]):
            old = {"questionId": j["questionId"], "llmValue": j["llmValue"]}
            old[OBSERVED_NAMES[(i + t + n) % 3]] = j["observedBehavior"]
            old[PREFERRED_NAMES[(i + t + n) % 2]] = j["preferredBehavior"]
            judgements.append(old)
        ann["binaryJudgements"] = judgements
        if ann["alternateResponses"] is not None:
            alt = ann["alternateResponses"]
            ann["alternateResponses"] = {"alternate1": alt["llmImproved"], "alternate2": alt["humanEdited"]}
        ann["pairwiseComparisons"] = [
            {
                "questionId": c["questionId"],
                "response_1": c["responseA"],
                "response_2": c["responseB"],
                "winner": {"A": "response_1", "B": "response_2", None: None}[c["winner"]],
            }
            for c in ann["pairwiseComparisons"]
        ]
    return data


def benchmark_run(canonical: dict[str, Any], i: int) -> dict[str, Any]:
    data = copy.deepcopy(canonical)
    post = data.get("post_conversation")
    if post is not None:
        post["predicted_post_panas"] = _old_panas(post["predicted_post_panas"], i)
        post["predicted_conversation_wide"] = _old_wide(post["predicted_conversation_wide"], i + 1)
    return data


@pytest.fixture(scope="module")
def both_forms() -> dict[str, list[dict[str, Any]]]:
    conversations = [json.loads(p.read_text()) for p in sorted(SAMPLE_DIR.glob("*.json"))]
    parsed = [parse_conversation(c) for c in conversations]
    runs = [json.loads(dumps_canonical(r)) for r in synth_runs(parsed, "em/x", "default", seed=5, skill=0.6)]
    runs += [json.loads(dumps_canonical(r)) for r in synth_runs(parsed, "em/y", "verbose", seed=6, skill=0.3)]
    return {
        "conversations": conversations,
        "runs": runs,
        "old_conversations": [benchmark_conversation(c, i) for i, c in enumerate(conversations)],
        "old_runs": [benchmark_run(r, i) for i, r in enumerate(runs)],
    }


def test_the_rewrite_really_uses_every_older_name(both_forms: dict[str, list[dict[str, Any]]]) -> None:
    text = json.dumps(both_forms["old_conversations"]) + json.dumps(both_forms["old_runs"])
    for name in (*OBSERVED_NAMES, *PREFERRED_NAMES, "alternate1", "alternate2", "response_1", "response_2"):
        assert f'"{name}"' in text, name
    for name in (
        '"Q1"',
        '"Q2"',
        '"Q3"',
        '"responses"',
        '"afraid"',
        '"ACTIVE"',
        *(json.dumps(old) for old in cat.LEGACY_OPTION_ALIASES),
    ):
        assert name in text, name
    assert '"observedBehavior"' not in json.dumps(both_forms["old_conversations"])


def test_old_format_reads_to_the_same_canonical_documents(both_forms: dict[str, list[dict[str, Any]]]) -> None:
    for canonical, old in zip(both_forms["conversations"], both_forms["old_conversations"], strict=True):
        assert dumps_canonical(parse_conversation(old)) == dumps_canonical(parse_conversation(canonical))
    for canonical, old in zip(both_forms["runs"], both_forms["old_runs"], strict=True):
        assert dumps_canonical(parse_run(old)) == dumps_canonical(parse_run(canonical))


def test_old_format_scores_identically(both_forms: dict[str, list[dict[str, Any]]]) -> None:
    def score(conversations: str, runs: str) -> ScoringReport:
        return score_documents(
            [parse_conversation(c) for c in both_forms[conversations]],
            [parse_run(r) for r in both_forms[runs]],
            include_details=True,
        )

    canonical = score("conversations", "runs")
    assert len(canonical.conversations) == 2 * len(both_forms["conversations"])
    assert score("old_conversations", "old_runs") == canonical
    assert score("old_conversations", "runs") == canonical


def test_old_format_validates_and_the_score_command_takes_it_without_warnings(
    both_forms: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    for name in ("old_conversations", "old_runs"):
        for i, doc in enumerate(both_forms[name]):
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / f"{i:03d}.json").write_text(json.dumps(doc))
    checked, valid, problems = check_paths([str(tmp_path)])
    assert (checked, valid, problems) == (checked, checked, [])
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "score",
        "--conversations",
        str(tmp_path / "old_conversations"),
        "--runs",
        str(tmp_path / "old_runs"),
        stdout=out,
        stderr=err,
    )
    assert err.getvalue() == ""
    assert f"Scored {len(both_forms['runs'])} runs" in out.getvalue()


def test_off_list_answers_are_warned_and_scored_by_score_but_errors_for_validate(
    both_forms: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    conversation = copy.deepcopy(both_forms["conversations"][0])
    conversation["conversationWideQuestions"]["q2_emotionClarity"] = "Crystal clear"
    run = copy.deepcopy(next(r for r in both_forms["runs"] if r["conversationId"] == conversation["conversationId"]))
    run["post_conversation"]["predicted_conversation_wide"]["q3_modelFit"] = "Fine I guess"
    (tmp_path / "conversation.json").write_text(json.dumps(conversation))
    (tmp_path / "run.json").write_text(json.dumps(run))

    out, err = io.StringIO(), io.StringIO()
    # no CommandError: exit status 0, since nothing else is wrong (SPEC 2.4)
    call_command(
        "score",
        "--conversations",
        str(tmp_path / "conversation.json"),
        "--runs",
        str(tmp_path / "run.json"),
        "--json",
        str(tmp_path / "report.json"),
        stdout=out,
        stderr=err,
    )
    assert err.getvalue().splitlines() == [
        f"warning: {tmp_path}/conversation.json: conversationWideQuestions.q2_emotionClarity: 'Crystal clear' is not "
        "one of the listed options for q2_emotionClarity (scored: it matches no other answer)",
        f"warning: {tmp_path}/run.json: post_conversation.predicted_conversation_wide.q3_modelFit: 'Fine I guess' is "
        "not one of the listed options for q3_modelFit (scored: it matches no other answer)",
    ]
    assert "Scored 1 runs against 1 conversations; 0 input(s) skipped." in out.getvalue()
    record = json.loads((tmp_path / "report.json").read_text())["conversations"][0]
    # an off-list string matches nothing else: Q2 and Q3 exact match 0, Q3 ordinal distance "one unknown" = 3
    assert (record["q2_emotion_clarity_match"], record["q3_model_fit_match"]) == (0.0, 0.0)
    assert record["q3_model_fit_ordinal_distance"] == 3

    checked, valid, problems = check_paths([str(tmp_path / "conversation.json"), str(tmp_path / "run.json")])
    assert (checked, valid) == (2, 1)
    assert [str(p) for p in problems] == [
        f"{tmp_path}/conversation.json: conversationWideQuestions.q2_emotionClarity: 'Crystal clear' is not one of "
        "the listed options for q2_emotionClarity"
    ]


def test_a_prediction_that_differs_from_a_listed_string_beyond_case_matches_nothing(
    both_forms: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    # SPEC 2.4: answers are compared case-insensitively and nothing more, so a run file's punctuation
    # variant is off the list (only the replay parser forgives a model's wording before writing the file)
    conversation = copy.deepcopy(both_forms["conversations"][0])
    wide = conversation["conversationWideQuestions"]
    wide.update(q2_emotionClarity="Implied or indirect", q3_modelFit="Mostly well-matched")
    run = copy.deepcopy(next(r for r in both_forms["runs"] if r["conversationId"] == conversation["conversationId"]))
    predicted = run["post_conversation"]["predicted_conversation_wide"]
    predicted.update(q2_emotionClarity="implied, or indirect", q3_modelFit="MOSTLY WELL MATCHED")
    (tmp_path / "conversation.json").write_text(json.dumps(conversation))
    (tmp_path / "run.json").write_text(json.dumps(run))

    out, err = io.StringIO(), io.StringIO()
    report = tmp_path / "report.json"
    call_command(
        "score", "--conversations", str(tmp_path / "conversation.json"), "--runs", str(tmp_path / "run.json"),
        "--json", str(report), stdout=out, stderr=err,
    )  # fmt: skip
    assert err.getvalue().splitlines() == [
        f"warning: {tmp_path}/run.json: post_conversation.predicted_conversation_wide.q2_emotionClarity: "
        "'implied, or indirect' is not one of the listed options for q2_emotionClarity (scored: it matches no "
        "other answer)",
        f"warning: {tmp_path}/run.json: post_conversation.predicted_conversation_wide.q3_modelFit: "
        "'MOSTLY WELL MATCHED' is not one of the listed options for q3_modelFit (scored: it matches no other answer)",
    ]
    record = json.loads(report.read_text())["conversations"][0]
    # off the list: Q2 and Q3 exact match 0, and Q3's ordinal distance is "one unknown" = 3 (not 0)
    assert (record["q2_emotion_clarity_match"], record["q3_model_fit_match"]) == (0.0, 0.0)
    assert record["q3_model_fit_ordinal_distance"] == 3

    # the same answers in the listed strings' own words, upper-cased, are the same answers
    predicted.update(q2_emotionClarity="IMPLIED OR INDIRECT", q3_modelFit="mostly well-matched")
    (tmp_path / "run.json").write_text(json.dumps(run))
    err = io.StringIO()
    call_command(
        "score", "--conversations", str(tmp_path / "conversation.json"), "--runs", str(tmp_path / "run.json"),
        "--json", str(report), stdout=out, stderr=err,
    )  # fmt: skip
    assert err.getvalue() == ""
    record = json.loads(report.read_text())["conversations"][0]
    assert (record["q2_emotion_clarity_match"], record["q3_model_fit_match"]) == (1.0, 1.0)
    assert record["q3_model_fit_ordinal_distance"] == 0


def test_the_replay_parser_matches_an_em_answer_to_the_listed_options_tolerantly() -> None:
    from attunebench.replay.parsing import parse_post

    answer = {
        "post_panas": dict.fromkeys(cat.PANAS_ITEMS, 4),
        # case, punctuation, a missing leading "To", and this platform's old wording
        "q1_lookingFor": [
            "just listen, or let me vent",
            "Help with something urgent risky or high stakes",
            "Help me think through options or decide",
        ],
        "q2_emotionClarity": "unclear/evolving as I talked",
        "q3_modelFit": "mixed - some good moments - some misses",
        "q3_followUp_whatFeltOff": [],
        "fourBranchScores": dict.fromkeys(cat.FOUR_BRANCHES, 4),
    }
    wide = parse_post(answer, "absolute", False).conversation_wide
    assert wide["q1_lookingFor"] == [
        "To just listen or let me vent",
        "To help with something urgent, risky, or high-stakes",
        "To help me think through options or make a decision",
    ]
    assert wide["q2_emotionClarity"] == "Unclear / evolving as I talked"
    assert wide["q3_modelFit"] == "Mixed, some good moments, some misses"
