"""A run made with ``attune eval`` lands in the database like a launcher run (``scoring.cli_runs``).

The model is the fake OpenAI-compatible server on 127.0.0.1 (a loopback
endpoint needs no permission for live calls and no superuser); the command is
the real management command, run here against the test database. The run then
shows on the dashboard, the leaderboard and the API with its provenance, and
its stored scores are the ones the command printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from attunebench.canonical import dumps_canonical
from attunebench.synth import document_filename, synth_conversations
from collection.models import Conversation
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeLLMServer
from scoring.models import EvaluatedModel, EvaluationRun, RunConversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def server():
    with FakeLLMServer() as running:
        yield running


def write_folder(folder: Path, n: int, seed: int = 5) -> list[str]:
    folder.mkdir()
    docs = synth_conversations(n, seed=seed, min_turns=2, max_turns=3)
    for doc in docs:
        (folder / document_filename(doc)).write_text(dumps_canonical(doc), encoding="utf-8")
    return [d.conversationId for d in docs]


def printed_composite(out: str, model: str) -> float:
    """The composite of ``model``'s row in the leaderboard the command printed."""
    row = next(line for line in out.splitlines() if line.startswith(model + " "))
    return float(re.search(r"\s(\d+\.\d+) ±", row).group(1))


def researcher_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def eval_local(server, conversations: str, out: str, *extra: str, **options) -> None:
    """``attune eval`` of the test's model at the local fake server, in one process (the test's transaction)."""
    call_command(
        "eval",
        "--model",
        "openai/my-model",
        "--api-base",
        server.url,
        "--conversations",
        conversations,
        "--out",
        out,
        "--processes",
        "1",
        *extra,
        **options,
    )


def test_a_cli_run_on_files_appears_on_the_dashboard_leaderboard_and_api(server, tmp_path, capsys, researcher):
    ids = write_folder(tmp_path / "conversations", 3)
    eval_local(server, str(tmp_path / "conversations"), str(tmp_path / "out"), "--temperature", "0.2", "--no-cache")
    out = capsys.readouterr().out

    run = EvaluationRun.objects.get()
    assert f"Recorded as run {run.pk} (/research/runs/{run.pk}/ on the site, /api/runs/{run.pk}/ in the API" in out
    assert run.status == EvaluationRun.Status.DONE and run.origin == "cli"
    # The server also saw the preflight's one probe call, made before the run and not one of its calls.
    assert run.conversations_total == run.conversations_done == 3 and run.calls_made == server.stats()["requests"] - 1
    # The unknown conversations were imported, and the stored scores are the ones the command printed.
    assert sorted(Conversation.objects.values_list("conversation_id", flat=True)) == sorted(ids)
    assert round(run.score.composite_score, 2) == printed_composite(out, "openai/my-model")
    # Provenance: the command, its user, the code, the endpoint and settings.
    provenance = run.provenance
    assert provenance["origin"] == "cli" and provenance["user"] and provenance["code_version"]
    assert provenance["settings"]["model"]["api_base"] == server.url
    assert provenance["settings"]["model"]["params"] == {"temperature": 0.2}
    assert provenance["settings"]["command"] is None  # called from Python, not a command line (subprocess tests)
    # A registry row describes the model (on this machine: the launcher may call it again).
    model = EvaluatedModel.objects.get(name="openai/my-model")
    assert model.api_base == server.url and model.litellm_model == "openai/my-model" and model.active

    client = researcher_client(researcher)
    api_run = client.get(f"/api/runs/{run.pk}/").json()
    assert api_run["origin"] == "cli" and api_run["evaluated_model"] == "openai/my-model"
    assert api_run["provenance"]["settings"]["model"]["api_base"] == server.url
    assert [r["id"] for r in client.get("/api/runs/?origin=cli").json()["results"]] == [run.pk]
    board = client.get("/api/leaderboard/").json()
    assert [(r["em_model"], r["composite_score"]) for r in board["rows"]] == [
        ("openai/my-model", pytest.approx(run.score.composite_score))
    ]
    dashboard = client.get("/research/").content.decode()
    assert "openai/my-model" in dashboard
    page = client.get(f"/research/runs/{run.pk}/").content.decode()
    assert "attune eval" in page and provenance["code_version"] in page


def test_a_second_run_on_the_same_files_reuses_the_stored_conversations(server, tmp_path, capsys):
    write_folder(tmp_path / "conversations", 2)
    for _ in range(2):
        eval_local(server, str(tmp_path / "conversations"), str(tmp_path / "out"))
    assert Conversation.objects.count() == 2
    assert EvaluationRun.objects.filter(origin="cli", status="done").count() == 2
    assert RunConversation.objects.count() == 4


def test_a_stored_conversation_with_other_content_is_refused_before_the_replay(server, tmp_path):
    ids = write_folder(tmp_path / "conversations", 2)
    stored = synth_conversations(2, seed=5, min_turns=2, max_turns=3)
    changed = stored[0].model_copy(update={"turns": stored[0].turns[:1]})
    assert import_documents([("stored", changed)]).ok

    with pytest.raises(CommandError) as refused:
        eval_local(server, str(tmp_path / "conversations"), str(tmp_path / "out"))
    message = str(refused.value)
    assert f"conversation {ids[0]!r} is stored in the database with other content" in message
    assert "the number of turns" in message and "--no-record" in message
    # Refused before the replay: at most the preflight's one call, sent while the stored conversations were compared.
    assert server.stats()["requests"] <= 1
    assert not EvaluationRun.objects.exists()


def test_no_record_writes_the_files_only(server, tmp_path):
    write_folder(tmp_path / "conversations", 2)
    eval_local(server, str(tmp_path / "conversations"), str(tmp_path / "out"), "--no-record")
    assert len(list((tmp_path / "out").glob("*.json"))) == 2
    assert not EvaluationRun.objects.exists() and not Conversation.objects.exists()


def test_a_from_db_run_is_recorded_on_the_stored_conversations(tmp_path, capsys, sample_conversations):
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
        "1",
    )
    out = capsys.readouterr().out
    run = EvaluationRun.objects.get()
    assert run.origin == "cli" and run.provenance["settings"]["conversations"] == "database"
    assert run.conversation_scores.count() == len(sample_conversations) == Conversation.objects.count()
    assert round(run.score.composite_score, 2) == printed_composite(out, "baseline:lexicon")
    stored = sorted(
        dumps_canonical(output) for output in RunConversation.objects.filter(run=run).values_list("output", flat=True)
    )
    written = sorted(p.read_text(encoding="utf-8") for p in tmp_path.glob("*.json"))
    assert stored == written  # one result, two homes
