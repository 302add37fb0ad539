"""The ``attune`` command: a thin wrapper over Django's management commands.

``attune X ...`` is ``manage.py X ...``; with no argument it lists the Attune
commands first. Settings default to the embedded configuration.
"""

from __future__ import annotations

import os
import sys

ATTUNE_COMMANDS = (
    ("demo", "install sample data, run the offline baselines, score, and serve the site"),
    ("serve", "serve the site with gunicorn's threaded workers, as in production"),
    ("worker", "start a Celery worker (needs REDIS_URL)"),
    ("import", "validate and import canonical conversation files, folders or .zip archives"),
    ("export", "export conversations as canonical JSON, JSONL or Parquet"),
    ("publish", "publish a dataset folder (Hugging Face layout, card, Croissant) or a static results site"),
    ("verify", "check a published dataset and results site: checksums, content hash, re-scored scores"),
    ("validate", "check canonical files and print every problem"),
    ("synth", "generate schema-valid random conversations for load and scale tests"),
    ("eval", "replay conversations against an evaluated model"),
    ("score", "score EM run files against conversation files (no database needed)"),
    ("analyze", "capability profile, independence, discrimination and breakdown analyses"),
    ("backup", "one archive of the database, the keys and the export and run files (backup --out FILE)"),
    ("restore", "restore a backup into an empty database and data directory (restore FILE)"),
    ("safety", "screen messages, one per line, with the participant safety screen (safety screen FILE|-)"),
    ("erase", "delete everything stored about a participant, keeping an audit record without personal data"),
    ("invite", "create participants for a study and print their study links, once"),
    ("create_researcher", "a researcher login (staff in the research group); prints the password"),
    ("docs", "build the documentation site from docs/ and serve it on this machine"),
    ("storage", "compare the file store with the database: unreferenced files, missing files (storage check)"),
)

# Commands that read or write pseudonymised data or the file store: like the web processes and workers
# (which check for themselves), they refuse to run with keys that are not the deployment's.
COMMANDS_NEEDING_THE_DEPLOYMENT_KEYS = frozenset(
    {"erase", "export", "import", "backup", "storage", "invite", "publish"}
)

# Commands whose process has nothing left to do once the command returned (files written and closed, the
# database committed), but a large heap to tear down: they end without tearing it down (``end_at_once``).
COMMANDS_THAT_END_AT_ONCE = frozenset({"eval"})


def end_at_once() -> None:
    """End the process now, with exit status 0: flush the output and the log handlers, close the database
    connections, then skip the interpreter's teardown of every module and object, a noticeable part of a
    short ``attune eval`` after its last answer. Only after a command returned normally: an error exits
    through ``sys.exit`` as usual."""
    import logging

    from django.db import connections

    connections.close_all()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if len(argv) < 2 or (argv[1] in {"-h", "--help", "help"} and len(argv) == 2):
        print("usage: attune COMMAND [options]   (attune COMMAND --help for details)\n")
        print("Attune commands:")
        for name, summary in ATTUNE_COMMANDS:
            print(f"  {name:<10} {summary}")
        print("\nEvery Django management command works too (attune migrate, attune createsuperuser, ...).")
        return
    from django.core.management import execute_from_command_line

    from attune_site.datadir import prepare_data_dir

    prepare_data_dir()
    if argv[1] in COMMANDS_NEEDING_THE_DEPLOYMENT_KEYS:
        import django

        django.setup()
        from attune_site.identity import DeploymentIdentityError, verify_deployment_identity

        try:
            verify_deployment_identity()
        except DeploymentIdentityError as exc:
            sys.exit(f"attune {argv[1]}: {exc}")
    execute_from_command_line(["attune", *argv[1:]])
    if argv[1] in COMMANDS_THAT_END_AT_ONCE:
        end_at_once()


if __name__ == "__main__":
    main()
