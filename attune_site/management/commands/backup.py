"""``attune backup --out FILE``: one consistent archive of the database, the keys and the kept files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from attune_site.backup import BackupError, do_backup


class Command(BaseCommand):
    help = (
        "Back up the study: the database (a consistent snapshot, also while the site runs), the secret and "
        "pseudonym keys, and the export and run files, into one archive with a manifest and checksums. The "
        "archive holds participants' data and the keys: store it as carefully as the database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", required=True, type=Path, help="the archive to write (.tar.gz); never overwritten")

    def handle(self, *args: Any, out: Path, **options: Any) -> None:
        try:
            manifest = do_backup(out, progress=lambda step: self.stderr.write(f"backing up: {step}"))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        rows = sum(manifest["rows"].values())
        members = len(manifest["sha256"])
        self.stdout.write(
            self.style.SUCCESS(f"Wrote {out}: {manifest['engine']} database, {rows} rows, {members} files.")
        )
        if settings.ATTUNE_STORAGE_URL:
            self.stdout.write(
                f"Export files are in {settings.ATTUNE_STORAGE_URL}, not in this archive: back the bucket up by "
                "the store's own means, on the same schedule (docs/backups.md)."
            )
