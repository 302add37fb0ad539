"""attune publish dataset|results: a dataset folder others load in one line, and a static results site."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from research.results.publication import PublishError, publish_dataset, publish_results


class Command(BaseCommand):
    help = (
        "Publish a study. 'dataset': a folder laid out as a Hugging Face dataset repository (Parquet tables "
        "conversations, turns, annotations and, with --runs, runs and scores; a README.md dataset card; "
        "croissant.json; SHA256SUMS), written from a frozen dataset version. 'results': a static site (HTML, CSS, "
        "JSON, CSV; opens from file://) of frozen result snapshots. Withdrawn participants are never published; "
        "original models appear by alias unless every one is named with --model-identity."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True, metavar="{dataset,results}")
        dataset = sub.add_parser("dataset", help="a Hugging Face-style dataset folder from a frozen dataset version")
        dataset.add_argument("--out", required=True, help="a new (or empty) folder to write")
        dataset.add_argument(
            "--version",
            type=int,
            metavar="ID",
            help="the dataset version to publish (default: freeze a new version of every complete, "
            "non-withdrawn conversation)",
        )
        dataset.add_argument(
            "--runs",
            type=int,
            nargs="+",
            metavar="RUN",
            help="also publish these evaluation runs' outputs (runs table) and their scores (scores table)",
        )
        dataset.add_argument(
            "--model-identity",
            nargs="+",
            metavar="NAME",
            help="publish original models under their real names; every original model of the data must be named",
        )
        dataset.add_argument("--recruitment", default="", metavar="TEXT", help="how participants were recruited")
        dataset.add_argument(
            "--license",
            default="other",
            metavar="SPDX",
            help="licence id for the card (default 'other': research-only terms in LICENSE.md)",
        )
        dataset.add_argument("--citation", default="", metavar="BIBTEX", help="the citation the card gives")
        dataset.add_argument("--url", default="", help="where the dataset will be hosted (for croissant.json)")
        results = sub.add_parser("results", help="a static site of frozen result snapshots")
        results.add_argument("--out", required=True, help="a new (or empty) folder to write")
        results.add_argument(
            "--snapshot",
            type=int,
            nargs="+",
            metavar="ID",
            help="the snapshots to publish (default: freeze a new snapshot of the current leaderboard)",
        )
        results.add_argument(
            "--dataset",
            metavar="DATASET_DIR",
            help="a published dataset folder: the site then carries the scores its runs give, for attune verify",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["what"] == "dataset":
                published = publish_dataset(
                    options["out"],
                    version_id=options["version"],
                    run_ids=options["runs"],
                    model_identity=options["model_identity"],
                    recruitment=options["recruitment"],
                    license_id=options["license"],
                    citation=options["citation"],
                    url=options["url"],
                )
                tables = ", ".join(f"{name} {n}" for name, n in published.counts.items())
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Published dataset version {published.version.name!r} (id {published.version.pk}) into "
                        f"{published.out}: {tables} row(s); content hash {published.content_hash}."
                    )
                )
            else:
                snapshots = publish_results(options["out"], options["snapshot"], options["dataset"])
                names = ", ".join(f"{s.pk} ({s.name})" for s in snapshots)
                self.stdout.write(self.style.SUCCESS(f"Published snapshot(s) {names} into {options['out']}."))
        except (PublishError, OSError) as exc:
            raise CommandError(f"attune publish {options['what']}: {exc}") from exc
