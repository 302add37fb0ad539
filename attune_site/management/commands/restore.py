"""``attune restore FILE``: restore a backup into an empty database and data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attune_site.backup import BackupError, do_restore


class Command(BaseCommand):
    help = (
        "Restore an archive written by 'attune backup': checks its manifest and every checksum first, refuses a "
        "database or data directory that already holds data (unless --force) and a backup of another database "
        "engine, then restores the database, the keys and the export and run files, and compares row counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", type=Path, help="the archive 'attune backup' wrote")
        parser.add_argument("--force", action="store_true", help="replace a database and files that hold data")

    def handle(self, *args: Any, archive: Path, force: bool, **options: Any) -> None:
        try:
            report = do_restore(archive, force=force, progress=lambda step: self.stderr.write(f"restoring: {step}"))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        for warning in report.warnings:
            self.stderr.write(self.style.WARNING(warning))
        self.stdout.write(
            self.style.SUCCESS(
                f"Restored {archive}: {report.engine} database, {sum(report.rows.values())} rows (every table as "
                f"in the backup), {report.files} files, and the keys."
            )
        )
