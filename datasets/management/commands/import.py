"""attune import PATH...: validate every file first, then write all in one transaction."""

from django.core.management.base import BaseCommand, CommandError

from datasets.exchange import import_paths


class Command(BaseCommand):
    help = (
        "Import canonical conversation files (SPEC 3.1) from files, folders (searched recursively) or .zip "
        "archives; a .jsonl file (the JSONL export) holds one conversation per line. Everything is validated "
        "first; if any file has a problem, nothing is written and every problem is listed (naming the file, "
        "and the line of a .jsonl file)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "paths", nargs="+", metavar="PATH", help="conversation .json or .jsonl files, folders or .zip archives"
        )

    def handle(self, *args, **options):
        result = import_paths(options["paths"])
        if not result.ok:
            for problem in result.problems:
                self.stderr.write(str(problem))
            raise CommandError(
                f"{len(result.problems)} problem(s) found; nothing was imported. "
                "Fix the files and run the import again."
            )
        self.stdout.write(self.style.SUCCESS(f"Imported {len(result.imported)} conversation(s)."))
