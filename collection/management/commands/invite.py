"""attune invite: create participants for a study and print their personal study links."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.urls import reverse

from collection.models import Study
from collection.study_flow import do_enrol


class Command(BaseCommand):
    help = (
        "Create N participants in a study and print one personal link per line (pseudonym, then link). "
        "Each link is a secret: send it to one person only. It lets them resume where they left off."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--study", required=True, metavar="SLUG", help="the study's slug")
        parser.add_argument("--count", type=int, default=1, metavar="N", help="how many participants (default 1)")
        parser.add_argument(
            "--base-url",
            default="http://localhost:8000",
            help="site address the links start with (default http://localhost:8000)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count = options["count"]
        if count < 1:
            raise CommandError("--count must be 1 or more")
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            known = ", ".join(Study.objects.order_by("slug").values_list("slug", flat=True)) or "none yet"
            raise CommandError(f"no study with slug {options['study']!r} (known: {known})")
        if not study.is_open:
            raise CommandError(f"study {study.slug!r} is not open; open it before inviting participants")
        base = options["base_url"].rstrip("/")
        with transaction.atomic():
            participants = [do_enrol(study) for _ in range(count)]
        for participant in participants:
            link = base + reverse("collection:resume", kwargs={"token": participant.token})
            self.stdout.write(f"{participant.pseudonym}\t{link}")
