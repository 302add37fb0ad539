"""attune import PATH...: validate every file first, then write all in one transaction (files read twice, streamed)."""

import sys

from django.core.management.base import BaseCommand, CommandError

from datasets.imports import ATTESTATION, do_import_paths


class Command(BaseCommand):
    help = (
        "Import canonical conversation files (SPEC 3.1) from files, folders (searched recursively) or .zip "
        "archives; a .jsonl file (the JSONL export) holds one conversation per line. Everything is validated "
        "first; if any file has a problem, nothing is written and every problem is listed (naming the file, "
        "and the line of a .jsonl file). Diagnoses are stored only under recorded consent: the file's own "
        "sensitiveDataConsent, or --attest-sensitive-consent."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "paths", nargs="+", metavar="PATH", help="conversation .json or .jsonl files, folders or .zip archives"
        )
        parser.add_argument(
            "--attest-sensitive-consent",
            action="store_true",
            help=f"attest that: {ATTESTATION} Kept with the import and shown in every datasheet. Without it, "
            "diagnoses of participants whose files record no consent are not stored.",
        )
        parser.add_argument(
            "--consent-note",
            default="",
            metavar="TEXT",
            help="what the attestation rests on (e.g. the ethics approval and consent form), kept with it",
        )

    def handle(self, *args, **options):
        if options["consent_note"] and not options["attest_sensitive_consent"]:
            raise CommandError("--consent-note describes an attestation: give it with --attest-sensitive-consent")
        interactive = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if interactive and (done == total or done % 50 == 0):
                self.stderr.write(f"\rimported {done}/{total}", ending="")

        result, record = do_import_paths(
            options["paths"],
            attest_sensitive_consent=options["attest_sensitive_consent"],
            consent_note=options["consent_note"],
            progress=progress,
        )
        if interactive:
            self.stderr.write("")
        if not result.ok or record is None:
            for problem in result.problems:
                self.stderr.write(str(problem))
            raise CommandError(
                f"{len(result.problems)} problem(s) found; nothing was imported. "
                "Fix the files and run the import again."
            )
        self.stdout.write(self.style.SUCCESS(f"Imported {len(result.imported)} conversation(s) (import {record.pk})."))
        if record.diagnoses_stored:
            how = "the files' consent records" + (" or your attestation" if record.sensitive_consent_attested else "")
            self.stdout.write(f"Diagnoses stored for {record.diagnoses_stored} participant(s), under {how}.")
        if record.diagnoses_not_stored:
            self.stdout.write(
                self.style.WARNING(
                    f"Diagnoses of {record.diagnoses_not_stored} participant(s) were NOT stored: their files record "
                    "no consent to sensitive data (SPEC 2.5), so participant-group analyses leave them out. If they "
                    "consented, import such files with --attest-sensitive-consent."
                )
            )
