"""attune verify DATASET_DIR RESULTS_DIR: check a published dataset and results site, printing every difference."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attunebench.results_site import verify


class Command(BaseCommand):
    help = (
        "Check a published dataset folder and results site: every file's sha256 against SHA256SUMS, the "
        "dataset's content hash over its records, every table against the records, the published scores and "
        "leaderboard against a re-scoring of the published run outputs (bit for bit), and each snapshot's "
        "content hash. Prints what was checked and exactly what differs; exits 1 on any difference. Needs no "
        "database."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset_dir", metavar="DATASET_DIR", help="a folder written by attune publish dataset")
        parser.add_argument("results_dir", metavar="RESULTS_DIR", help="a folder written by attune publish results")

    def handle(self, *args: Any, **options: Any) -> None:
        result = verify(options["dataset_dir"], options["results_dir"])
        for line in result.checked:
            self.stdout.write(f"checked: {line}")
        if result.differences:
            for line in result.differences:
                self.stderr.write(f"DIFFERS: {line}")
            raise CommandError(f"{len(result.differences)} difference(s): the publication does not hold")
        self.stdout.write(self.style.SUCCESS("OK: every checksum, the content hash and every score hold."))
