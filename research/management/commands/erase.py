"""``attune erase PARTICIPANT``: delete everything stored about one participant, keeping an audit record."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from research.privacy.erasure import ErasureError, access_participant_to_erase, do_erase_participant


class Command(BaseCommand):
    help = (
        "Erase a participant: their conversations, annotations, surveys, profile, consent, run outputs, scores "
        "and rater assignments, in dependency order. Affected runs are re-scored and export files holding them "
        "withdrawn from download and regenerated. PARTICIPANT is a pseudonym as the admin or an export shows it, "
        "or the id an imported file carried. An audit record (no personal data) is kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("participant", help="pseudonym (admin or export) or imported participant id")
        parser.add_argument("--yes", action="store_true", help="erase without asking (required when not interactive)")

    def handle(self, *args: Any, participant: str, yes: bool, **options: Any) -> None:
        try:
            target = access_participant_to_erase(participant)
        except ErasureError as exc:
            raise CommandError(str(exc)) from exc
        if not yes:
            if not self.stdin_isatty():
                raise CommandError("Erasure cannot be undone: pass --yes to confirm.")
            answer = input(f"Erase participant {participant!r} and all their data? This cannot be undone. [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                raise CommandError("Nothing was erased.")
        record = do_erase_participant(target, via="command")
        deleted = sum(record.rows_deleted.values())
        self.stdout.write(
            self.style.SUCCESS(
                f"Erased: {deleted} row(s) deleted; runs re-scored: {record.runs_rescored or 'none'}; "
                f"exports withdrawn: {record.exports_withdrawn or 'none'}. Audit record #{record.pk}."
            )
        )

    @staticmethod
    def stdin_isatty() -> bool:
        import sys

        return sys.stdin.isatty()
