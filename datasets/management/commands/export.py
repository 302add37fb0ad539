"""attune export: canonical JSON files, JSONL or a flat Parquet table of turns."""

import sys

from django.core.management.base import BaseCommand, CommandError

from datasets.exchange import EXPORT_FORMATS, export_conversations, exportable_conversations


class Command(BaseCommand):
    help = (
        "Export every non-withdrawn conversation. json: one canonical file per conversation in the folder "
        "OUT (or a .zip when OUT ends in .zip); jsonl: one line per conversation; parquet: one row per turn. "
        "Participant ids are always pseudonyms; original models appear by alias unless --include-model-identity."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", choices=EXPORT_FORMATS, default="json", help="output format (default json)")
        parser.add_argument("--out", required=True, help="output folder (json), .zip (json) or file (jsonl, parquet)")
        parser.add_argument(
            "--include-model-identity",
            action="store_true",
            help="write original models' real identities instead of their aliases",
        )
        parser.add_argument(
            "--status",
            action="append",
            default=None,
            help="only conversations with this status (repeatable; default: all but withdrawn)",
        )

    def handle(self, *args, **options):
        queryset = exportable_conversations()
        if options["status"]:
            queryset = queryset.filter(status__in=options["status"])
        interactive = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if interactive and (done == total or done % 50 == 0):
                self.stderr.write(f"\rexported {done}/{total}", ending="")

        try:
            count = export_conversations(
                queryset, options["format"], options["out"], options["include_model_identity"], progress
            )
        except OSError as exc:
            raise CommandError(f"cannot write {options['out']}: {exc}") from exc
        if interactive:
            self.stderr.write("")
        self.stdout.write(
            self.style.SUCCESS(f"Exported {count} conversation(s) to {options['out']} ({options['format']}).")
        )
