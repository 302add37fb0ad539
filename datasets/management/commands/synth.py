"""``attune synth``: write seeded random conversations (and optional fake EM runs) to disk.

A thin wrapper over :mod:`attunebench.synth`, for load and scale tests of
import, replay and scoring. It never touches the database: the output is
ordinary canonical files that ``attune validate`` and ``attune import`` read.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from attunebench import catalogue as cat
from attunebench import synth

# Conversations this many at a time, so memory stays flat for very large N.
_CHUNK = 500


class Command(BaseCommand):
    help = (
        "Generate schema-valid random conversations for load and scale tests. "
        "Writes DIR/conversations/<id>.json and, with --runs-for, fake evaluated-model "
        "runs to DIR/runs/<model>/. The same --seed always gives the same files. "
        "The data is random and marked synthetic: never use it for research conclusions."
    )
    # Pure file generation: no database, so no system or migration checks needed.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--conversations", type=int, required=True, metavar="N", help="how many conversations to generate"
        )
        parser.add_argument(
            "--seed",
            type=int,
            required=True,
            metavar="S",
            help="random seed; identical seeds give byte-identical files",
        )
        parser.add_argument(
            "--min-turns", type=int, default=3, metavar="A", help="fewest turns per conversation (default 3)"
        )
        parser.add_argument(
            "--max-turns", type=int, default=8, metavar="B", help="most turns per conversation (default 8)"
        )
        parser.add_argument(
            "--out",
            required=True,
            metavar="DIR",
            help="output folder (created if missing; same-named files are overwritten)",
        )
        parser.add_argument(
            "--runs-for",
            nargs="+",
            default=[],
            metavar="MODEL",
            help="also write a fake EM run per conversation for each MODEL name",
        )
        parser.add_argument(
            "--mode",
            choices=cat.MODES,
            default="default",
            help="replay mode recorded in the fake runs (default: default)",
        )
        parser.add_argument(
            "--skill",
            type=float,
            default=None,
            metavar="P",
            help="probability a fake run copies the ground truth; default spreads "
            "the models evenly from 0.2 to 0.8 so their scores separate",
        )
        parser.add_argument(
            "--drop-rate",
            type=float,
            default=0.0,
            metavar="P",
            help="probability a fake run leaves a turn out (default 0)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        n = options["conversations"]
        seed = options["seed"]
        min_turns, max_turns = options["min_turns"], options["max_turns"]
        if n < 0:
            raise CommandError("--conversations must be 0 or more")
        if not 1 <= min_turns <= max_turns:
            raise CommandError("need 1 <= --min-turns <= --max-turns")
        models: list[str] = options["runs_for"]
        skills = self._skills(models, options["skill"])
        if not 0 <= options["drop_rate"] < 1:
            raise CommandError("--drop-rate must be in [0, 1)")
        out = Path(options["out"])
        conversations_dir = out / "conversations"
        written_conversations = written_runs = 0
        for start in range(0, n, _CHUNK):
            batch = synth.synth_conversations(min(_CHUNK, n - start), seed, min_turns, max_turns, start=start)
            written_conversations += len(synth.write_documents(batch, conversations_dir))
            for model in models:
                runs = synth.synth_runs(
                    batch, model, options["mode"], seed, skill=skills[model], drop_rate=options["drop_rate"]
                )
                written_runs += len(synth.write_documents(runs, out / "runs" / synth.slug(model)))
        self.stdout.write(f"wrote {written_conversations} synthetic conversations to {conversations_dir}")
        for model in models:
            self.stdout.write(
                f"wrote {n} runs for {model} (skill {skills[model]:.2f}) to {out / 'runs' / synth.slug(model)}"
            )

    @staticmethod
    def _skills(models: list[str], fixed: float | None) -> dict[str, float]:
        """One skill per model: the given one, or evenly spread so fake EMs rank differently."""
        if fixed is not None:
            if not 0 <= fixed <= 1:
                raise CommandError("--skill must be between 0 and 1")
            return dict.fromkeys(models, fixed)
        if len(models) == 1:
            return {models[0]: 0.5}
        return {m: round(0.2 + 0.6 * i / (len(models) - 1), 3) for i, m in enumerate(models)}
