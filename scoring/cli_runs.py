"""A run made with ``attune eval`` recorded in the database, beside the runs the launcher makes.

The run files in ``--out`` stay the command's first product; recording adds the
same run to the project's database, so the dashboard, the leaderboard, the run
pages and the REST API show it like any launcher run, with its origin (``cli``),
the person and code that made it and the settings it ran with
(``scoring.run_provenance``). ``attune eval --no-record`` leaves it out.

Which conversations the run is about: scores are stored against conversations
in the database (``ConversationScore`` points at one), and the dashboard's
numbers are the scorer's over the stored ground truth. So, before any model is
called (``check_recordable``):

- ``--from-db`` conversations are the database's own;
- a conversation file whose ``conversationId`` is already stored must hold the
  same conversation: its canonical content must equal the stored one's, or
  recording is refused with the first difference, since the stored scores would
  then be of another conversation than the file's. The participant profile is
  left out of the comparison: no score reads it, and the database keeps the
  participant's id only pseudonymised and their diagnoses only with consent;
- a file whose ``conversationId`` is not stored is imported (as ``attune import``
  would, survey answers checked against the catalogue) when the run is recorded,
  in the same transaction as the run.

The embedded SQLite database is brought up to date (migrated) first, as
``attune serve`` does; any other database must already be, and recording is
refused with the command to run otherwise.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from attunebench import canonical as cf
from attunebench.replay.llm import EMSpec
from attunebench.replay.prompts import PROMPT_VERSION
from attunebench.replay.protocol import ReplayConfig, ReplayResult
from collection.models import Conversation
from datasets.exchange import conversation_to_canonical, with_export_relations, write_conversation
from scoring.models import EvaluatedModel, EvaluationRun, RunConversation
from scoring.provider_access import api_base_problem
from scoring.run_provenance import model_settings, os_user, provenance
from scoring.run_scoring import do_score_evaluation_run
from scoring.transcripts import call_values, insert_call_values


class RecordError(ValueError):
    """The run cannot be recorded in the database; the message says why and what to do."""


@dataclass
class RecordPlan:
    """What recording will do, decided before the replay: conversations found, and those to import."""

    stored: dict[str, int] = field(default_factory=dict)  # conversationId -> Conversation pk
    to_import: list[cf.ConversationFile] = field(default_factory=list)


def every_migration_applied() -> bool:
    """Whether every migration file of the installed apps is recorded as applied in the database: then none is
    pending, known from the file names without importing every migration as the migration loader does (the
    most of a second this check would otherwise add before a run's first call). False sends the caller to the
    loader's full answer, which also understands squashed migrations."""
    import pkgutil
    from importlib import import_module

    from django.apps import apps
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder

    applied = set(MigrationRecorder(connection).applied_migrations())
    if not applied:
        return False
    for app in apps.get_app_configs():
        module_name, _ = MigrationLoader.migrations_module(app.label)
        if module_name is None:
            continue
        try:
            module = import_module(module_name)
        except ModuleNotFoundError:
            continue
        path = getattr(module, "__path__", None)
        if not path:
            return False
        for info in pkgutil.iter_modules(path):
            # The loader's rule: a module whose name starts with _ or ~ is no migration; a package is none either.
            if info.ispkg or info.name[0] in "_~":
                continue
            if (app.label, info.name) not in applied:
                return False
    return True


def database_ready(say: Any = None) -> None:
    """Make sure the database can take a run: migrate the embedded SQLite file, refuse any other out of date."""
    from django.db.migrations.executor import MigrationExecutor

    try:
        if every_migration_applied():
            return
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise RecordError(f"the database cannot be reached ({exc}); pass --no-record to skip recording") from exc
    if not pending:
        return
    embedded = connection.vendor == "sqlite" and str(connection.settings_dict["NAME"]) == str(settings.SQLITE_PATH)
    if not embedded:
        raise RecordError(
            f"the database has {len(pending)} unapplied migration(s): run `attune migrate` first, "
            "or pass --no-record to skip recording"
        )
    if say is not None:
        say(f"Setting up the database at {settings.SQLITE_PATH} (first use; attune serve would do the same).")
    call_command("migrate", interactive=False, verbosity=0)


def scored_content(document: cf.ConversationFile) -> str:
    """A conversation's canonical content without its participant profile (see the module docstring), as one
    compact line: equal exactly when the canonical texts are (they differ only in whitespace), and several
    times quicker to make than the indented text."""
    data = cf.to_canonical_dict(document)
    data.pop("participant_profile", None)
    return cf.dumps_line(data)


def _first_difference(file_doc: cf.ConversationFile, stored: cf.ConversationFile) -> str:
    """The first top-level part (or turn) in which two versions of a conversation differ, for the message."""
    mine, theirs = cf.to_canonical_dict(file_doc), cf.to_canonical_dict(stored)
    for key in sorted(set(mine) | set(theirs)):
        if key == "turns":
            for a, b in zip(mine.get("turns") or [], theirs.get("turns") or [], strict=False):
                if a != b:
                    return f"turn {a.get('turnNumber')}"
            if len(mine.get("turns") or []) != len(theirs.get("turns") or []):
                return "the number of turns"
        elif key != "participant_profile" and mine.get(key) != theirs.get(key):
            return key
    return "nothing scored"


def check_recordable(documents: Sequence[tuple[str, cf.ConversationFile]], *, from_db: bool) -> RecordPlan:
    """Before any call: the conversations' place in the database (see the module docstring), or ``RecordError``."""
    ids = [doc.conversationId for _, doc in documents]
    stored = dict(Conversation.objects.filter(conversation_id__in=ids).values_list("conversation_id", "pk"))
    if from_db:
        return RecordPlan(stored=stored)
    plan = RecordPlan(stored=stored)
    known = {
        c.conversation_id: conversation_to_canonical(c, include_model_identity=True)
        for c in with_export_relations(Conversation.objects.filter(pk__in=list(stored.values())))
    }
    problems: list[str] = []
    seen: set[str] = set()
    for source, doc in documents:
        existing = known.get(doc.conversationId)
        if doc.conversationId in seen:
            problems.append(f"{source}: conversation {doc.conversationId!r} is in the files twice")
        seen.add(doc.conversationId)
        if existing is None:
            problems.extend(str(p) for p in cf.check_conversation_options(doc, source))
            plan.to_import.append(doc)
        elif scored_content(existing) != scored_content(doc):
            problems.append(
                f"{source}: conversation {doc.conversationId!r} is stored in the database with other content "
                f"(they differ in {_first_difference(doc, existing)}), so its stored scores would not be this "
                "file's; give the file another conversationId or evaluate --from-db"
            )
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise RecordError(f"the run could not be recorded in the database: {shown}. Pass --no-record to skip it")
    return plan


def registry_model(spec: EMSpec, concurrency: int) -> EvaluatedModel:
    """The registry row a CLI run is recorded under: the one of that name, else a new row describing the model.

    A new row keeps the endpoint only where a researcher could have registered
    it (``scoring.provider_access``: this machine, or a listed host); elsewhere it
    is left empty and the row inactive, so the launcher never calls a host
    nobody configured. Parameters are the answer-changing ones (no key variable:
    the CLI reads keys from the environment only).
    """
    existing = EvaluatedModel.objects.filter(name=spec.name).first()
    if existing is not None:
        return existing
    if spec.is_offline:
        row = EvaluatedModel(name=spec.name, kind=EvaluatedModel.Kind.OFFLINE)
    else:
        api_base = spec.api_base or ""
        callable_here = not api_base_problem(api_base, live=bool(settings.ATTUNE_ALLOW_LIVE_MODELS))
        row = EvaluatedModel(
            name=spec.name,
            kind=EvaluatedModel.Kind.LLM,
            litellm_model=spec.litellm_model,
            api_base=api_base if callable_here else "",
            params={k: v for k, v in spec.params.items() if k != "api_key_env"},
            max_concurrency=max(1, spec.max_in_flight or concurrency),
            active=callable_here,
            notes="Added by attune eval when a run of it was recorded."
            + ("" if callable_here else f" Its endpoint ({api_base}) is not an allowed host, so it was left out."),
        )
    try:
        row.full_clean()
    except ValidationError as exc:
        raise RecordError(f"{spec.name} cannot be added to the model registry: {exc}") from exc
    row.save()
    return row


def cli_provenance(em: EMSpec, config: ReplayConfig, options: dict[str, Any], argv: Sequence[str]) -> dict[str, Any]:
    """The provenance of a CLI run: the OS user, the command line and what it ran with."""
    judge = config.judge
    run_settings = {
        "model": model_settings(
            em.name,
            litellm_model=em.litellm_model,
            api_base=em.api_base,
            params=dict(em.params),
            max_in_flight=em.max_in_flight,
        ),
        "judge": model_settings(
            judge.name,
            litellm_model=judge.litellm_model,
            api_base=judge.api_base,
            params=dict(judge.params),
            max_in_flight=judge.max_in_flight,
        )
        if judge is not None
        else None,
        "concurrency": options.get("concurrency"),
        "processes": options.get("processes"),
        "repeat": em.repeat,
        "cache": "off" if options.get("no_cache") else ("fresh" if options.get("fresh") else "on"),
        "conversations": "database" if options.get("from_db") else list(options.get("conversations") or []),
        "out": str(options.get("out_resolved") or options.get("out") or ""),
        # The command line when the process is ``attune eval ...``; None when called from Python.
        "command": shlex.join(["attune", *argv]) if argv[:1] == ["eval"] else None,
    }
    return provenance(EvaluationRun.Origin.CLI, user=os_user(), settings=run_settings)


def do_record_cli_run(
    plan: RecordPlan,
    em: EMSpec,
    config: ReplayConfig,
    results: Sequence[ReplayResult],
    *,
    run_provenance: dict[str, Any],
    concurrency: int,
    started_at: Any,
    scored: Mapping[str, Any] | None = None,
    call_values_made: Mapping[str, Sequence[tuple[Any, ...]]] | None = None,
) -> EvaluationRun:
    """Store the replay's outputs as one finished run and score it, all or nothing.

    Conversations the provider never answered are stored as failed with their
    first error (as a worker stores them), so the run page lists them and a
    resume from the launcher replays just those. ``scored``: the outputs' scores made already, by conversation
    id (``do_score_evaluation_run``); ``call_values_made``: their calls' column values made already
    (``scoring.transcripts.call_values``), by conversation id.
    """
    with transaction.atomic():
        ids = dict(plan.stored)
        for doc in plan.to_import:
            ids[doc.conversationId] = write_conversation(doc).pk
        done = [r for r in results if r.scoreable]
        totals = {
            name: sum(getattr(r.stats, name) for r in results)
            for name in ("calls_made", "calls_cached", "calls_recovered", "calls_reused", "calls_failed")
        }
        run = EvaluationRun.objects.create(
            evaluated_model=registry_model(em, concurrency),
            judge_model=registry_model(config.judge, concurrency) if config.judge is not None else None,
            mode=config.mode,
            panas_strategy=config.panas_strategy,
            selection={"conversation_ids": sorted(r.conversation_id for r in results)},
            prompt_version=PROMPT_VERSION,
            status=EvaluationRun.Status.DONE if done else EvaluationRun.Status.FAILED,
            conversations_total=len(results),
            conversations_done=len(done),
            conversations_failed=len(results) - len(done),
            cost_usd=sum(r.stats.cost_spent for r in results),
            error="" if done else "no conversation got an answer from the provider",
            created_at=started_at,
            started_at=started_at,
            finished_at=timezone.now(),
            origin=EvaluationRun.Origin.CLI,
            provenance=run_provenance,
            **totals,
        )
        items = [
            RunConversation(
                run=run,
                conversation_id=ids[result.conversation_id],
                status=RunConversation.Status.DONE if result.scoreable else RunConversation.Status.FAILED,
                output=cf.to_canonical_dict(result.output),
                calls_made=result.stats.calls_made,
                calls_cached=result.stats.calls_cached,
                calls_recovered=result.stats.calls_recovered,
                calls_reused=result.stats.calls_reused,
                calls_failed=result.stats.calls_failed,
                cost_usd=result.stats.cost_spent,
                error="; ".join(f"turn {f.turn_number} {f.call_type}: {f.error}" for f in result.failures)[:5000],
                attempts=1,
                counted_attempt=1,
            )
            for result in results
        ]
        if connection.features.can_return_rows_from_bulk_insert:  # one statement, the new rows' ids returned
            RunConversation.objects.bulk_create(items)
        else:
            for item in items:
                item.save(force_insert=True)
        insert_call_values(
            [
                (item.pk, (call_values_made or {}).get(result.conversation_id) or call_values(result.calls))
                for item, result in zip(items, results, strict=True)
            ]
        )
        do_score_evaluation_run(run.pk, scored)
    return run
