"""The seeded generator: deterministic, schema-valid, fast, and skill-separable."""

from __future__ import annotations

from pathlib import Path

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import dumps_canonical, load_conversation, load_run
from attunebench.synth import synth_conversations, synth_run, write_documents


def test_same_seed_gives_identical_bytes_and_other_seeds_differ() -> None:
    first = [dumps_canonical(c) for c in synth_conversations(20, seed=5)]
    again = [dumps_canonical(c) for c in synth_conversations(20, seed=5)]
    other = [dumps_canonical(c) for c in synth_conversations(20, seed=6)]
    assert first == again
    assert first != other


def test_a_conversation_does_not_depend_on_how_many_are_generated() -> None:
    few = synth_conversations(3, seed=9)
    chunk = synth_conversations(2, seed=9, start=1)
    assert [dumps_canonical(c) for c in few[1:]] == [dumps_canonical(c) for c in chunk]


def test_conversations_are_valid_varied_and_marked_synthetic() -> None:
    convs = synth_conversations(200, seed=1, min_turns=2, max_turns=5)
    assert [c.conversationId for c in convs] == [f"synth-1-{i}" for i in range(200)]
    assert len({c.metadata.category for c in convs}) == len(cat.TOPIC_CATEGORIES)
    values = set()
    winners = set()
    for conv in convs:
        assert conv.model_dump()["metadata"]["synthetic"] is True
        assert 2 <= len(conv.turns) == conv.metadata.turnCount <= 5
        # The canonical text re-reads to the same document.
        assert dumps_canonical(load_conversation(dumps_canonical(conv))) == dumps_canonical(conv)
        for turn in conv.turns:
            for j in turn.annotations.binaryJudgements:
                values.add(j.observedBehavior)
                if j.questionId == "B13":
                    assert j.observedBehavior == ("yes" if "?" in turn.llmResponse else "no")
            winners.update(c.winner for c in turn.annotations.pairwiseComparisons)
            assert turn.annotations.selectedPairwiseQuestions == [
                c.questionId for c in turn.annotations.pairwiseComparisons
            ]
    assert values == {"yes", "no", "na", None}
    assert winners == {"A", "B", None}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        synth_conversations(1, seed=0, min_turns=5, max_turns=3)
    conv = synth_conversations(1, seed=0)[0]
    with pytest.raises(ValueError):
        synth_run(conv, "em", "default", seed=0, skill=1.5)
    with pytest.raises(ValueError):
        synth_run(conv, "em", "default", seed=0, drop_rate=1.0)


def test_runs_are_valid_deterministic_and_cover_every_turn_without_drops() -> None:
    conv = synth_conversations(1, seed=2, min_turns=6, max_turns=6)[0]
    run = synth_run(conv, "em/fake", "verbose", seed=3, skill=0.7)
    assert dumps_canonical(run) == dumps_canonical(synth_run(conv, "em/fake", "verbose", seed=3, skill=0.7))
    assert dumps_canonical(load_run(dumps_canonical(run))) == dumps_canonical(run)
    assert [t.turnNumber for t in run.turns] == [t.turnNumber for t in conv.turns]
    for gt, pred in zip(conv.turns, run.turns, strict=True):
        asked = {j.questionId for j in gt.annotations.binaryJudgements}
        for answers in (
            pred.em_binary_om_assessment,
            pred.em_binary_human_prediction,
            pred.em_binary_om_assessment_hp,
            pred.em_binary_human_prediction_hp,
        ):
            assert set(answers) == asked
        assert set(pred.em_pairwise_selections) == {str(i) for i in range(len(gt.annotations.pairwiseComparisons))}
        assert pred.em_drafted_response and set(pred.em_draft_judge_scores) == set(cat.JUDGE_DIMENSIONS)
    post = run.post_conversation
    assert post.panas_strategy == "absolute" and len(post.predicted_post_panas.items) == 20


def test_drop_rate_leaves_turns_out() -> None:
    convs = synth_conversations(30, seed=4, min_turns=8, max_turns=8)
    kept = sum(len(synth_run(c, "em", "default", seed=1, drop_rate=0.5).turns) for c in convs)
    assert 60 < kept < 180  # about half of 240


def _agreement(skill: float) -> float:
    """Share of scorable OM binary targets the fake EM gets right (SPEC 5.1 targets)."""
    right = total = 0
    for conv in synth_conversations(60, seed=11):
        run = synth_run(conv, "em", "default", seed=1, skill=skill)
        for gt, pred in zip(conv.turns, run.turns, strict=True):
            for j in gt.annotations.binaryJudgements:
                target = j.observedBehavior or j.llmValue
                if target in ("yes", "no"):
                    total += 1
                    right += pred.em_binary_om_assessment[j.questionId] == target
    return right / total


def test_higher_skill_agrees_more_with_ground_truth() -> None:
    low, mid, high = _agreement(0.0), _agreement(0.5), _agreement(1.0)
    # Random yes/no agrees half the time; skill p gives p + (1 - p)/2.
    assert abs(low - 0.5) < 0.05 and abs(mid - 0.75) < 0.05 and high == 1.0


def test_write_documents_writes_one_canonical_file_each(tmp_path: Path) -> None:
    convs = synth_conversations(3, seed=8)
    runs = [synth_run(c, "om/em:1", "default", seed=8) for c in convs]
    paths = write_documents(convs + runs, tmp_path / "out")
    assert len(paths) == 6 and len(set(paths)) == 6
    assert (tmp_path / "out" / "synth-8-0.json").read_text() == dumps_canonical(convs[0])
    assert (tmp_path / "out" / "synth-8-0__om_em_1__default.json").exists()
    with pytest.raises(TypeError):
        write_documents([object()], tmp_path)  # type: ignore[list-item]


def test_a_scale_set_is_generated_whole() -> None:
    # 200 conversations x 10 turns, as the scale tests use; how fast is bench/synth_speed.py's business.
    convs = synth_conversations(200, seed=3, min_turns=10, max_turns=10)
    assert len({c.conversationId for c in convs}) == 200
    assert sum(len(c.turns) for c in convs) == 2000
