"""Fresh calls and repeats from the run launcher and the runs API, and what runs cost and count.

Every model here is served by a local fake OpenAI-compatible server, so a test
counts the requests the provider really saw. A normal re-run is answered from
the call cache; a repeat or a run asked for fresh calls asks the model again.
A model's cost is what every call its results rest on cost, judge calls
included, whichever run paid for them.
"""

from __future__ import annotations

import pytest
from django.test import Client

from attunebench.replay.cache import normalise_endpoint
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring import replay_service
from scoring.models import CallTranscript, EvaluatedModel, EvaluationRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_call_caches():
    """Each test starts with this process's replay state (and its memory cache) empty."""
    replay_service.reset_process_state()
    yield
    replay_service.reset_process_state()


@pytest.fixture
def conversations(db) -> list[str]:
    docs = synth_conversations(2, seed=11, min_turns=2, max_turns=2)
    result = import_documents([(d.conversationId, d) for d in docs])
    assert result.ok, result.problems
    return result.imported


@pytest.fixture
def signed_in(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def register(name: str, server: FakeLLMServer, **fields) -> EvaluatedModel:
    return EvaluatedModel.objects.create(
        name=name,
        litellm_model=fields.pop("litellm_model", "openai/fake-em"),
        api_base=server.url,
        params={"temperature": 0},
        **fields,
    )


def latest_run() -> EvaluationRun:
    return EvaluationRun.objects.order_by("-pk").first()


def test_repeats_and_fresh_calls_from_the_launcher_and_the_api_ask_the_model_again(
    conversations, signed_in, researcher
):
    from research.results.evaluation import evaluation_data
    from research.results.snapshots import do_freeze_snapshot

    with FakeLLMServer(FakeConfig()) as server:
        model = register("fake-em", server)

        # Each launch first sends the model one real probe call (preflight), never from the cache; the counts
        # below are the run's own requests.
        probe = 1

        def launch_page(**extra) -> tuple[EvaluationRun, int]:
            server.reset()
            replay_service.reset_process_state()  # a new worker: its memory cache starts empty
            form = {"models": [model.pk], "modes": ["default"], "panas_strategy": "absolute", **extra}
            response = signed_in.post("/research/runs/", form)
            assert response.status_code == 302, response.content.decode()[:2000]
            run = latest_run()
            assert run.status == EvaluationRun.Status.DONE, run.error
            return run, int(server.stats()["requests"]) - probe

        def launch_api(**extra) -> tuple[dict, int]:
            server.reset()
            replay_service.reset_process_state()
            body = {"models": ["fake-em"], "modes": ["default"], **extra}
            response = signed_in.post("/api/runs/", body, content_type="application/json")
            assert response.status_code == 201, response.content
            (launched,) = response.json()["runs"]
            run = signed_in.get(f"/api/runs/{launched['id']}/").json()  # as it ended
            assert run["status"] == "done", run
            return run, int(server.stats()["requests"]) - probe

        first, asked = launch_page()
        assert asked == first.calls_made > 0 and (first.fresh_calls, first.repeat) == (False, 0)
        again, asked_again = launch_page()
        assert asked_again == 0 and again.calls_cached == first.calls_made  # a normal re-run: from the cache
        repeat, asked_repeat = launch_page(repeat="1")
        assert repeat.repeat == 1 and asked_repeat == repeat.calls_made == first.calls_made  # answers of its own
        fresh, asked_fresh = launch_page(fresh_calls="on")
        assert fresh.fresh_calls and asked_fresh == fresh.calls_made == first.calls_made and fresh.calls_cached == 0
        page = signed_in.get(f"/research/runs/{repeat.pk}/").content.decode()
        assert '<span class="run-repeat">repeat 1</span>' in page
        assert (
            "Fresh calls: the models were asked again" in signed_in.get(f"/research/runs/{fresh.pk}/").content.decode()
        )

        by_api, asked_api = launch_api(repeat=2)
        assert (by_api["repeat"], by_api["fresh_calls"]) == (2, False) and asked_api == first.calls_made
        same_repeat, asked_same = launch_api(repeat=2)
        assert asked_same == 0 and same_repeat["calls_cached"] == first.calls_made  # repeat 2's own answers
        fresh_api, asked_fresh_api = launch_api(fresh_calls=True)
        assert fresh_api["fresh_calls"] and asked_fresh_api == first.calls_made
        refused = signed_in.post(
            "/api/runs/", {"models": ["fake-em"], "modes": ["default"], "repeat": -1}, content_type="application/json"
        )
        assert refused.status_code == 400 and "repeat" in refused.json()

        # A frozen snapshot names where each run's model was served, never a key.
        snapshot = do_freeze_snapshot("endpoints", "", evaluation_data(), user=researcher)
        (entry,) = [r for r in snapshot.manifest["runs"] if r["model"] == "fake-em"]
        assert entry["endpoint"] == normalise_endpoint(server.url) and entry["endpoint"].startswith("http://127.0.0.1:")
        assert set(entry) >= {"fresh_calls", "repeat"} and "api_key" not in str(snapshot.manifest)


def test_a_models_cost_includes_its_judge_calls_whichever_run_paid_for_them(conversations, signed_in):
    """Two registry names for one model at one endpoint, judged by one judge: the first run pays, the second
    reuses every answer; both show the same cost, split into paid and reused."""
    from research.results.evaluation import evaluation_data, leaderboard_rows

    with FakeLLMServer(FakeConfig()) as server:
        judge = register("fake-judge", server, litellm_model="openai/fake-judge", input_cost_per_million=3.0)
        prices = {"input_cost_per_million": 2.0, "output_cost_per_million": 8.0}
        for name in ("alpha", "alpha-again"):
            register(name, server, **prices)
        runs = {}
        for name in ("alpha", "alpha-again"):
            server.reset()
            # No preflight probe: the provider's request count below is the runs' own.
            body = {"models": [name], "modes": ["default"], "judge": judge.name, "preflight": False}
            response = signed_in.post("/api/runs/", body, content_type="application/json")
            assert response.status_code == 201, response.content
            runs[name] = EvaluationRun.objects.get(pk=response.json()["runs"][0]["id"])
        payer, reuser = runs["alpha"], runs["alpha-again"]
        judged = CallTranscript.objects.filter(run_conversation__run=payer, role="judge")
        assert judged.exists() and all(c.cost_usd and c.cost_usd > 0 for c in judged)
        assert payer.cost_usd > 0 and payer.cost_reused_usd == 0
        assert server.stats()["requests"] == reuser.calls_made == 0 and reuser.cost_usd == 0
        assert reuser.cost_reused_usd == pytest.approx(payer.cost_usd)
        assert reuser.cost_total_usd == pytest.approx(payer.cost_total_usd)
        # The judge's share is in it: the EM's own calls cost less than the whole.
        em_only = sum(c.cost_usd for c in CallTranscript.objects.filter(run_conversation__run=payer, role="em"))
        assert payer.cost_total_usd == pytest.approx(em_only + sum(c.cost_usd for c in judged))

        rows = {r.em_model: r for r in leaderboard_rows(evaluation_data())}
        assert rows["alpha"].cost == pytest.approx(rows["alpha-again"].cost) == pytest.approx(payer.cost_usd)
        assert (rows["alpha-again"].cost_paid, rows["alpha-again"].cost_reused) == (0, pytest.approx(payer.cost_usd))
        fragment = signed_in.get(f"/research/runs/{reuser.pk}/progress/").content.decode()
        assert '<span class="run-cost-paid">$0.0000</span> paid in this run' in fragment
        api = signed_in.get(f"/api/runs/{reuser.pk}/").json()
        assert (api["cost_usd"], api["cost_reused_usd"]) == (0.0, pytest.approx(payer.cost_usd))
        assert api["cost_total_usd"] == pytest.approx(payer.cost_usd)


def test_an_offline_baselines_predictions_are_not_calls(conversations):
    """baseline:lexicon answers here; only its judge's requests reached a provider, and only they are counted."""
    from scoring import run_control

    with FakeLLMServer(FakeConfig()) as server:
        register("fake-judge", server, litellm_model="openai/fake-judge")
        run = replay_service.do_create_run("baseline:lexicon", "default", judge_name="fake-judge")
        run_control.start_run(run.pk)
        run.refresh_from_db()
        assert run.status == EvaluationRun.Status.DONE
        assert run.calls_made == server.stats()["requests"] > 0
        assert run.calls_made == CallTranscript.objects.filter(run_conversation__run=run, role="judge").count()


def test_calls_are_priced_as_the_provider_prices_them_cached_prompt_tokens_included(conversations):
    """A model on litellm's price list, half of whose prompt tokens the provider served from its prompt cache:
    each call costs (uncached × input + cached × cache-read + completion × output) at the list's prices.
    The registry's price, when set, overrides the list (one input price for every prompt token)."""
    import litellm

    from scoring import run_control

    listed = litellm.model_cost["gpt-4o-mini"]
    with FakeLLMServer(FakeConfig(cached_prompt_share=0.5)) as server:
        register("listed", server, litellm_model="openai/gpt-4o-mini")
        register("overridden", server, litellm_model="openai/gpt-4o", input_cost_per_million=1.0)
        for name in ("listed", "overridden"):
            run = replay_service.do_create_run(name, "default")
            run_control.start_run(run.pk)
        calls = list(CallTranscript.objects.filter(run_conversation__run__evaluated_model__name="listed"))
        assert calls and all(c.prompt_tokens > 1 for c in calls)
        for call in calls:
            cached = int(call.prompt_tokens * 0.5)
            expected = (
                (call.prompt_tokens - cached) * listed["input_cost_per_token"]
                + cached * listed["cache_read_input_token_cost"]
                + call.completion_tokens * listed["output_cost_per_token"]
            )
            assert call.cost_usd == pytest.approx(expected, rel=1e-9)
        for call in CallTranscript.objects.filter(run_conversation__run__evaluated_model__name="overridden"):
            assert call.cost_usd == pytest.approx(call.prompt_tokens * 1.0 / 1e6)  # output side unset: free


def test_the_dashboard_shows_the_bootstrap_seed_even_when_it_is_zero(scored_runs, signed_in):
    from attunebench.metrics.comparison import DEFAULT_SEED

    assert DEFAULT_SEED == 0
    page = signed_in.get("/research/").content.decode()
    assert '<span class="bootstrap-seed">0</span>' in page


def test_the_analyses_api_names_original_models_by_alias_unless_asked_for_names(scored_runs, signed_in):
    from collection.models import OriginalModel

    om = OriginalModel.objects.filter(conversations__isnull=False).distinct().first()
    OriginalModel.objects.filter(pk=om.pk).update(name="vendor/secret-model-7")
    om.refresh_from_db()

    def named(query: str) -> set[str]:
        response = signed_in.get(f"/api/analyses/{query}")
        assert response.status_code == 200, response.content
        breakdown = response.json()["analysis"]["breakdowns"]["by_original_model"]["overall"]
        return {row["original_model"] for row in breakdown}

    assert om.alias in named("") and "vendor/secret-model-7" not in named("")
    assert "vendor/secret-model-7" in named("?include_model_identity=true")
    assert signed_in.get("/api/analyses/?include_model_identity=maybe").status_code == 400
