"""The replay service with the database: runs, checkpoints, the call cache and scoring (Celery eager).

The same chord that workers run is executed in-process here (no REDIS_URL);
tests/web/test_replay_celery.py runs it through real workers.
"""

from __future__ import annotations

import socket

import pytest
from django.core.management import call_command

from attunebench.replay import prompts as P
from attunebench.replay.baselines import PriorTally
from attunebench.replay.cache import make_key
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring import replay_service, run_control
from scoring.models import ConversationScore, EvaluatedModel, EvaluationRun, ModelCallCache, RunConversation, RunScore
from tests.clock import FakeClock


@pytest.fixture(autouse=True)
def empty_call_caches():
    """Each test starts with empty caches: the process's memory layer here, Redis in tests/conftest.py.

    (tests/conftest.py also runs Celery tasks in-process for unmarked tests.)
    """
    replay_service.reset_process_state()
    yield
    replay_service.reset_process_state()


def unused_port() -> int:
    """A local port nothing listens on: connections to it are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def in_this_worker(**parts) -> None:
    """Give this process's replay state (scheduler, cache) the parts a test needs."""
    for name, value in parts.items():
        setattr(replay_service._state, name, value)


def import_synth(n: int, seed: int = 3) -> list[str]:
    docs = synth_conversations(n, seed=seed, min_turns=2, max_turns=3)
    result = import_documents([(d.conversationId, d) for d in docs])
    assert result.ok, result.problems
    return result.imported


@pytest.mark.django_db
def test_a_baseline_run_replays_scores_and_counts_progress():
    ids = import_synth(4)
    run = replay_service.do_create_run("baseline:lexicon", "verbose", "delta", judge_name="baseline:random")
    run_control.start_run(run.pk)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE
    assert (run.conversations_total, run.conversations_done, run.conversations_failed) == (4, 4, 0)
    # Offline baselines compute their answers here: no provider saw a request, so no call was made.
    assert run.calls_made == 0 and run.calls_failed == 0 and run.cost_usd == 0
    assert run.prompt_version and run.started_at and run.finished_at
    outputs = RunConversation.objects.filter(run=run)
    assert sorted(o.output["conversationId"] for o in outputs) == sorted(ids)
    assert all(o.status == RunConversation.Status.DONE and o.output["mode"] == "verbose" for o in outputs)
    assert ConversationScore.objects.filter(run=run).count() == 4
    assert RunScore.objects.get(run=run).metrics["em_model"] == "baseline:lexicon"
    assert EvaluatedModel.objects.get(name="baseline:lexicon").kind == EvaluatedModel.Kind.OFFLINE


@pytest.mark.django_db
def test_a_prior_run_tallies_its_dataset_once_however_many_conversations_it_replays():
    ids = import_synth(6)
    run = replay_service.do_create_run("baseline:prior", "default")
    builds_before = PriorTally.builds
    run_control.start_run(run.pk)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.conversations_done == len(ids) == 6
    assert PriorTally.builds - builds_before == 1
    outputs = {o.output["conversationId"]: o.output for o in RunConversation.objects.filter(run=run)}
    assert sorted(outputs) == sorted(ids)


@pytest.mark.django_db
def test_replaying_a_finished_conversation_again_changes_nothing():
    import_synth(2)
    run = replay_service.do_create_run("baseline:random", "default")
    run_control.start_run(run.pk)
    run.refresh_from_db()
    before = (run.calls_made, run.conversations_done)
    item = RunConversation.objects.filter(run=run).first()
    assert replay_service.do_replay_conversation(item.pk)["skipped"] == "already finished"
    run.refresh_from_db()
    assert (run.calls_made, run.conversations_done) == before


@pytest.mark.django_db
def test_cancelled_runs_skip_their_remaining_conversations_and_resume_later():
    import_synth(3)
    run = replay_service.do_create_run("baseline:prior", "default")
    pending = replay_service.do_prepare_run(run.pk)
    assert run_control.cancel_run(run.pk)
    assert replay_service.do_replay_conversation(pending[0])["skipped"] == "run cancelled"
    assert RunConversation.objects.get(pk=pending[0]).status == RunConversation.Status.PENDING
    run_control.resume_run(run.pk)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.conversations_done == 3


@pytest.mark.django_db
def test_live_models_are_refused_unless_allowed_or_local(settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    remote = EvaluatedModel.objects.create(name="openai/gpt-4o-mini", litellm_model="openai/gpt-4o-mini")
    with pytest.raises(replay_service.ReplayRefused, match="ATTUNE_ALLOW_LIVE_MODELS"):
        replay_service.em_spec(remote)
    local = EvaluatedModel.objects.create(
        name="local",
        litellm_model="openai/local",
        api_base="http://127.0.0.1:9/v1",
        params={"temperature": 0},
        max_concurrency=3,
        requests_per_minute=100,
        input_cost_per_million=1.0,
    )
    spec = replay_service.em_spec(local)
    assert (spec.max_in_flight, spec.rpm, spec.input_cost_per_million, dict(spec.params)) == (
        3,
        100,
        1.0,
        {"temperature": 0},
    )
    human = EvaluatedModel.objects.create(name="human:alex", kind=EvaluatedModel.Kind.HUMAN)
    with pytest.raises(replay_service.ReplayRefused, match="human"):
        replay_service.em_spec(human)


@pytest.mark.django_db(transaction=True)
def test_llm_run_uses_the_database_cache_and_a_rerun_pays_nothing():
    import_synth(2)
    with FakeLLMServer(FakeConfig()) as server:
        EvaluatedModel.objects.create(
            name="fake-em",
            litellm_model="openai/fake-em",
            api_base=server.url,
            params={"temperature": 0},
            input_cost_per_million=2.0,
            output_cost_per_million=8.0,
        )
        first = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(first.pk)
        first.refresh_from_db()
        made = server.stats()["requests"]
        assert first.status == EvaluationRun.Status.DONE and first.calls_made == made > 0
        assert first.cost_usd > 0
        assert ModelCallCache.objects.count() == made
        entry = ModelCallCache.objects.first()
        # The pure cache key and the model's key formula agree.
        assert make_key("m", {"a": 1}, [{"role": "user", "content": "x"}], "v") == ModelCallCache.make_key(
            "m", {"a": 1}, [{"role": "user", "content": "x"}], "v"
        )
        assert entry.model == "openai/fake-em" and entry.usage["prompt_tokens"] > 0

        server.reset()
        # A fresh process would start with an empty memory layer: drop it.
        replay_service.reset_process_state()
        second = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(second.pk)
        second.refresh_from_db()
        assert server.stats()["requests"] == 0
        assert second.calls_made == 0 and second.calls_cached == made and second.status == EvaluationRun.Status.DONE


@pytest.mark.django_db(transaction=True)
def test_one_model_string_at_two_endpoints_gets_each_endpoints_own_answers():
    """Two checkpoints served under one name at two addresses: the second is asked, never answered from the
    first one's cache; the same model at the same address is still answered from the cache."""
    import_synth(2)
    with FakeLLMServer(FakeConfig(seed=1)) as first_server, FakeLLMServer(FakeConfig(seed=2)) as second_server:
        for name, server in (("ckpt-1", first_server), ("ckpt-2", second_server)):
            EvaluatedModel.objects.create(
                name=name, litellm_model="openai/fake-alpha", api_base=server.url, params={"temperature": 0}
            )
        first = replay_service.do_create_run("ckpt-1", "default")
        run_control.start_run(first.pk)
        second = replay_service.do_create_run("ckpt-2", "default")
        run_control.start_run(second.pk)
        first.refresh_from_db()
        second.refresh_from_db()
        assert first_server.stats()["requests"] == first.calls_made > 0
        assert second_server.stats()["requests"] == second.calls_made == first.calls_made  # all its own
        assert second.calls_cached == 0
        first_server.reset()
        again = replay_service.do_create_run("ckpt-1", "default")
        run_control.start_run(again.pk)
        again.refresh_from_db()
        assert first_server.stats()["requests"] == 0 and again.calls_cached == first.calls_made


@pytest.mark.django_db(transaction=True)
def test_a_cap_edited_in_the_registry_applies_to_the_next_run_in_the_same_worker():
    # The worker's scheduler outlives runs; an admin lowering max_concurrency after
    # a burst of 429s must not have to restart the workers.
    import_synth(2)
    # Calls 3-5 of a turn (HP binary, pairwise, judge) are held at the server until three are there at once:
    # with 60 ms answers, a client that paced them 20 ms apart on a loaded machine would not overlap all three.
    held = FakeConfig(latency_ms=60, hold_until_in_flight=3, hold_call_types=[P.HP_BINARY, P.PAIRWISE, P.JUDGE])
    with FakeLLMServer(held) as server:
        em = EvaluatedModel.objects.create(
            name="fake-em", litellm_model="openai/fake-em", api_base=server.url, max_concurrency=3
        )
        EvaluatedModel.objects.create(
            name="fake-judge", litellm_model="openai/fake-judge", api_base=server.url, max_concurrency=3
        )
        first = replay_service.do_create_run("fake-em", "default", judge_name="fake-judge")
        run_control.start_run(first.pk)
        # Calls 3-5 of a turn (HP binary, pairwise, judge) run side by side.
        assert server.stats()["peak_in_flight"] == 3

        EvaluatedModel.objects.filter(pk=em.pk).update(max_concurrency=1)  # the judge shares the provider
        server.configure(hold_until_in_flight=0)
        server.reset()
        second = replay_service.do_create_run("fake-em", "verbose", judge_name="fake-judge")
        run_control.start_run(second.pk)
        stats = server.stats()
        assert stats["requests"] > 0 and stats["peak_in_flight"] == 1
        first.refresh_from_db(), second.refresh_from_db()
        assert first.status == second.status == EvaluationRun.Status.DONE


@pytest.mark.django_db(transaction=True)
def test_a_model_that_never_answers_usably_scores_zero_but_an_unreachable_one_is_not_scored():
    from attunebench.replay.scheduler import Scheduler

    import_synth(2)
    # Unusable replies are the model's own result: scored, with coverage 0 (SPEC 5.3).
    with FakeLLMServer(FakeConfig(malformed_rate=1.0)) as server:
        EvaluatedModel.objects.create(name="garbled", litellm_model="openai/garbled", api_base=server.url)
        garbled = replay_service.do_create_run("garbled", "default")
        run_control.start_run(garbled.pk)
    garbled.refresh_from_db()
    assert (garbled.status, garbled.conversations_done, garbled.conversations_failed) == (
        EvaluationRun.Status.DONE,
        2,
        0,
    )
    scores = ConversationScore.objects.filter(run=garbled)
    assert scores.count() == 2 and all(s.coverage == 0 for s in scores)
    assert all(
        f["kind"] == "unusable_reply"
        for o in RunConversation.objects.filter(run=garbled)
        for f in o.output["failed_calls"]
    )

    # A provider that never answers says nothing about the model: failed, left for resume, not scored.
    closed_port = unused_port()
    EvaluatedModel.objects.create(
        name="unreachable", litellm_model="openai/unreachable", api_base=f"http://127.0.0.1:{closed_port}/v1"
    )
    in_this_worker(scheduler=Scheduler(max_attempts=1))
    unreachable = replay_service.do_create_run("unreachable", "default")
    run_control.start_run(unreachable.pk)
    unreachable.refresh_from_db()
    assert (unreachable.status, unreachable.conversations_done, unreachable.conversations_failed) == (
        EvaluationRun.Status.FAILED,
        0,
        2,
    )
    assert not ConversationScore.objects.filter(run=unreachable).exists()
    failed = RunConversation.objects.filter(run=unreachable).first()
    assert failed.status == RunConversation.Status.FAILED and "draft" in failed.error


@pytest.mark.django_db(transaction=True)
def test_a_failing_redis_cache_layer_is_logged_and_the_database_cache_carries_the_run(caplog):
    from attunebench.replay.cache import LayeredCache, MemoryCache

    closed_port = unused_port()
    # A clock that stands still: however long the run takes here, it is within one minute of logging.
    broken = replay_service.RedisCallCache(f"redis://127.0.0.1:{closed_port}/0", clock=FakeClock())
    in_this_worker(cache=LayeredCache(MemoryCache(), broken, replay_service.DatabaseCallCache()))
    import_synth(2)
    with FakeLLMServer(FakeConfig()) as server, caplog.at_level("WARNING", logger="attune.replay"):
        EvaluatedModel.objects.create(name="fake-em", litellm_model="openai/fake-em", api_base=server.url)
        run = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(run.pk)
        made = server.stats()["requests"]
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.conversations_done == 2 and run.calls_failed == 0
    assert ModelCallCache.objects.count() == made > 0  # every answer still kept durably
    assert broken.failures >= 2 * made  # each call's read and write
    # Reported once (at most a line a minute), not once per call.
    assert caplog.text.count("Redis call cache read failed") == 1 and "going on with the database cache" in caplog.text


@pytest.mark.django_db
def test_eval_command_from_db_writes_files_and_scores(tmp_path, capsys):
    import_synth(3)
    call_command(
        "eval",
        "--model",
        "baseline:lexicon",
        "--from-db",
        "--out",
        str(tmp_path),
        "--no-cache",
        "--in-process",
        "--processes",
        "1",  # forked children would close the test transaction's connection, which recording then uses
    )
    out = capsys.readouterr().out
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert "baseline:lexicon" in out and "composite" in out


@pytest.mark.django_db
def test_eval_command_dry_run_calls_nothing(tmp_path, capsys):
    import_synth(2)
    call_command(
        "eval",
        "--model",
        "baseline:prior",
        "--from-db",
        "--judge",
        "baseline:lexicon",
        "--dry-run",
        "--out",
        str(tmp_path),
    )
    out = capsys.readouterr().out
    assert "calls (" in out and "estimated cost $0.0000" in out
    assert not list(tmp_path.glob("*.json"))


def test_a_redis_cache_outage_is_logged_once_a_minute(caplog):
    from attunebench.replay.aio import run_sync

    clock = FakeClock(0.0)
    broken = replay_service.RedisCallCache(f"redis://127.0.0.1:{unused_port()}/0", clock=clock)
    with caplog.at_level("WARNING", logger="attune.replay"):
        for seconds in (0.0, 30.0, 59.9, 60.0, 61.0, 125.0):
            clock.now = seconds
            assert run_sync(broken.get("some-key")) is None  # a miss: the replay goes on without Redis
    assert broken.failures == 6
    # Logged at 0, 60 and 125 s: the first failure, then once a minute.
    assert caplog.text.count("Redis call cache read failed") == 3
    assert "(6 failures so far)" in caplog.text


def test_a_worker_without_a_courier_warms_litellm_up_on_the_loop_that_makes_its_calls(settings):
    from attunebench.replay.llm import WARM_UP_MODEL, load_litellm

    settings.ATTUNE_CALL_COURIER = False
    replay_service.reset_process_state()
    try:
        assert replay_service.prepare_model_calls().result(timeout=120) is None
        # The warm-up went through litellm for its generic model (described to it first): nothing was sent.
        assert WARM_UP_MODEL in load_litellm().model_cost
    finally:
        replay_service.reset_process_state()
