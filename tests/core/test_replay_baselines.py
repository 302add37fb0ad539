"""Offline baselines: valid, scorer-readable outputs through the same protocol; honest heuristics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import load_run
from attunebench.metrics import score_documents
from attunebench.replay import prompts as P
from attunebench.replay.baselines import BASELINE_NAMES, LexiconBaseline, PriorBaseline, detect_emotions, make_baseline
from attunebench.replay.llm import spec_from_name
from attunebench.replay.protocol import ReplayConfig, Replayer
from attunebench.replay.run import make_replayer, write_outputs
from attunebench.sources import read_conversations
from attunebench.synth import synth_conversations
from devtools.replay_fixtures import RecordingBackend, context_json, marked_conversation, user_marker

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


def run_baseline(name, conversations, **config):
    replayer = make_replayer(spec_from_name(name), ReplayConfig(**config), dataset=conversations)
    return asyncio.run(replayer.replay_many(conversations))


@pytest.mark.parametrize("name", BASELINE_NAMES)
@pytest.mark.parametrize("mode", cat.MODES)
def test_baselines_write_valid_runs_that_the_scorer_reads(name, mode, tmp_path):
    conversations = synth_conversations(6, seed=5)
    results = run_baseline(
        name, conversations, mode=mode, panas_strategy="delta", judge=spec_from_name("baseline:lexicon")
    )
    assert all(r.failures == [] for r in results)
    paths = write_outputs(results, tmp_path)
    runs = [load_run(p.read_bytes(), str(p)) for p in paths]
    assert [r.em_model for r in runs] == [name] * 6 and {r.mode for r in runs} == {mode}
    for run, conversation in zip(runs, conversations, strict=True):
        assert [t.turnNumber for t in run.turns] == [t.turnNumber for t in conversation.turns]
        assert run.api_cost == 0.0 and run.prompt_version == P.PROMPT_VERSION
    report = score_documents(conversations, runs)
    assert len(report.conversations) == 6
    row = report.aggregates[0]
    assert row.em_model == name and row.mode == mode
    assert all(c.coverage == 1 for c in report.conversations)


def test_baselines_score_sample_data():
    found, problems = read_conversations([SAMPLE_DATA])
    conversations = [c for _, c in found]
    assert conversations and not problems
    composites = {}
    for name in BASELINE_NAMES:
        results = run_baseline(name, conversations)
        report = score_documents(conversations, [r.output for r in results])
        composites[name] = report.aggregates[0].composite_score
    assert all(0 <= value <= 100 for value in composites.values())


def test_random_baseline_is_seeded_and_order_independent():
    conversations = synth_conversations(4, seed=8)
    first = run_baseline("baseline:random", conversations)
    second = run_baseline("baseline:random", list(reversed(conversations)))
    by_id = {r.conversation_id: r.output.model_dump(exclude={"run_timestamp", "duration_seconds"}) for r in second}
    for result in first:
        assert result.output.model_dump(exclude={"run_timestamp", "duration_seconds"}) == by_id[result.conversation_id]


def test_prior_baseline_never_learns_from_the_conversation_it_predicts():
    conversations = synth_conversations(5, seed=11)
    target = conversations[0]
    flipped = target.model_copy(deep=True)
    for turn in flipped.turns:
        for judgement in turn.annotations.binaryJudgements:
            judgement.observedBehavior = "no" if judgement.observedBehavior == "yes" else "yes"
            judgement.preferredBehavior = "no" if judgement.preferredBehavior == "yes" else "yes"
        turn.moodShiftTags = []
    with_original = PriorBaseline(conversations)
    with_flipped = PriorBaseline([flipped, *conversations[1:]])
    for index in range(len(target.turns)):
        from attunebench.replay.protocol import ConversationView

        ctx = ConversationView(target, ReplayConfig()).analysis(index)
        assert with_original.analysis(ctx) == with_flipped.analysis(ctx)


def test_prior_baseline_predicts_the_majority_of_the_others():
    base = marked_conversation(turns=2, conversation_id="a")
    others = [marked_conversation(turns=2, conversation_id=c) for c in ("b", "c")]
    prior = PriorBaseline([base, *others])
    from attunebench.replay.protocol import ConversationView

    ctx = ConversationView(base, ReplayConfig()).analysis(0)
    answer = prior.analysis(ctx)
    # In the others, B13 was observed yes and preferred yes; B19 observed yes, preferred no;
    # B11 observed no; tags: Nervous on odd turns (1 tag per 2 turns rounds to 0 or 1).
    assert answer[P.KEY_OM] == {"B13": "yes", "B19": "yes", "B11": "no"}
    assert answer[P.KEY_HUMAN] == {"B13": "yes", "B19": "no", "B11": "no"}
    pairwise = prior.pairwise(ConversationView(base, ReplayConfig()).pairwise(0))[P.KEY_SELECTIONS]
    # 'general' original-vs-human: the original lost in the others -> choose the non-original side.
    assert pairwise["0"] == "B"


def test_lexicon_reads_emotions_questions_advice_and_validation():
    assert detect_emotions("I'm so anxious and honestly a bit ashamed.") == {"Nervous": 6, "Ashamed": 6}
    assert detect_emotions("I am not angry, just tired of it") == {"Upset": 4}
    assert detect_emotions("Work was fine today.") == {}
    conversation = marked_conversation(turns=1)
    from attunebench.replay.protocol import ConversationView

    view = ConversationView(conversation, ReplayConfig())
    lexicon = LexiconBaseline()
    answer = lexicon.analysis(view.analysis(0))
    # OM reply: "It makes sense you feel that way ... You could try a short walk. How are you sleeping?"
    assert answer[P.KEY_OM] == {"B13": "yes", "B19": "yes", "B11": "yes"}
    # The participant asks "What should I do?": advice is wanted, a validation is always wanted.
    assert answer[P.KEY_HUMAN]["B11"] == "yes" and answer[P.KEY_HUMAN]["B19"] == "yes"
    assert answer[P.KEY_TAGS][0]["emotion"] == "Nervous"
    draft = lexicon.draft(view.draft(0))[P.KEY_RESPONSE]
    assert "anxious" in draft and "?" in draft


def test_baselines_see_only_what_the_context_holds():
    conversation = marked_conversation(turns=3)
    recorder = RecordingBackend(make_baseline("baseline:lexicon"), cacheable=False)
    asyncio.run(Replayer(spec_from_name("baseline:lexicon"), recorder, ReplayConfig()).replay(conversation))
    for call in recorder.calls:
        if call.turn_number is None:
            continue
        shown = context_json(call.context)
        assert all(user_marker(later) not in shown for later in range(call.turn_number + 1, 4))


def test_unknown_baseline_is_rejected():
    with pytest.raises(ValueError, match="unknown baseline"):
        make_baseline("baseline:oracle")


def test_scores_and_files_made_as_conversations_finish_equal_those_made_at_the_end(tmp_path):
    """``attune eval`` scores and renders each conversation as it finishes: the report and the files are the
    same as when everything is done at the end, and a score made for another run object is not used."""
    from attunebench.metrics.engine import score_pair, score_runs
    from attunebench.replay.run import render_output

    conversations = synth_conversations(6, seed=11)
    results = run_baseline("baseline:prior", conversations)
    runs = [r.output for r in results]
    ahead = {c.conversationId: score_pair(c, run) for c, run in zip(conversations, runs, strict=True)}
    at_the_end = score_runs(conversations, runs)
    assert score_runs(conversations, runs, precomputed=ahead).report() == at_the_end.report()
    other = [run.model_copy(update={"mode": "omniscient"}) for run in runs]  # other runs: their own scores
    assert score_runs(conversations, other, precomputed=ahead).report() == score_runs(conversations, other).report()

    rendered = {r.conversation_id: render_output(r) for r in results}
    ahead_paths = write_outputs(results, tmp_path / "ahead", rendered)
    end_paths = write_outputs(results, tmp_path / "end")
    assert [p.read_bytes() for p in ahead_paths] == [p.read_bytes() for p in end_paths]
