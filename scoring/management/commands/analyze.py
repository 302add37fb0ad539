"""``attune analyze``: the SPEC 6 analyses over scored runs, no database needed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attunebench.metrics.comparison import DEFAULT_BOOTSTRAP, DEFAULT_SEED

SKIPPED_EXIT_CODE = 2


class Command(BaseCommand):
    help = (
        "Score run files against conversation files and print the analyses of SPEC 6: capability "
        "profile per model and mode, rank independence of the capabilities (Spearman and Kendall), "
        "how well each metric separates models (paired Wilcoxon tests, Holm-corrected), seeded "
        "bootstrap confidence intervals, and breakdowns by topic category, participant group, turn "
        "position and original model. Human baseline rows (em_model 'human:...') are flagged. "
        f"Skipped inputs are named and make the command exit with status {SKIPPED_EXIT_CODE}."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--conversations",
            nargs="+",
            required=True,
            metavar="PATH",
            help="ground-truth conversation files: .json files, folders (recursive) or .zip archives",
        )
        parser.add_argument(
            "--runs",
            nargs="+",
            required=True,
            metavar="PATH",
            help="evaluated-model run outputs: .json files, folders (recursive) or .zip archives",
        )
        parser.add_argument("--json", metavar="OUT", help="write every analysis to OUT as JSON")
        parser.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            help=f"seed of the bootstrap resampling (default {DEFAULT_SEED}, as on the dashboard); the same seed "
            "gives the same intervals",
        )
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_BOOTSTRAP,
            metavar="N",
            help=f"number of bootstrap resamples of the conversations (default {DEFAULT_BOOTSTRAP}, as on the "
            "dashboard and the API)",
        )
        parser.add_argument(
            "--pool",
            nargs="+",
            metavar="ROW",
            help="rows ('model [mode]') or models whose scores the breakdowns' pooled lines average, one value per "
            "conversation (default: every model row, the offline baselines apart)",
        )
        parser.add_argument(
            "--alpha",
            type=float,
            default=0.05,
            help="significance level after Holm correction for the discrimination tests (default 0.05)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        from attunebench.metrics.analysis import analyze
        from attunebench.metrics.analysis_report import format_analysis
        from attunebench.metrics.report import format_problems, format_warnings, load_inputs, score_inputs, write_json

        if options["bootstrap"] < 1:
            raise CommandError("--bootstrap must be at least 1")
        if not 0 < options["alpha"] < 1:
            raise CommandError("--alpha must be between 0 and 1")
        loaded = load_inputs(options["conversations"], options["runs"])
        result = score_inputs(loaded)
        if loaded.warnings:
            self.stderr.write(format_warnings(loaded.warnings))
        skipped = loaded.problems + result.skipped
        if skipped:
            self.stderr.write(format_problems(skipped))
        report = result.report()
        try:
            analysis = analyze(
                report,
                [c for _, c in loaded.conversations],
                seed=options["seed"],
                n_bootstrap=options["bootstrap"],
                alpha=options["alpha"],
                pool=options["pool"],
            )
        except ValueError as exc:  # a --pool name that is not a compared row
            raise CommandError(f"--pool: {exc}") from None
        self.stdout.write(format_analysis(analysis))
        if options["json"]:
            write_json(analysis, options["json"])
            self.stdout.write(f"JSON analysis written to {options['json']}")
        if skipped:
            n_skipped = len({p.source for p in skipped})
            raise CommandError(
                f"{n_skipped} input(s) were skipped (listed above); the analyses cover the rest",
                returncode=SKIPPED_EXIT_CODE,
            )
