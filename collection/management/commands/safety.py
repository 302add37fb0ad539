"""``attune safety screen [FILE|-]``: run the participant safety screen over one message per line.

For a research team auditing the screen on its own examples: each line in, one JSON line out with the
level (none, concern, urgent) and which rules fired. Offline, no keys, nothing stored.
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from attunebench.safety import screen_lines


class Command(BaseCommand):
    help = (
        "Participant safety. 'screen [FILE|-]' reads one message per line (a file, or standard input) and "
        "prints one JSON line per message: its level (none, concern, urgent) and the rules that fired. "
        "A research study's safety net, not a clinical assessment."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="screen")
        screen = sub.add_parser("screen", help="screen one message per line; one JSON line out per message")
        screen.add_argument("file", nargs="?", default="-", help="a text file, or - for standard input (default)")

    def handle(self, *args: Any, action: str, file: str, **options: Any) -> None:
        if file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"{file}: no such file (give a text file with one message per line, or -)")
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except UnicodeDecodeError as exc:
                raise CommandError(f"{file}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
        for record in screen_lines(lines):
            self.stdout.write(json.dumps(record, ensure_ascii=False))
