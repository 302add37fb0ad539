"""``attune score``: score EM run files against conversation files, no database needed.

A thin wrapper: reading, scoring and formatting live in ``attunebench.metrics``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

SKIPPED_EXIT_CODE = 2


class Command(BaseCommand):
    help = (
        "Score evaluated-model run files against canonical conversation files (SPEC 5) and print a "
        "leaderboard: model, mode, number of conversations, composite ± standard error, the four "
        "capability scores and turn coverage. Reads files, folders (any nesting) and .zip archives; "
        "never touches the database. Malformed files, and runs whose conversation is missing, are "
        f"named and skipped, and the command then exits with status {SKIPPED_EXIT_CODE} (0 when "
        "everything was scored). A survey answer that is not one of the listed options, in ground "
        "truth or prediction, is only a warning: the file is scored and that answer matches nothing."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--conversations",
            nargs="+",
            required=True,
            metavar="PATH",
            help="ground-truth conversation files: one or more .json files, folders (searched "
            "recursively) or .zip archives; run files found here are ignored",
        )
        parser.add_argument(
            "--runs",
            nargs="+",
            required=True,
            metavar="PATH",
            help="evaluated-model run outputs (one per conversation, model and mode): files, "
            "folders or .zip archives; conversation files found here are ignored",
        )
        parser.add_argument(
            "--json",
            metavar="OUT",
            help='write the full report to OUT as JSON: {"conversations": [per-conversation '
            'scores with per-turn metrics], "aggregates": [one row per model and mode]}',
        )
        parser.add_argument(
            "--csv",
            metavar="OUT",
            help="write the aggregate rows (one line per model and mode, pooled binary metrics "
            "flattened, capability scores 0-1) to OUT as CSV",
        )
        parser.add_argument(
            "--details",
            action="store_true",
            help="add a 'details' object to each conversation in the JSON (PANAS sides, item-level "
            "scores, HP-perspective gap, capabilities, metadata); off by default so the JSON "
            "keeps exactly the documented keys",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from attunebench.metrics.report import (
            aggregates_csv,
            format_leaderboard,
            format_problems,
            format_warnings,
            load_inputs,
            score_inputs,
            write_json,
        )

        loaded = load_inputs(options["conversations"], options["runs"])
        result = score_inputs(loaded)
        if loaded.warnings:
            self.stderr.write(format_warnings(loaded.warnings))
        skipped = loaded.problems + result.skipped
        if skipped:
            self.stderr.write(format_problems(skipped))
        report = result.report(include_details=bool(options["details"]))
        self.stdout.write(format_leaderboard(report))
        if options["json"]:
            write_json(report, options["json"])
            self.stdout.write(f"JSON report written to {options['json']}")
        if options["csv"]:
            with open(options["csv"], "w", encoding="utf-8", newline="") as handle:
                handle.write(aggregates_csv(report))
            self.stdout.write(f"CSV written to {options['csv']}")
        n_skipped = len({p.source for p in skipped})
        self.stdout.write(
            f"Scored {len(result.scores)} runs against {len(loaded.conversations)} conversations; "
            f"{n_skipped} input(s) skipped."
        )
        if skipped:
            raise CommandError(
                f"{n_skipped} input(s) were skipped (listed above); the scores cover the rest",
                returncode=SKIPPED_EXIT_CODE,
            )
