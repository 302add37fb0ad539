"""attune demo: a working, populated platform from nothing, with no keys and no servers.

Every step is idempotent, so running the demo again keeps what is there (and
any conversations collected meanwhile) and only does what is missing.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from attunebench.catalogue import RESEARCH_ONLY_STATEMENT
from attunebench.replay.baselines import BASELINE_NAMES
from attunebench.sources import read_conversations
from collection.models import Conversation, Participant, Study
from collection.setup import ensure_defaults
from datasets.exchange import import_documents
from research.access.roles import do_make_researcher

DEMO_MODES = ("default", "omniscient")
RESEARCHER_USERNAME = "researcher"


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

    def handle(self, *args: Any, **options: Any) -> None:
        self.step("Applying database migrations")
        call_command("migrate", interactive=False, verbosity=0)
        defaults = ensure_defaults()
        self.load_sample_data(options["sample_data"])
        for model in BASELINE_NAMES:
            for mode in options["modes"]:
                self.run_baseline(model, mode)
        password = self.researcher_login()
        participant = self.unused_participant(defaults.study)

        host = "localhost" if options["host"] in {"127.0.0.1", "0.0.0.0"} else options["host"]
        base = f"http://{host}:{options['port']}"
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Attune demo is ready."))
        self.stdout.write(
            f"  Researcher dashboards: {base}/research/   user: {RESEARCHER_USERNAME}   password: {password}"
        )
        self.stdout.write(f"  Participant study link: {base}/s/{participant.token}/")
        self.stdout.write(f"  Open enrolment link:    {base}/join/{defaults.study.slug}/")
        self.stdout.write(f"  API docs:               {base}/api/docs/")
        self.stdout.write(f"\n  {RESEARCH_ONLY_STATEMENT}\n")
        if not options["no_serve"]:
            call_command("serve", host=options["host"], port=options["port"])

    def step(self, text: str) -> None:
        self.stdout.write(f"- {text}...")

    def load_sample_data(self, folder: str) -> None:
        self.step(f"Loading sample conversations from {folder}")
        documents, problems = read_conversations([folder])
        if problems:
            raise CommandError("sample data has problems:\n" + "\n".join(str(p) for p in problems))
        present = set(Conversation.objects.values_list("conversation_id", flat=True))
        new = [(source, doc) for source, doc in documents if doc.conversationId not in present]
        result = import_documents(new)
        if not result.ok:
            raise CommandError("\n".join(str(p) for p in result.problems))
        self.stdout.write(f"  {len(result.imported)} imported, {len(documents) - len(new)} already present")

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

    def unused_participant(self, study: Study) -> Participant:
        """The demo's printed study link: an invited participant who has not started, reused across runs."""
        unused = (
            Participant.objects.filter(
                study=study, consents__isnull=True, conversations__isnull=True, withdrawn_at__isnull=True
            )
            .order_by("created_at")
            .first()
        )
        if unused is None:
            return Participant.objects.create(study=study)
        unused.issue_link()  # only the token's hash is stored: a fresh link is the only one that can be shown
        unused.save(update_fields=["token_hash", "link_issued_at", "link_revoked_at"])
        return unused

    def researcher_login(self) -> str:
        """A staff account in the research group, with a fresh password printed on every demo start."""
        password = secrets.token_urlsafe(9)
        user, _ = get_user_model().objects.get_or_create(username=RESEARCHER_USERNAME)
        user.set_password(password)
        user.save()
        do_make_researcher(user)
        return password
