"""Recruitment-platform entry and exit: enrol once per platform id, hashed id, return codes."""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, connections, transaction
from django.test import Client
from django.urls import reverse

from collection import recruitment
from collection.models import Participant, Study, hash_platform_id, hash_platform_session, hash_token
from collection.study_flow import locate
from tests.migrations import migrate_to_newest, unapply

COMPLETE_URL = "https://app.prolific.com/submissions/complete"
PID = "5f1e2d3c4b5a69788796a5b4"


def set_up_for_platform(study: Study, **extra: object) -> Study:
    """The demo study with Prolific's completion URL and three distinct codes."""
    fields = {
        "platform_completion_url": COMPLETE_URL,
        "platform_completion_code": "C1DONE",
        "platform_withdrawal_code": "C2WITHDREW",
        "platform_screenout_code": "C3NOCONSENT",
        **extra,
    }
    Study.objects.filter(pk=study.pk).update(**fields)
    study.refresh_from_db()
    return study


@pytest.fixture
def platform_study(study) -> Study:
    return set_up_for_platform(study)


def entry_query(pid: str = PID, study_id: str = "prolific-study-1", session: str = "sess-1") -> dict[str, str]:
    return {"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session}


def enter(client: Client, study: Study, query: dict[str, str]):
    """GET the entry page, then press its button (post the fields it carries)."""
    url = reverse("collection:enter", kwargs={"slug": study.slug})
    page = client.get(url, query)
    assert page.status_code == 200, page.content
    return client.post(url, query)


def token_of(response) -> str:
    return response["Location"].split("/s/")[1].split("/")[0]


def complete_study(client: Client, participant: Participant) -> None:
    """Walk the whole study through the pages, as test_participant_flow's Walker does."""
    from tests.web.test_participant_flow import Walker

    walker = Walker(client, participant)
    walker.to_chat()
    for number in range(1, participant.study.min_turns + 1):
        walker.turn(number)
    walker.finish()


def test_the_entry_page_writes_nothing_and_the_post_enrols_once(client, platform_study):
    url = reverse("collection:enter", kwargs={"slug": platform_study.slug})
    page = client.get(url, entry_query())
    assert page.status_code == 200 and b"Start" in page.content
    assert Participant.objects.count() == 0
    first = client.post(url, entry_query())
    assert first.status_code == 302
    participant = Participant.objects.get()
    assert participant.study == platform_study
    assert participant.platform_id_hash == hash_platform_id(PID)
    assert locate(participant).step == "consent"


def test_a_returning_id_resumes_its_own_participant_in_its_own_browser(client, platform_study):
    first = enter(client, platform_study, entry_query())
    other = enter(Client(), platform_study, entry_query(pid="another-participant-id"))
    again = enter(client, platform_study, entry_query(session="sess-9"))  # the same browser, a later session
    assert Participant.objects.count() == 2
    mine = Participant.objects.get(platform_id_hash=hash_platform_id(PID))
    # the returning browser gets a working link to its own participant (the old link is replaced)
    assert Participant.objects.get(token_hash=hash_token(token_of(again))) == mine
    assert token_of(again) != token_of(first) and token_of(again) != token_of(other)
    page = Client().get(f"/s/{token_of(again)}/", follow=True)
    assert page.status_code == 200 and b"About this study" in page.content
    # the page of a returning id says so, to the browser that enrolled
    returning = client.get(reverse("collection:enter", kwargs={"slug": platform_study.slug}), entry_query())
    assert b"Welcome back" in returning.content


def test_a_changed_device_resumes_with_the_platform_session_it_enrolled_with(client, platform_study):
    enter(client, platform_study, entry_query())
    phone = Client()  # another device: no cookie, but the platform repeats the session id when reopened there
    again = enter(phone, platform_study, entry_query())
    mine = Participant.objects.get()
    assert Participant.objects.get(token_hash=hash_token(token_of(again))) == mine
    assert phone.get(f"/s/{token_of(again)}/", follow=True).status_code == 200


def test_knowing_a_platform_id_takes_over_nobody(client, platform_study):
    """Someone with only the participant's platform id (no session id, not their browser) gets a calm page;
    no link is issued and the participant's own link keeps working."""
    first = enter(client, platform_study, entry_query())
    mine = Participant.objects.get()
    link_issued = mine.link_issued_at
    attacker = Client()
    url = reverse("collection:enter", kwargs={"slug": platform_study.slug})
    for response in (
        attacker.get(url, entry_query(session="guessed")),
        attacker.post(url, entry_query(session="guessed")),
    ):
        assert response.status_code == 409
        page = response.content.decode()
        assert "already in progress" in page and "personal study link" in page
        assert "/s/" not in page and "Welcome back" not in page
    mine.refresh_from_db()
    assert mine.link_issued_at == link_issued and mine.link_revoked_at is None
    assert Participant.objects.count() == 1
    page = client.get(f"/s/{token_of(first)}/", follow=True)  # the victim's own link still works
    assert page.status_code == 200 and b"About this study" in page.content


def test_the_same_id_in_another_study_is_another_participant(client, platform_study):
    second = Study.objects.create(
        slug="second", title="Second", information="i", crisis_resources="c", open_enrolment=False
    )
    set_up_for_platform(second)
    enter(client, platform_study, entry_query())
    enter(client, second, entry_query())
    assert sorted(Participant.objects.values_list("study__slug", flat=True)) == sorted([platform_study.slug, "second"])


def test_the_database_refuses_a_second_participant_for_one_id(platform_study):
    Participant.objects.create(study=platform_study, platform_id_hash=hash_platform_id(PID))
    with pytest.raises(IntegrityError), transaction.atomic():
        Participant.objects.create(study=platform_study, platform_id_hash=hash_platform_id(PID))
    # participants without a platform id are not held by the constraint
    Participant.objects.create(study=platform_study)
    Participant.objects.create(study=platform_study)


def test_an_id_enrolled_between_look_and_create_is_resumed_not_duplicated(platform_study, monkeypatch):
    """The unique constraint is the last word: a row made by another worker after our look is taken, not copied."""
    entry = recruitment.read_entry(platform_study, entry_query())
    theirs = Participant.objects.create(
        study=platform_study,
        platform_id_hash=entry.platform_id_hash,
        platform_session_hash=entry.platform_session_hash,
    )
    real = recruitment._enrolled
    looks: list[int] = []

    def blind_first_look(study, digest):
        looks.append(1)
        return None if len(looks) == 1 else real(study, digest)

    monkeypatch.setattr(recruitment, "_enrolled", blind_first_look)
    participant, created = recruitment.do_platform_enrol(entry)
    assert (participant.pk, created) == (theirs.pk, False) and len(looks) == 2
    assert Participant.objects.count() == 1


@pytest.mark.skipif(connection.vendor == "sqlite", reason="threads need a server database (run with DATABASE_URL)")
@pytest.mark.django_db(transaction=True)
def test_simultaneous_entries_of_one_id_make_one_participant(demo_defaults):
    study = set_up_for_platform(demo_defaults.study)
    entry = recruitment.read_entry(study, entry_query())
    barrier = threading.Barrier(4)
    found: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=60)
            participant, _ = recruitment.do_platform_enrol(entry)
            found.append(participant.pk)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(found) == 4 and len(set(found)) == 1
    assert Participant.objects.filter(study=study).count() == 1


def test_the_raw_id_is_stored_nowhere_and_the_hash_is_keyed(platform_study, settings):
    enter(Client(), platform_study, entry_query())
    participant = Participant.objects.get()
    assert not hasattr(participant, "platform_id")
    assert PID not in str(Participant.objects.values().get())
    assert participant.platform_id_hash == hash_platform_id(PID)
    assert hash_platform_id(PID, key="another deployment's key") != participant.platform_id_hash
    # no study or session id is kept either: the session id only as its keyed hash
    assert "prolific-study-1" not in str(Participant.objects.values().get())
    assert "sess-1" not in str(Participant.objects.values().get())
    assert participant.platform_session_hash == hash_platform_session("sess-1")


def test_exports_hold_neither_the_id_nor_its_hash(client, platform_study, tmp_path):
    response = enter(client, platform_study, entry_query())
    participant = Participant.objects.get()
    participant.token = token_of(response)
    complete_study(client, participant)
    for fmt, name in (("jsonl", "out.jsonl"), ("parquet", "out.parquet"), ("json", "out.zip")):
        call_command("export", "--format", fmt, "--out", str(tmp_path / name))
        data = (tmp_path / name).read_bytes()
        assert PID.encode() not in data and participant.platform_id_hash.encode() not in data
        assert b"prolific-study-1" not in data and b"sess-1" not in data


def test_finishing_redirects_to_the_platform_with_the_completion_code(client, platform_study):
    response = enter(client, platform_study, entry_query())
    participant = Participant.objects.get()
    participant.token = token_of(response)
    complete_study(client, participant)
    back = client.get(f"/s/{participant.token}/return/")
    assert back.status_code == 302
    assert back["Location"] == COMPLETE_URL + "?cc=C1DONE"
    done = client.get(f"/s/{participant.token}/thank-you/")
    assert b"Return to your recruitment website" in done.content


def test_withdrawal_and_screen_out_have_their_own_codes(client, platform_study):
    withdrawing = enter(client, platform_study, entry_query(pid="withdrawing"))
    token = token_of(withdrawing)
    assert client.get(f"/s/{token}/return/")["Location"] == f"/s/{token}/"  # not at an end: back to the study
    client.post(f"/s/{token}/withdraw/", {"confirm": "yes"})
    page = client.get(f"/s/{token}/withdraw/")
    assert b"Return to your recruitment website" in page.content
    assert client.get(f"/s/{token}/return/")["Location"] == COMPLETE_URL + "?cc=C2WITHDREW"

    declining = enter(Client(), platform_study, entry_query(pid="declining"))
    token = token_of(declining)
    consent = client.get(f"/s/{token}/consent/")
    assert f"/s/{token}/not-taking-part/".encode() in consent.content
    assert client.get(f"/s/{token}/not-taking-part/").status_code == 200
    left = client.post(f"/s/{token}/not-taking-part/")
    assert left["Location"] == f"/s/{token}/return/"
    assert client.get(left["Location"])["Location"] == COMPLETE_URL + "?cc=C3NOCONSENT"
    declined = Participant.objects.get(platform_id_hash=hash_platform_id("declining"))
    assert declined.screened_out_at is not None and declined.is_withdrawn
    # coming back with the same id resumes the screened-out participant, not a new one
    again = enter(Client(), platform_study, entry_query(pid="declining"))
    assert b"You are not taking part" in Client().get(f"/s/{token_of(again)}/").content
    assert Participant.objects.filter(platform_id_hash=hash_platform_id("declining")).count() == 1


def test_the_code_parameter_and_other_parameters_are_kept(platform_study):
    set_up_for_platform(platform_study, platform_completion_url=COMPLETE_URL + "?src=x", platform_code_param="code")
    url = recruitment.return_url(platform_study, recruitment.COMPLETED)
    parts = urlsplit(url)
    assert parse_qs(parts.query) == {"src": ["x"], "code": ["C1DONE"]}


def test_parameter_names_are_set_per_study(client, platform_study):
    set_up_for_platform(
        platform_study, platform_participant_param="pid", platform_study_param="sid", platform_session_param="ses"
    )
    url = reverse("collection:enter", kwargs={"slug": platform_study.slug})
    assert client.get(url, entry_query()).status_code == 400  # Prolific's names no longer count here
    client.post(url, {"pid": "panel-7", "sid": "s", "ses": "x"})
    assert Participant.objects.get().platform_id_hash == hash_platform_id("panel-7")


@pytest.mark.parametrize(
    ("query", "status", "phrase"),
    [
        ({}, 400, b"missing the details"),
        ({"PROLIFIC_PID": PID}, 400, b"missing the details"),
        ({"PROLIFIC_PID": "", "STUDY_ID": "s", "SESSION_ID": "x"}, 400, b"missing the details"),
        ({"PROLIFIC_PID": "x" * 129, "STUDY_ID": "s", "SESSION_ID": "x"}, 400, b"missing the details"),
    ],
)
def test_an_entry_without_the_ids_gets_a_calm_page(client, platform_study, query, status, phrase):
    url = reverse("collection:enter", kwargs={"slug": platform_study.slug})
    for response in (client.get(url, query), client.post(url, query)):
        assert response.status_code == status
        assert phrase in response.content and b"Nothing has been recorded" in response.content
    assert Participant.objects.count() == 0


def test_a_closed_unknown_unset_or_other_study_entry_is_refused_calmly(client, study):
    url = reverse("collection:enter", kwargs={"slug": study.slug})
    assert client.get(url, entry_query()).status_code == 404  # not set up for a platform
    set_up_for_platform(study, platform_study_id="prolific-study-1")
    assert client.get(url, entry_query(study_id="someone-elses")).status_code == 400
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    closed = client.post(url, entry_query())
    assert closed.status_code == 404 and b"not taking part in recruitment" in closed.content
    unknown = client.get(reverse("collection:enter", kwargs={"slug": "no-such-study"}), entry_query())
    assert unknown.status_code == 404 and b"Research study" in unknown.content
    assert Participant.objects.count() == 0


def test_a_full_study_takes_returning_ids_but_no_new_ones(client, platform_study):
    enter(client, platform_study, entry_query())
    Study.objects.filter(pk=platform_study.pk).update(max_participants=1)
    assert enter(Client(), platform_study, entry_query()).status_code == 302
    url = reverse("collection:enter", kwargs={"slug": platform_study.slug})
    full = Client().post(url, entry_query(pid="late"))
    assert full.status_code == 403 and Participant.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_stored_ids_and_drops_the_column(schema_restored, settings):
    old = unapply("collection", "0008_platform_entry_and_live_spend")
    OldStudy = old.get_model("collection", "Study")
    OldParticipant = old.get_model("collection", "Participant")
    study = OldStudy.objects.create(slug="mig", title="m", information="i", crisis_resources="c")
    first = OldParticipant.objects.create(study=study, platform_id="pid-1", token_hash="t1", pseudonym="p-1")
    twice = OldParticipant.objects.create(study=study, platform_id="pid-1", token_hash="t2", pseudonym="p-2")
    none = OldParticipant.objects.create(study=study, platform_id="", token_hash="t3", pseudonym="p-3")

    migrate_to_newest()
    hashes = dict(Participant.objects.filter(study__slug="mig").values_list("pk", "platform_id_hash"))
    assert hashes == {first.pk: hash_platform_id("pid-1"), twice.pk: "", none.pk: ""}
    columns = [
        c.name for c in connection.introspection.get_table_description(connection.cursor(), "collection_participant")
    ]
    assert "platform_id" not in columns and "platform_id_hash" in columns


def test_the_admin_never_shows_the_hash_or_searches_by_it(admin_client, platform_study):
    enter(Client(), platform_study, entry_query())
    participant = Participant.objects.get()
    page = admin_client.get(reverse("admin:collection_participant_change", args=[participant.pk]))
    assert page.status_code == 200 and participant.platform_id_hash.encode() not in page.content
    found = admin_client.get(reverse("admin:collection_participant_changelist"), {"q": PID})
    assert participant.pseudonym.encode() not in found.content
