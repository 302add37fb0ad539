"""``attune storage check``: the file store beside the database, in both directions.

Lists the stored files nothing references (a worker that died mid-upload, a
deletion that failed: files that may hold a withdrawn participant's data) and the
finished exports whose file is missing. Exit code 1 when it found either.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from datasets.store import audit_store, export_store


class Command(BaseCommand):
    help = (
        "storage check: list files in the file store (the data directory, or the ATTUNE_STORAGE_URL bucket) that "
        "no export references, and finished exports whose file is missing. Exit code 1 when there is either."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["check"], help="check: compare the store with the database")

    def handle(self, *args: Any, **options: Any) -> None:
        store = export_store()
        where = getattr(store, "bucket_name", None) or getattr(store, "location", "")
        try:
            audit = audit_store()
        except Exception as exc:  # the store is unreachable or refuses: say which and why
            raise CommandError(f"could not read the file store {where}: {type(exc).__name__}: {exc}") from exc
        self.stdout.write(f"file store: {type(store).__name__} {where}; {audit.checked} stored file(s)")
        for name in audit.unreferenced:
            self.stdout.write(f"unreferenced: {name}")
        for pk, name in audit.missing:
            self.stdout.write(f"missing: export #{pk} has no stored file {name}")
        if not audit.clean:
            raise CommandError(
                f"{len(audit.unreferenced)} unreferenced file(s), {len(audit.missing)} missing file(s)", returncode=1
            )
        self.stdout.write("every stored file is referenced and every finished export has its file")
