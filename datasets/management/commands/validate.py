"""``attune validate PATH...``: check canonical files without touching the database.

Conversation files and EM run files may be mixed (told apart by
:func:`attunebench.canonical.looks_like_run`); folders are walked and .zip
archives opened. A .jsonl file (the JSONL export) holds one document per line,
each checked and counted as a file of its own and named by its line in problems.
Every problem is printed, one per line, so a researcher can fix a whole batch in
one pass; the exit code is 1 if there was any problem.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from attunebench.canonical import (
    CanonicalError,
    ConversationFile,
    Problem,
    check_conversation_options,
    decode_json,
    looks_like_datasheet,
    looks_like_run,
    parse_conversation,
    parse_run,
)
from attunebench.sources import iter_documents


def check_paths(paths: list[str]) -> tuple[int, int, list[Problem]]:
    """(files checked, files valid, problems) for the given files, folders and zips.

    Besides the schema, ids must be unique across the inputs: two conversation
    files with one conversationId, or two runs of one (conversation, EM, mode),
    would silently overwrite each other on import or scoring.
    """
    checked = valid = 0
    problems: list[Problem] = []
    seen_conversations: dict[str, str] = {}
    seen_runs: dict[tuple[str, str, str], str] = {}
    for item in iter_documents(paths):
        checked += 1
        if isinstance(item, Problem):
            problems.append(item)
            continue
        source, raw = item
        try:
            data = decode_json(source, raw)
            if looks_like_datasheet(data):
                valid += 1  # an export's datasheet.json describes the files beside it; it is not one of them
                continue
            if looks_like_run(data):
                run = parse_run(data, source)
                key = (run.conversationId, run.em_model, run.mode)
                if key in seen_runs:
                    raise CanonicalError(
                        [
                            Problem(
                                source=source,
                                path="conversationId",
                                message=f"a run of {key[0]!r} by {key[1]!r} in mode {key[2]!r} "
                                f"is also in {seen_runs[key]}",
                            )
                        ]
                    )
                seen_runs[key] = source
            else:
                conversation: ConversationFile = parse_conversation(data, source)
                cid = conversation.conversationId
                if cid in seen_conversations:
                    raise CanonicalError(
                        [
                            Problem(
                                source=source,
                                path="conversationId",
                                message=f"{cid!r} is also used by {seen_conversations[cid]}",
                            )
                        ]
                    )
                seen_conversations[cid] = source
                # SPEC 2.4: an off-list ground-truth answer is an error here (score only warns).
                off_list = check_conversation_options(conversation, source)
                if off_list:
                    raise CanonicalError(off_list)
        except CanonicalError as exc:
            problems.extend(exc.problems)
            continue
        valid += 1
    return checked, valid, problems


class Command(BaseCommand):
    help = (
        "Check canonical conversation files and EM run files (files, folders or .zip "
        "archives; a .jsonl file holds one document per line, as the JSONL export writes it) against "
        "the AttuneBench schema. Prints every problem as 'file: json.path: message' ('file line N' for "
        "a line of a .jsonl file), then a summary; exits with status 1 if any problem "
        "was found. Reads files only: the database is not used."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "paths",
            nargs="+",
            metavar="PATH",
            help="a .json or .jsonl file, a folder (searched recursively) or a .zip archive",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        checked, valid, problems = check_paths(options["paths"])
        for problem in problems:
            self.stdout.write(str(problem))
        noun = "problem" if len(problems) == 1 else "problems"
        self.stdout.write(f"{checked} files checked, {valid} valid, {len(problems)} {noun}")
        if problems:
            raise SystemExit(1)
