"""attune demo: a working, populated platform from nothing, with no keys and no servers.

Every step is idempotent, so running the demo again keeps what is there (and
any conversations collected meanwhile) and only does what is missing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from attune_site.datadir import data_dir
from attunebench.catalogue import RESEARCH_ONLY_STATEMENT
from attunebench.replay.baselines import BASELINE_NAMES
from attunebench.sources import read_conversations
from collection.models import Conversation, Participant, Study, hash_token
from collection.setup import ensure_defaults
from datasets.imports import do_import_documents
from research.access.roles import do_make_researcher

DEMO_MODES = ("default", "omniscient")
#: Why the demo attests consent for the bundled sample data (kept with the import, shown in datasheets).
SYNTHETIC_CONSENT_NOTE = (
    "attune demo: the bundled sample_data/ is synthetic (no real participants); consent is attested so the "
    "participant-group analysis can be shown."
)
RESEARCHER_USERNAME = "researcher"
# What the demo printed first, kept in the data directory (owner-only) so a second start prints the same login
# and study link instead of invalidating them.
DEMO_LOGINS_FILE = "demo_logins.json"


def _stored_logins() -> dict[str, str]:
    try:
        stored = json.loads((data_dir() / DEMO_LOGINS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return (
        {k: v for k, v in stored.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(stored, dict)
        else {}
    )


def _store_logins(logins: dict[str, str]) -> None:
    path = data_dir() / DEMO_LOGINS_FILE
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(logins), encoding="utf-8")
    temp.chmod(0o600)
    temp.replace(path)


@contextmanager
def tasks_in_process() -> Iterator[None]:
    """Offline baselines cost nothing and take seconds: the demo never waits for a worker."""
    from attune_site.celery import app

    saved = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = saved


class Command(BaseCommand):
    help = (
        "Set up a demo: migrate, load sample_data/, run the three offline baselines in two modes, score them, "
        "create a researcher login (printed), print a participant study link, then serve the site."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
        parser.add_argument("--no-serve", action="store_true", help="set everything up, then exit")
        parser.add_argument(
            "--sample-data",
            default=str(settings.ATTUNE_SAMPLE_DATA_DIR),
            help="folder of canonical conversation files to load (default sample_data/)",
        )
        parser.add_argument(
            "--modes", nargs="+", default=list(DEMO_MODES), help="replay modes (default: default omniscient)"
        )
        parser.add_argument(
            "--attest-sensitive-consent",
            action="store_true",
            help="for a --sample-data folder of your own: attest that its participants consented to their "
            "diagnoses being stored (as attune import --attest-sensitive-consent). The bundled synthetic "
            "sample data is attested by the demo itself.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.step("Applying database migrations")
        call_command("migrate", interactive=False, verbosity=0)
        defaults = ensure_defaults()
        self.load_sample_data(options["sample_data"], options["attest_sensitive_consent"])
        for model in BASELINE_NAMES:
            for mode in options["modes"]:
                self.run_baseline(model, mode)
        logins = _stored_logins()
        password = self.researcher_login(logins.get("researcher_password", ""))
        token = self.study_link_token(defaults.study, logins.get("participant_token", ""))
        _store_logins({"researcher_password": password, "participant_token": token})

        host = "localhost" if options["host"] in {"127.0.0.1", "0.0.0.0"} else options["host"]
        base = f"http://{host}:{options['port']}"
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Attune demo is ready."))
        self.stdout.write(
            f"  Researcher dashboards: {base}/research/   user: {RESEARCHER_USERNAME}   password: {password}"
        )
        self.stdout.write(f"  Participant study link: {base}/s/{token}/")
        self.stdout.write(f"  Open enrolment link:    {base}/join/{defaults.study.slug}/")
        self.stdout.write(f"  API docs:               {base}/api/docs/")
        self.stdout.write(f"\n  {RESEARCH_ONLY_STATEMENT}\n")
        if not options["no_serve"]:
            call_command("serve", host=options["host"], port=options["port"])

    def step(self, text: str) -> None:
        self.stdout.write(f"- {text}...")

    def load_sample_data(self, folder: str, attest: bool) -> None:
        """Import the folder's new conversations; the bundled synthetic data comes with consent attested."""
        self.step(f"Loading sample conversations from {folder}")
        synthetic = Path(folder).resolve() == Path(settings.ATTUNE_SAMPLE_DATA_DIR).resolve()
        documents, problems = read_conversations([folder])
        if problems:
            raise CommandError("sample data has problems:\n" + "\n".join(str(p) for p in problems))
        present = set(Conversation.objects.values_list("conversation_id", flat=True))
        new = [(source, doc) for source, doc in documents if doc.conversationId not in present]
        result, record = do_import_documents(
            new,
            sources=[folder],
            attest_sensitive_consent=synthetic or attest,
            consent_note=SYNTHETIC_CONSENT_NOTE if synthetic else "",
        )
        if not result.ok or record is None:
            raise CommandError("\n".join(str(p) for p in result.problems))
        self.stdout.write(f"  {len(result.imported)} imported, {len(documents) - len(new)} already present")
        if record.diagnoses_stored and synthetic:
            self.stdout.write(
                f"  diagnoses of {record.diagnoses_stored} synthetic participant(s) stored: the demo attests consent "
                "for its synthetic sample data (kept with the import and shown in datasheets)"
            )
        if record.diagnoses_not_stored:
            self.stdout.write(
                f"  diagnoses of {record.diagnoses_not_stored} participant(s) not stored: no consent recorded "
                "(pass --attest-sensitive-consent if they consented)"
            )

    def run_baseline(self, model: str, mode: str) -> None:
        from scoring.models import EvaluationRun
        from scoring.replay_service import do_create_run, run_progress
        from scoring.run_control import start_run

        done = EvaluationRun.objects.filter(
            evaluated_model__name=model, mode=mode, status=EvaluationRun.Status.DONE
        ).first()
        complete = Conversation.objects.filter(status=Conversation.Status.COMPLETE).count()
        if done is not None and done.conversations_total == complete:
            self.stdout.write(f"- {model} / {mode}: already scored (run {done.pk})")
            return
        self.step(f"Replaying {complete} conversations with {model} / {mode}")
        run = do_create_run(model, mode)
        with tasks_in_process():
            start_run(run.pk)
        progress = run_progress(run.pk)
        self.stdout.write(
            f"  run {run.pk}: {progress['status']}, {progress['conversations_done']}/{progress['conversations_total']} "
            f"conversations, {progress['calls_made']} calls ({progress['calls_cached']} cached, "
            f"{progress['calls_failed']} failed)"
        )

    def study_link_token(self, study: Study, stored: str) -> str:
        """The demo's printed study link: the one printed before while it still opens the study, else a new
        one for an invited participant who has not started."""
        if (
            stored
            and Participant.objects.filter(
                token_hash=hash_token(stored), study=study, withdrawn_at__isnull=True, link_revoked_at__isnull=True
            ).exists()
        ):
            return stored
        unused = (
            Participant.objects.filter(
                study=study, consents__isnull=True, conversations__isnull=True, withdrawn_at__isnull=True
            )
            .order_by("created_at")
            .first()
        )
        if unused is None:
            return Participant.objects.create(study=study).token
        unused.issue_link()  # only the token's hash is stored: a fresh link is the only one that can be shown
        unused.save(update_fields=["token_hash", "link_issued_at", "link_revoked_at"])
        return unused.token

    def researcher_login(self, stored: str) -> str:
        """A staff account in the research group; the password printed before stays while it still signs in."""
        user, _ = get_user_model().objects.get_or_create(username=RESEARCHER_USERNAME)
        if stored and user.check_password(stored):
            password = stored
        else:
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
        do_make_researcher(user)
        return password
