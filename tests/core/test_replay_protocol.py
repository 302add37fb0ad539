"""The replay protocol (SPEC 4): what each call is shown, modes, PANAS strategies, failures."""

from __future__ import annotations

import asyncio

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import parse_run
from attunebench.replay import prompts as P
from attunebench.replay.baselines import RandomBaseline
from attunebench.replay.llm import Completion, EMSpec, spec_from_name
from attunebench.replay.protocol import ReplayConfig, Replayer, critical_path_calls, planned_calls
from attunebench.replay.scheduler import PermanentCallError
from devtools.replay_fixtures import (
    RecordingBackend,
    ScriptedBackend,
    context_json,
    golden_marker,
    improved_marker,
    marked_conversation,
    reply_marker,
    user_marker,
)

EM = EMSpec(name="test/em", litellm_model="test/em")
JUDGE = EMSpec(name="test/judge", litellm_model="test/judge")


def replay(conversation, backend, **config):
    judge_backend = config.pop("judge_backend", None)
    replayer = Replayer(EM, backend, ReplayConfig(**config), judge_backend=judge_backend)
    return asyncio.run(replayer.replay(conversation)), replayer


def test_messages_for_turn_t_never_show_later_turns():
    conversation = marked_conversation(turns=4)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    judge_recorder = RecordingBackend(RandomBaseline(seed=2))
    result, _ = replay(conversation, recorder, judge=JUDGE, judge_backend=judge_recorder)
    calls = recorder.calls + judge_recorder.calls
    assert {c.call_type for c in calls} == set(P.CALL_TYPES)
    for call in calls:
        if call.call_type == P.POST:
            continue
        t = call.turn_number
        shown = call.text + context_json(call.context)
        for later in range(t + 1, 5):
            for marker in (user_marker(later), reply_marker(later), improved_marker(later), golden_marker(later)):
                assert marker not in shown, f"{call.call_type} of turn {t} shows {marker}"
        # Turns up to t are in the thread (the EM's view grows turn by turn).
        for earlier in range(1, t + 1):
            assert user_marker(earlier) in call.text
        # The draft is written before the OM reply of turn t is shown.
        if call.call_type in (P.DRAFT, P.JUDGE):
            assert reply_marker(t) not in shown
            if t > 1:
                assert reply_marker(t - 1) in call.text
        else:
            assert reply_marker(t) in call.text
        # Alternates of turn t appear only where SPEC 4 shows them.
        if call.call_type in (P.DRAFT, P.ANALYSIS, P.HP_BINARY):
            assert golden_marker(t) not in shown and improved_marker(t) not in shown
        if call.call_type == P.PAIRWISE:
            assert golden_marker(t) in call.text and improved_marker(t) in call.text
        if call.call_type == P.JUDGE:
            assert golden_marker(t) in call.text
    assert [t.turnNumber for t in result.output.turns] == [1, 2, 3, 4]


def test_em_answers_are_elided_and_annotations_never_shown():
    conversation = marked_conversation(turns=3)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    replay(conversation, recorder)
    for call in recorder.calls:
        roles = [m["role"] for m in call.messages]
        # The thread holds transcript only: no earlier EM answer survives as an assistant turn.
        assert "assistant" not in roles
        assert roles[0] == "system" and set(roles[1:]) == {"user"}
        # The participant's own annotations (mood tags, preferred answers, winners) never leak.
        assert "moodShiftTags" not in call.text and "preferredBehavior" not in call.text
        assert '"winner"' not in call.text


def test_only_the_questions_the_participant_answered_are_asked():
    conversation = marked_conversation(turns=2)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    result, _ = replay(conversation, recorder)
    analysis = [c for c in recorder.calls if c.call_type == P.ANALYSIS]
    assert all(c.context.question_ids == ("B13", "B19", "B11") for c in analysis)
    assert "- B5:" not in analysis[0].text  # B5 has no answer at all on these turns
    turn = result.output.turns[0]
    assert set(turn.em_binary_om_assessment) == {"B13", "B19", "B11"}
    assert set(turn.em_binary_human_prediction_hp) == {"B13", "B19", "B11"}
    hp = next(c for c in recorder.calls if c.call_type == P.HP_BINARY)
    assert cat.BINARY_QUESTIONS_BY_ID["B13"].first_person in hp.text
    assert cat.BINARY_QUESTIONS_BY_ID["B13"].third_person in analysis[0].text


def test_pairwise_masks_labels_and_maps_positions():
    conversation = marked_conversation(turns=3)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    result, _ = replay(conversation, recorder)
    for call in (c for c in recorder.calls if c.call_type == P.PAIRWISE):
        labels = [c.label for c in call.context.candidates]
        assert labels == ["original", "alternate1", "alternate2"]
        assert "human" not in " ".join(f"{c.label_a} {c.label_b}" for c in call.context.comparisons)
        texts = {c.label: c.text for c in call.context.candidates}
        first = call.context.comparisons[0]  # GT: A=original, B=human
        assert first.label_a == "original" and golden_marker(call.turn_number) in texts[first.label_b]
    assert all(set(t.em_pairwise_selections) == {"0", "1"} for t in result.output.turns)


def test_omniscient_modes_show_profile_and_pre_panas_on_the_first_turn_only():
    conversation = marked_conversation(turns=2)
    for mode, shown in (("default", False), ("verbose", False), ("omniscient", True), ("verbose_omniscient", True)):
        recorder = RecordingBackend(RandomBaseline(seed=1))
        replay(conversation, recorder, mode=mode)
        draft = [c for c in recorder.calls if c.call_type == P.DRAFT][1]  # turn 2 thread
        first_turn = draft.messages[1]["content"]
        assert ("Background about the participant" in first_turn) is shown
        assert ("Nervous 6" in first_turn) is shown
        assert ("Anxious" in first_turn) is shown
        assert "p-1" not in draft.text  # the participant id is never needed
        assert "Background" not in draft.messages[2]["content"]


def test_blind_delta_hides_the_pre_chat_mood_even_in_omniscient_mode():
    conversation = marked_conversation(turns=2)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    replay(conversation, recorder, mode="omniscient", panas_strategy="blind_delta")
    assert recorder.calls
    for call in recorder.calls:
        assert "Nervous 6" not in call.text
    first_turn = [c for c in recorder.calls if c.call_type == P.DRAFT][1].messages[1]["content"]
    assert "Anxious" in first_turn and "Mood before the chat: not available." in first_turn


def test_verbose_modes_require_and_keep_reasoning():
    conversation = marked_conversation(turns=2)
    recorder = RecordingBackend(RandomBaseline(seed=1))
    result, _ = replay(conversation, recorder, mode="verbose")
    assert all('"reasoning"' in c.messages[-1]["content"] for c in recorder.calls)
    extra = result.output.model_dump()
    assert set(extra["em_reasoning"]) == {"1", "2", "post"}
    assert set(extra["em_reasoning"]["1"]) == {P.DRAFT, P.ANALYSIS, P.HP_BINARY, P.PAIRWISE}
    plain, _ = replay(conversation, RandomBaseline(seed=1))
    assert "em_reasoning" not in plain.output.model_dump()

    # A verbose answer without reasoning is not accepted: it is re-asked.
    no_reasoning = '{"response": "hello"}'
    scripted = ScriptedBackend([no_reasoning], RandomBaseline(seed=1))
    result, replayer = replay(marked_conversation(turns=1), scripted, mode="verbose")
    assert replayer.totals.calls_failed == 0
    assert "reasoning" in scripted.seen[1][-1]["content"]  # the correction names the problem


@pytest.mark.parametrize("strategy", cat.PANAS_STRATEGIES)
def test_panas_strategies_show_what_they_should_and_compute_post(strategy):
    conversation = marked_conversation(turns=1)

    class Fixed(RandomBaseline):
        def post(self, ctx):
            answer = super().post(ctx)
            key = P.KEY_POST_PANAS if strategy == "absolute" else P.KEY_PANAS_CHANGE
            answer[key] = dict.fromkeys(cat.PANAS_ITEMS, 6 if strategy == "absolute" else 3)
            return answer

    recorder = RecordingBackend(Fixed(seed=1))
    result, _ = replay(conversation, recorder, panas_strategy=strategy)
    post_call = next(c for c in recorder.calls if c.call_type == P.POST)
    instruction = post_call.messages[-1]["content"].split(P.TASK_MARKER)[-1]
    pre = conversation.prePanas
    if strategy == "absolute":
        assert f"positive-feeling total was {pre.totalPositiveAffect}" in instruction
        assert "Nervous 6" not in instruction
    elif strategy == "delta":
        assert "Nervous 6" in instruction and "total was" not in instruction
    else:
        assert "Nervous 6" not in instruction and "not shown" in instruction
    post = result.output.post_conversation
    assert post.panas_strategy == strategy
    items = post.predicted_post_panas.items
    if strategy == "absolute":
        assert items["Nervous"] == 6 and items["Proud"] == 6
    else:
        # post = pre + change, clamped to 1-7; items without a pre rating start from 4.
        assert items["Nervous"] == 7  # 6 + 3 -> clamped
        assert items["Proud"] == 5  # 2 + 3
        assert items["Alert"] == 6  # 3 + 3
    assert post.predicted_conversation_wide.fourBranchScores.keys() == set(cat.FOUR_BRANCHES)


def test_a_turn_whose_call_fails_is_left_out_and_listed():
    conversation = marked_conversation(turns=3)

    class FailsOnTurnTwoPairwise(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            if ctx.call_type == P.PAIRWISE and ctx.turn_number == 2:
                raise PermanentCallError("provider rejected the request")
            return await super().complete(spec, messages, ctx)

    result, replayer = replay(conversation, FailsOnTurnTwoPairwise(seed=1))
    output = result.output
    assert [t.turnNumber for t in output.turns] == [1, 3]
    failed = output.model_dump()["failed_calls"]
    assert failed == [
        {
            "turnNumber": 2,
            "call": "pairwise",
            "error": "permanent error: provider rejected the request",
            "kind": "no_answer",
            "reason": "4xx",  # a refusal: one of the four kinds a researcher acts on
        }
    ]
    assert replayer.totals.calls_failed == 1
    parse_run(output.model_dump(mode="json"))  # still a valid canonical run


def test_an_unusable_reply_is_retried_then_recorded_as_failed():
    conversation = marked_conversation(turns=1)
    scripted = ScriptedBackend(["not json"] * 3, RandomBaseline(seed=1))
    result, replayer = replay(conversation, scripted, parse_attempts=3)
    # The draft of turn 1 failed three times: the turn is left out, the post call still ran.
    assert result.output.turns == []
    assert result.output.post_conversation is not None
    failure = result.failures[0]
    assert failure.call_type == P.DRAFT and "3 attempts" in failure.error
    assert replayer.totals.calls_made >= 3 and result.stats.calls_failed == 1
    # Retries carry the bad reply and a correction, so a deterministic model can change its answer.
    assert scripted.seen[1][-2] == {"role": "assistant", "content": "not json"}
    assert "could not be used" in scripted.seen[1][-1]["content"]


def test_judge_failure_only_nulls_the_judge_fields():
    conversation = marked_conversation(turns=2)

    class BrokenJudge(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            raise PermanentCallError("judge unavailable")

    result, _ = replay(conversation, RandomBaseline(seed=1), judge=JUDGE, judge_backend=BrokenJudge())
    assert [t.turnNumber for t in result.output.turns] == [1, 2]
    assert all(t.em_draft_judge_scores is None for t in result.output.turns)
    assert {f.call_type for f in result.failures} == {P.JUDGE}


def test_judge_rates_the_draft_against_the_golden_reply():
    conversation = marked_conversation(turns=1)
    recorder = RecordingBackend(RandomBaseline(seed=3))
    result, _ = replay(conversation, RandomBaseline(seed=1), judge=JUDGE, judge_backend=recorder)
    judge_call = recorder.calls[0]
    turn = result.output.turns[0]
    assert turn.em_drafted_response in judge_call.text
    assert judge_call.messages[0]["content"].startswith("You are an expert evaluator")
    assert set(turn.em_draft_judge_scores) == set(cat.JUDGE_DIMENSIONS)
    assert set(turn.em_draft_binary_assessment) == {"B13", "B19", "B11"}
    assert set(turn.em_draft_binary_assessment.values()) <= {"yes", "no"}


def test_without_a_golden_reply_the_judge_only_answers_the_questions_and_may_not_be_called():
    conversation = marked_conversation(turns=3)
    # Turn 2: no rewrite by the participant. Turn 3: no rewrite and no questions answered.
    for index in (1, 2):
        conversation.turns[index].annotations.alternateResponses = None
        conversation.turns[index].annotations.pairwiseComparisons = []
    conversation.turns[2].annotations.binaryJudgements = []
    recorder = RecordingBackend(RandomBaseline(seed=3))
    result, _ = replay(conversation, RandomBaseline(seed=1), judge=JUDGE, judge_backend=recorder)

    assert [c.turn_number for c in recorder.calls] == [1, 2]
    unrated = recorder.calls[1]
    assert "reference" not in unrated.text and '"scores"' not in unrated.text
    assert '"binary_assessment"' in unrated.text
    by_turn = {t.turnNumber: t for t in result.output.turns}
    assert set(by_turn[1].em_draft_judge_scores) == set(cat.JUDGE_DIMENSIONS)
    assert by_turn[2].em_draft_judge_scores is None and set(by_turn[2].em_draft_binary_assessment) == {
        "B13",
        "B19",
        "B11",
    }
    assert by_turn[3].em_draft_judge_scores is None and by_turn[3].em_draft_binary_assessment is None
    assert not result.failures
    # Turns 1-3: draft + analysis each; hp_binary on 1-2; pairwise on 1; judge on 1-2; post.
    assert planned_calls(conversation, judge=True) == 6 + 2 + 1 + 2 + 1 == len(result.calls)
    # Only the judge's requests are calls: the offline baseline's predictions reached no provider.
    assert result.stats.calls_made == 2


def test_calls_three_to_five_run_concurrently_and_the_chain_is_two_per_turn():
    conversation = marked_conversation(turns=3)
    state = {"in_flight": 0, "peak_per_turn": {}}
    post_started = asyncio.Event()

    class Held(RandomBaseline):
        """Calls 3-5 of every turn last until the post call starts, the end of the chain: a chain that waited
        for any of them would never get there (the replay would hang until the deadline below)."""

        async def complete(self, spec, messages, ctx):
            if ctx.call_type == P.POST:
                post_started.set()
            state["in_flight"] += 1
            key = ctx.turn_number
            state["peak_per_turn"][key] = max(state["peak_per_turn"].get(key, 0), state["in_flight"])
            if ctx.call_type in (P.DRAFT, P.ANALYSIS, P.POST):
                await asyncio.sleep(0)
            else:
                await post_started.wait()
            state["in_flight"] -= 1
            return await super().complete(spec, messages, ctx)

    backend = Held(seed=1)
    replayer = Replayer(EM, backend, ReplayConfig(judge=JUDGE), judge_backend=backend)
    result = asyncio.run(asyncio.wait_for(replayer.replay(conversation), 10))
    # 3 turns x 5 calls + post = 16 calls. The chain is draft+analysis per turn + post = 7 calls; every
    # turn's calls 3-5 run beside it, together.
    assert critical_path_calls(conversation) == 7
    assert planned_calls(conversation, judge=True) == 16 == len(result.calls)
    assert result.stats.calls_made == 0  # an offline backend's predictions are not calls
    assert not result.failures
    assert all(state["peak_per_turn"][turn] >= 3 for turn in (1, 2, 3))


def test_output_records_prompt_version_cost_and_duration():
    conversation = marked_conversation(turns=2)

    class Priced(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            completion = await super().complete(spec, messages, ctx)
            return Completion(text=completion.text, prompt_tokens=100, completion_tokens=10, cost_usd=0.5)

    result, _ = replay(conversation, Priced(seed=1))
    output = result.output
    assert output.prompt_version == P.PROMPT_VERSION
    assert output.em_model == "test/em"
    # 2 turns x (draft, analysis, hp_binary, pairwise) + post = 9 calls at $0.5.
    assert output.api_cost == pytest.approx(4.5)
    assert output.duration_seconds is not None and output.duration_seconds >= 0
    assert output.model_dump()["usage"]["prompt_tokens"] == 900


def test_spec_rejects_keys_in_parameters():
    with pytest.raises(ValueError, match="environment only"):
        EMSpec(name="x", params={"api_key": "sk-123"})
    assert spec_from_name("baseline:lexicon").is_offline
    assert spec_from_name("openai/gpt-4o-mini").provider == "openai"
    assert EMSpec(name="x", litellm_model="openai/x", api_base="http://h:1/v1").provider == "openai@http://h:1/v1"


def test_each_run_registers_its_models_caps_and_a_shared_provider_gets_the_tighter_one():
    from attunebench.replay.scheduler import ProviderLimits, Scheduler

    scheduler = Scheduler()  # one per worker process, shared by the runs it serves
    em = EMSpec(name="a/em", litellm_model="openai/em", api_base="http://127.0.0.1:9/v1", max_in_flight=6, rpm=600)
    judge = EMSpec(
        name="a/judge", litellm_model="openai/judge", api_base="http://127.0.0.1:9/v1", max_in_flight=10, rpm=None
    )
    other = EMSpec(name="b/judge", litellm_model="anthropic/claude", max_in_flight=3)
    backend = RandomBaseline(seed=1)

    Replayer(em, backend, ReplayConfig(judge=judge), scheduler=scheduler)
    assert scheduler.limits[em.provider] == ProviderLimits(max_in_flight=6, rpm=600)

    Replayer(em, backend, ReplayConfig(judge=other), scheduler=scheduler)
    assert scheduler.limits[other.provider] == ProviderLimits(max_in_flight=3)

    # The registry row was edited (cap lowered): the next run applies it without a restart.
    lowered = EMSpec(name="a/em", litellm_model="openai/em", api_base="http://127.0.0.1:9/v1", max_in_flight=2)
    Replayer(lowered, backend, ReplayConfig(), scheduler=scheduler)
    assert scheduler.limits[em.provider] == ProviderLimits(max_in_flight=2)


def test_an_output_is_scoreable_unless_the_provider_never_answered():
    conversation = marked_conversation(turns=2)

    class Garbled(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            return Completion(text="I'd rather chat than write JSON.")

    class Refused(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            raise PermanentCallError("401 invalid api key")

    garbled, _ = replay(conversation, Garbled(seed=1))
    assert not garbled.output.turns and garbled.output.post_conversation is None
    assert {f.kind for f in garbled.failures} == {"unusable_reply"} and garbled.scoreable

    refused, _ = replay(conversation, Refused(seed=1))
    assert {f.kind for f in refused.failures} == {"no_answer"} and not refused.scoreable
    assert refused.output.model_dump()["failed_calls"][0]["kind"] == "no_answer"

    healthy, _ = replay(conversation, RandomBaseline(seed=1))
    assert healthy.scoreable and not healthy.failures
