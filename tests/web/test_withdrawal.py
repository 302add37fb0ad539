"""Withdrawal honoured everywhere, and erasure on request.

The walk: a participant of the sample data holds a study link, their
conversation is scored in three runs, frozen into a dataset version, exported
and assigned to a human rater. They withdraw through their own link; then
every surface is visited and must show nothing of them.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from collection.models import Conversation, Participant
from collection.study_flow import do_issue_link
from datasets.exchange import exportable_conversations
from datasets.models import ExportJob
from datasets.pseudonyms import export_pseudonym
from datasets.tasks import do_request_export
from datasets.versions import do_freeze_dataset_version
from research.models import ErasureRecord, HumanAssignment
from research.raters.human_baseline import HumanBaselineError, do_assign, do_record_draft
from research.results.evaluation import evaluation_data
from scoring.models import ConversationScore, RunConversation, RunScore

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def setting(scored_runs, study, researcher, rater, export_dir, django_capture_on_commit_callbacks):
    """A sample participant with a study link, scored in every run, in an exported version, assigned to a rater."""
    conversation = (
        exportable_conversations()
        .filter(status=Conversation.Status.COMPLETE, participant__isnull=False)
        .order_by("conversation_id")
        .first()
    )
    participant = conversation.participant
    participant.study = study
    participant.save(update_fields=["study"])
    token = do_issue_link(participant)
    version = do_freeze_dataset_version("walk-v1", user=researcher)
    with django_capture_on_commit_callbacks(execute=True):  # as after the request's commit
        job = do_request_export(version, "jsonl", researcher)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE
    assignment = do_assign(conversation, rater, researcher)
    client = Client()
    client.force_login(researcher)
    rater_client = Client()
    rater_client.force_login(rater)
    return {
        "conversation": conversation,
        "participant": participant,
        "token": token,
        "version": version,
        "job": job,
        "assignment": assignment,
        "client": client,
        "rater_client": rater_client,
    }


def _bundle_text(job: ExportJob, export_dir) -> str:
    with zipfile.ZipFile(export_dir / job.file_path) as bundle:
        return "\n".join(bundle.read(name).decode("utf-8") for name in bundle.namelist())


@pytest.mark.timeout(900)  # the whole walk: three runs re-scored, the leaderboard and analyses recomputed
def test_a_withdrawn_participant_leaves_every_surface(
    setting, scored_runs, export_dir, tmp_path, django_capture_on_commit_callbacks
):
    conversation, client = setting["conversation"], setting["client"]
    cid = conversation.conversation_id
    old_job = setting["job"]
    old_file = export_dir / old_job.file_path
    before_n = {r.pk: r.score.metrics["n_conversations"] for r in scored_runs}
    assert all(n == 15 for n in before_n.values())
    assert cid in _bundle_text(old_job, export_dir)
    assert client.get(f"/api/conversations/{cid}/").status_code == 200

    # The participant withdraws through their own link.
    with django_capture_on_commit_callbacks(execute=True):  # re-scoring and export regeneration run on commit
        response = Client().post(reverse("collection:withdraw", args=[setting["token"]]), {"confirm": "yes"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WITHDRAWN

    # Scores: every run was re-scored without it (n down by one), and the leaderboard and analyses follow.
    for run in scored_runs:
        assert not ConversationScore.objects.filter(run=run, conversation=conversation).exists()
        assert RunScore.objects.get(run=run).metrics["n_conversations"] == before_n[run.pk] - 1
    board = client.get("/api/leaderboard/").json()
    assert {r["n_conversations"] for r in board["rows"]} == {14}
    data = evaluation_data()  # what the leaderboard just computed (cached under the same key)
    assert data.reference and cid not in data.reference
    analyses = client.get("/api/analyses/").content.decode()
    assert cid not in analyses
    scores = client.get(f"/api/runs/{scored_runs[0].pk}/scores/?limit=500").json()
    assert scores["count"] == 14 and cid not in json.dumps(scores)

    # The run's download (its outputs and manifest) and its list of conversations leave it out too:
    # `attune score` on the archive gives the 14-conversation scores the API shows.
    run = scored_runs[0]
    archive = client.get(f"/api/runs/{run.pk}/download/")
    with zipfile.ZipFile(io.BytesIO(archive.content)) as bundle:
        outputs = [n for n in bundle.namelist() if n.startswith("runs/")]
        manifest = json.loads(bundle.read("manifest.json"))
    assert len(outputs) == 14 and f"runs/{cid}.json" not in outputs
    assert cid not in manifest["conversations"] and manifest["conversations_withdrawn"] == 1
    states = client.get(f"/api/runs/{run.pk}/conversations/?limit=500").json()
    assert states["count"] == 14 and cid not in json.dumps(states)

    # Research pages: dashboard, run page, drill-down and conversation viewer.
    assert cid not in client.get(reverse("research:home")).content.decode()
    assert cid not in client.get(reverse("research:run", args=[scored_runs[0].pk])).content.decode()
    assert client.get(reverse("research:drilldown", args=[scored_runs[0].pk, cid])).status_code == 404
    assert client.get(reverse("research:conversation", args=[cid])).status_code == 404

    # API: gone from the list, and the detail says why (no diagnoses, nothing of the conversation).
    listing = client.get("/api/conversations/?limit=500").json()
    assert cid not in [c["conversation_id"] for c in listing["results"]]
    detail = client.get(f"/api/conversations/{cid}/")
    assert detail.status_code == 410
    assert set(detail.json()) == {"detail"} and "withdrew" in detail.json()["detail"]

    # The rater sees nothing of it any more, and an answer is refused and not saved.
    assignment = setting["assignment"]
    page = setting["rater_client"].get(reverse("research:rate", args=[assignment.pk]))
    assert page.status_code == 410 and conversation.turns.first().user_message not in page.content.decode()
    post = setting["rater_client"].post(
        reverse("research:rate", args=[assignment.pk]), {"turn_number": 1, "draft": "I hear you."}
    )
    assert post.status_code == 410
    assert RunConversation.objects.get(pk=assignment.run_conversation_id).output["turns"] == []
    with pytest.raises(HumanBaselineError, match="withdrew"):
        do_record_draft(assignment, 1, "I hear you.")
    with pytest.raises(HumanBaselineError, match="withdrew"):
        do_assign(conversation, assignment.rater, None)

    # Exports: the earlier file is withdrawn from download and deleted, a regenerated one replaces it.
    old_job.refresh_from_db()
    assert old_job.status == ExportJob.Status.WITHDRAWN and old_job.withdrawn_at is not None
    assert not old_file.exists()
    assert client.get(reverse("research:export_download", args=[old_job.pk])).status_code == 404
    assert client.get(f"/api/exports/{old_job.pk}/download/").status_code == 404
    new_job = old_job.replaced_by
    assert new_job is not None and new_job.status == ExportJob.Status.DONE
    assert (new_job.fmt, new_job.include_model_identity) == (old_job.fmt, old_job.include_model_identity)
    text = _bundle_text(new_job, export_dir)
    assert cid not in text
    with zipfile.ZipFile(export_dir / new_job.file_path) as bundle:
        sheet = json.loads(bundle.read("datasheet.json"))
        markdown = bundle.read("DATASHEET.md").decode()
    assert sheet["replaces_exports"] == [old_job.pk]
    assert sheet["counts"]["withdrawn_since_freeze"] == 1 and sheet["counts"]["conversations"] == 14
    assert f"replaces export(s) #{old_job.pk}, withdrawn from download" in markdown
    assert "Participants who withdrew are not in this export" in markdown
    # A second export now is not withdrawn again by a repeated withdrawal signal.
    assert list(ExportJob.objects.filter(status=ExportJob.Status.DONE)) == [new_job]

    # The command-line export and a new dataset version leave it out too.
    call_command("export", "--format", "jsonl", "--out", str(tmp_path / "all.jsonl"), stdout=io.StringIO())
    assert cid not in (tmp_path / "all.jsonl").read_text()
    assert not do_freeze_dataset_version("after").conversations.filter(pk=conversation.pk).exists()


def test_erasure_deletes_every_row_and_keeps_an_audit_record_without_personal_data(
    setting, scored_runs, django_capture_on_commit_callbacks
):
    conversation, participant = setting["conversation"], setting["participant"]
    pk, cid = conversation.pk, conversation.conversation_id
    turn_pks = list(conversation.turns.values_list("pk", flat=True))
    exported_id = export_pseudonym(participant.pseudonym)
    from scoring.models import CallTranscript

    output = RunConversation.objects.filter(conversation_id=pk).first()
    assert output is not None
    CallTranscript.objects.create(
        run_conversation=output, sequence=0, call_type="draft", role="em", model="m", messages=[], raw_reply="x"
    )

    out = io.StringIO()
    with pytest.raises(CommandError, match="--yes"):
        call_command("erase", exported_id, stdout=out)  # not interactive: must be confirmed
    with pytest.raises(CommandError, match="No participant is known as 'nobody'"):
        call_command("erase", "nobody", "--yes", stdout=out)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("erase", exported_id, "--yes", stdout=out)
    assert "Audit record #" in out.getvalue()

    from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
    from collection.models import Consent, PanasSurvey, ParticipantProfile, SensitiveProfile, Turn

    assert not Participant.objects.filter(pk=participant.pk).exists()
    assert not Conversation.objects.filter(pk=pk).exists()
    assert not Turn.objects.filter(pk__in=turn_pks).exists()
    for model in (MoodTag, BinaryJudgement, PairwiseComparison, AlternateResponses):
        assert not model.objects.filter(turn_id__in=turn_pks).exists()
    assert not PanasSurvey.objects.filter(conversation_id=pk).exists()
    for model in (Consent, ParticipantProfile, SensitiveProfile):
        assert not model.objects.filter(participant_id=participant.pk).exists()
    assert not ConversationScore.objects.filter(conversation_id=pk).exists()
    assert not RunConversation.objects.filter(conversation_id=pk).exists()
    assert not HumanAssignment.objects.filter(conversation_id=pk).exists()
    assert not setting["version"].conversations.filter(pk=pk).exists()
    for run in scored_runs:
        assert RunScore.objects.get(run=run).metrics["n_conversations"] == 14

    record = ErasureRecord.objects.get()
    assert record.via == "command" and record.erased_by is None
    assert record.rows_deleted["collection.Participant"] == 1
    assert record.rows_deleted["collection.Turn"] == len(turn_pks)
    assert record.rows_deleted["scoring.CallTranscript"] == 1  # prompts quote the conversation
    assert not CallTranscript.objects.exists()
    assert record.runs_rescored == [*sorted(r.pk for r in scored_runs), setting["assignment"].run_conversation.run_id]
    assert record.exports_withdrawn == [setting["job"].pk]
    stored = json.dumps([record.rows_deleted, record.runs_rescored, record.exports_withdrawn, record.via, str(record)])
    for personal in (participant.pseudonym, exported_id, cid, setting["token"]):
        assert personal not in stored


def test_the_admin_action_erases_for_researchers(setting, django_capture_on_commit_callbacks):
    participant = setting["participant"]
    client = setting["client"]  # a researcher: the research group may erase
    changelist = reverse("admin:collection_participant_changelist")
    page = client.get(changelist).content.decode()
    assert "erase_participants" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(changelist, {"action": "erase_participants", "_selected_action": [participant.pk]})
    assert response.status_code == 302
    assert not Participant.objects.filter(pk=participant.pk).exists()
    record = ErasureRecord.objects.get()
    assert record.via == "admin" and record.erased_by.username == "rita"


def test_staff_without_the_permission_cannot_erase(setting, django_user_model):
    participant = setting["participant"]
    from django.contrib.auth.models import Permission

    clerk = django_user_model.objects.create_user("clara", password="clerk-pass-12345", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_participant"))
    client = Client()
    client.force_login(clerk)
    changelist = reverse("admin:collection_participant_changelist")
    assert "erase_participants" not in client.get(changelist).content.decode()
    client.post(changelist, {"action": "erase_participants", "_selected_action": [participant.pk]})
    assert Participant.objects.filter(pk=participant.pk).exists()
    assert not ErasureRecord.objects.exists()
