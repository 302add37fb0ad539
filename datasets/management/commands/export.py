"""attune export: canonical JSON files, JSONL or a flat Parquet table of turns."""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from datasets.exchange import EXPORT_FORMATS, export_conversations, export_selection, left_out_counts


class Command(BaseCommand):
    help = (
        "Export every complete, non-withdrawn conversation (--include-unfinished adds unfinished and empty ones, "
        "flagged in each record, with unanswered steps as null). json: one canonical file per conversation in the "
        "folder OUT (or a .zip when OUT ends in .zip); jsonl: one line per conversation; parquet: one row per turn "
        "(one row with null turn columns for a conversation without turns). "
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
            "--include-unfinished",
            action="store_true",
            help="also export conversations the participant has not finished (flagged: metadata.completeness)",
        )
        parser.add_argument(
            "--status",
            action="append",
            default=None,
            help="only conversations with this status (repeatable; default: all but withdrawn)",
        )

    def handle(self, *args, **options):
        created = check_out_path(options["format"], options["out"])
        queryset = export_selection(options["include_unfinished"])
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
        self.stdout.write(self.style.SUCCESS(f"Exported {count} conversation(s) into {created} {options['out']}."))
        out = left_out_counts(queryset)
        reasons = [
            (out["unfinished"], "unfinished"),
            (out["empty"], "empty (no reply)"),
            (out["withdrawn"], "withdrawn"),
            (out["quality_excluded"], "excluded for quality by a researcher"),
            (out["not_selected"], "complete but not of the --status asked for"),
        ]
        if any(n for n, _ in reasons):
            hint = "" if options["include_unfinished"] else "; --include-unfinished exports unfinished ones too"
            self.stdout.write(f"Left out: {', '.join(f'{n} {why}' for n, why in reasons if n)}{hint}.")


def check_out_path(fmt: str, out: str) -> str:
    """What ``--out`` will be ("the folder", "the zip archive", "the file"); refuses a name that says otherwise,
    before anything is written."""
    path = Path(out)
    if fmt == "json":
        if path.suffix.lower() == ".zip":
            return "the zip archive"
        if path.suffix and not path.is_dir():
            raise CommandError(
                f"--format json writes a folder of .json files (or a .zip archive), and --out {out} looks like a "
                f"file name: give a folder (e.g. --out {path.with_suffix('')}) or a .zip, or use --format jsonl "
                "for one file"
            )
        if path.exists() and not path.is_dir():
            raise CommandError(f"--out {out} is a file, and --format json writes a folder: give a folder name")
        return "the folder"
    if path.is_dir():
        raise CommandError(f"--out {out} is a folder, and --format {fmt} writes one file: give a file name")
    return "the file"
