"""``attune eval``: replay conversations against an evaluated model, write run files, score them.

In-process by default: conversations from files (or the database), calls
through one event loop with a live progress line, a call cache on disk so a
re-run pays nothing twice, canonical run files (SPEC 3.2) in --out, and the
leaderboard of the scoring library at the end. With REDIS_URL set and
--from-db, the run is created in the database and fanned out to Celery
workers instead; the command follows its progress and writes the files when
it is done. ``--dry-run`` counts the calls and estimates the cost from the
real prompts without calling anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from attunebench import catalogue as cat
from attunebench.machine import usable_cores
from attunebench.replay.failures import DEFAULT_STOP_AFTER, REASONS

if TYPE_CHECKING:
    from attunebench.metrics.results import ScoringReport


#: The least share of answers (turns and post-conversation) a run's score may rest on before it exits non-zero.
DEFAULT_MIN_COVERAGE = 0.95

#: Options that describe the evaluated model only: the judge never inherits them.
EM_ONLY_OPTIONS = ("api_base", "via_litellm", "temperature", "max_tokens", "seed")


def call_cache(options: dict[str, Any]) -> Any:
    """The call cache a replay process uses: none, the cache folder, or the folder asked afresh (--fresh)."""
    from attunebench.replay.cache import FileCache, FreshCache, LayeredCache, MemoryCache, NullCache

    if options["no_cache"]:
        return NullCache()
    folder = LayeredCache(MemoryCache(), FileCache(options["cache_dir"] or Path(settings.DATA_DIR) / "call-cache"))
    return FreshCache(folder) if options["fresh"] else folder


class Command(BaseCommand):
    help = (
        "Replay conversations turn by turn against an evaluated model (SPEC 4), write one canonical run "
        "file per conversation and score them. Offline baselines (baseline:random, baseline:prior, "
        "baseline:lexicon) need no keys; live models need ATTUNE_ALLOW_LIVE_MODELS=1 unless served on "
        "this machine (--api-base on localhost). API keys are read from the environment only."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model", required=True, help="registry name, baseline:NAME, or a litellm model such as openai/gpt-4o-mini"
        )
        parser.add_argument("--mode", default="default", choices=cat.MODES)
        parser.add_argument("--panas-strategy", default="absolute", choices=cat.PANAS_STRATEGIES)
        parser.add_argument(
            "--judge", help="judge model (registry name, baseline:NAME or litellm model); off by default"
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--conversations", nargs="+", metavar="PATH", help="conversation files, folders or .zip archives"
        )
        source.add_argument(
            "--from-db", action="store_true", help="complete, non-withdrawn conversations in the database"
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=16,
            help="most calls in flight at once (default 16): the ceiling for a model outside the registry; "
            "a registered model's max_concurrency caps it further. Halved while the provider reports overload.",
        )
        parser.add_argument("--out", help="folder for the run files (default: <data dir>/runs/<model>__<mode>)")
        parser.add_argument(
            "--dry-run", action="store_true", help="print the number of calls and the estimated cost, call nothing"
        )
        parser.add_argument("--api-base", help="OpenAI-compatible base URL for a model not in the registry")
        parser.add_argument(
            "--via-litellm",
            action="store_true",
            help="call an openai/... model at --api-base through litellm, not the OpenAI SDK (the default route "
            "for an OpenAI-compatible server; same requests, slower per call)",
        )
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--seed", type=int)
        parser.add_argument("--no-cache", action="store_true", help="do not read or write the call cache")
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="ask the model again instead of reusing cached answers (a model updated behind the same name); "
            "its new answers are cached as usual",
        )
        parser.add_argument(
            "--repeat",
            type=int,
            default=0,
            metavar="K",
            help="which repeat of this run (0, the default, is the first): each repeat gets answers of its own, "
            "cached under its number, to measure sampling variance across repeats",
        )
        parser.add_argument("--cache-dir", help="call cache folder (default: <data dir>/call-cache)")
        parser.add_argument(
            "--processes",
            type=int,
            default=None,
            help="replay in this many processes (default: the cores it may run on). The --concurrency cap and a "
            "registered model's in-flight and per-minute limits are split across them, and each takes the next "
            "conversation (longest first) from one shared list whenever it has room, so all of them work until "
            "the work ends; one event loop's CPU per call otherwise caps throughput at high concurrency. Scores "
            "are identical to one process.",
        )
        parser.add_argument(
            "--in-process", action="store_true", help="run here even when REDIS_URL points at Celery workers"
        )
        parser.add_argument(
            "--no-preflight",
            action="store_true",
            help="skip the preflight: one real call per model (and judge) before the run, which fails in seconds "
            "with what and where (connection, key, model name, answer format)",
        )
        parser.add_argument(
            "--stop-early-after",
            type=int,
            default=DEFAULT_STOP_AFTER,
            metavar="N",
            help=f"stop the run when its first N attempts all fail for one reason (default {DEFAULT_STOP_AFTER}; "
            "0 never stops: every call is retried as usual)",
        )
        parser.add_argument(
            "--min-coverage",
            type=float,
            default=DEFAULT_MIN_COVERAGE,
            help=f"exit non-zero when the share of answers the score rests on (turns and post-conversation "
            f"answers) is below this (default {DEFAULT_MIN_COVERAGE}), so scripts and CI notice a run with gaps",
        )
        parser.add_argument(
            "--retry-failed",
            action="store_true",
            help="replay only the conversations of --out whose run files list failed calls or miss answers (and "
            "those with no file), from the call cache, so only the failed calls are made again; then score all",
        )
        parser.add_argument(
            "--no-record",
            action="store_true",
            help="write the run files only: do not record the run in the database (by default it is, so the "
            "dashboard, the leaderboard and the API show it; conversation files not yet stored are imported)",
        )

    # -- model specs ---------------------------------------------------------

    def _spec(self, name: str, options: dict[str, Any]) -> Any:
        from attunebench.replay.baselines import BASELINE_NAMES
        from attunebench.replay.llm import EMSpec, spec_from_name
        from scoring.replay_service import ReplayRefused, _is_loopback, em_spec

        params = {k: options[k] for k in ("temperature", "max_tokens", "seed") if options.get(k) is not None}
        if options.get("via_litellm"):
            if not options.get("api_base"):
                raise CommandError(
                    "--via-litellm applies to a model at --api-base; a registered model takes "
                    '"client": "litellm" in its params instead'
                )
            params["client"] = "litellm"
        registered = None
        try:
            from scoring.models import EvaluatedModel

            registered = EvaluatedModel.objects.filter(name=name).first()
        except Exception:
            registered = None
        try:
            if registered is not None and not (params or options.get("api_base")):
                return em_spec(registered)
        except ReplayRefused as exc:
            raise CommandError(str(exc)) from None
        spec = (
            spec_from_name(name)
            if name.startswith("baseline:")
            else EMSpec(name=name, litellm_model=name, api_base=options.get("api_base"), params=params)
        )
        if not spec.is_offline:
            from attunebench.replay.preflight import live_reason, unknown_model_problem

            if problem := unknown_model_problem(spec):  # a typo says so before any talk of paid calls
                raise CommandError(problem)
            if not settings.ATTUNE_ALLOW_LIVE_MODELS and not (spec.api_base and _is_loopback(spec.api_base)):
                raise CommandError(
                    f"{name} is a live model ({live_reason(spec)}): set ATTUNE_ALLOW_LIVE_MODELS=1 to allow paid "
                    "calls, or serve it on this machine and give --api-base"
                )
        if spec.is_offline and name not in BASELINE_NAMES:
            raise CommandError(f"unknown baseline {name!r}; choose {', '.join(BASELINE_NAMES)}")
        return spec

    # -- conversations ---------------------------------------------------------

    def _conversations(self, options: dict[str, Any]) -> list[Any]:
        if options["from_db"]:
            from datasets.exchange import iter_canonical
            from datasets.selection import complete_conversations

            documents = list(iter_canonical(complete_conversations(), include_model_identity=True))
            self.sources = [("database", doc) for doc in documents]
            return documents
        from attunebench.sources import read_conversations

        found, problems = read_conversations(options["conversations"])
        for problem in problems:
            self.stderr.write(f"skipped: {problem}")
        self.sources = found
        return [doc for _, doc in found]

    # -- main ------------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        from attunebench.replay.protocol import ReplayConfig

        self.stderr.style_func = None  # progress goes to stderr: plain text, not Django's red error style
        self.rendered: dict[str, tuple[str, str]] = {}  # run files made during the replay, by conversation id
        self.scored: dict[str, Any] = {}  # scores made during the replay (ScoredPair), by conversation id
        self.call_values: dict[str, Any] = {}  # call rows made during the replay for recording, likewise
        self.recording = False  # whether the run is recorded in the database (decided before the replay)
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        if options["processes"] is not None and options["processes"] < 1:
            raise CommandError("--processes must be at least 1")
        if options["repeat"] < 0:
            raise CommandError("--repeat must be 0 or more")
        if options["stop_early_after"] < 0:
            raise CommandError("--stop-early-after must be 0 (never stop) or more")
        if not 0 <= options["min_coverage"] <= 1:
            raise CommandError("--min-coverage must be between 0 and 1")
        if options["retry_failed"] and (options["no_cache"] or options["fresh"]):
            raise CommandError(
                "--retry-failed replays the failed calls only because the others are answered from the call "
                "cache: leave out --no-cache and --fresh"
            )
        from attunebench.replay.llm import remember_routes_in

        # Whether a model goes through litellm or the OpenAI SDK is litellm's answer, kept so that a later run
        # of the same model need not import litellm to learn it again.
        remember_routes_in(Path(settings.DATA_DIR) / "litellm-routes.json")
        em = dataclasses.replace(self._spec(options["model"], options), repeat=options["repeat"])
        judge = (
            self._spec(options["judge"], {**options, **dict.fromkeys(EM_ONLY_OPTIONS)}) if options["judge"] else None
        )
        config = ReplayConfig(mode=options["mode"], panas_strategy=options["panas_strategy"], judge=judge)
        conversations = self._conversations(options)
        if not conversations:
            raise CommandError("no conversations to replay")

        if options["dry_run"]:
            from attunebench.replay.run import estimate

            plan = estimate(conversations, em, config)
            self.stdout.write(
                f"Dry run of {em.name} ({config.mode}, {config.panas_strategy}) on {len(conversations)} conversations:"
            )
            self.stdout.write(plan.describe())
            return

        from attunebench.replay.failures import StoppedEarly
        from attunebench.synth import document_filename, slug

        out = Path(options["out"] or Path(settings.ATTUNE_RUNS_DIR) / f"{slug(em.name)}__{config.mode}")
        through_celery = bool(settings.REDIS_URL and options["from_db"] and not options["in_process"])
        kept: list[Any] = []
        to_replay = conversations
        if options["retry_failed"]:
            kept, to_replay = self._split_for_retry(em, config, conversations, out)
        # The preflight's call is under way while the run's place in the database is checked (comparing stored
        # conversations with their files takes a good part of a second): the replay itself starts only once both
        # passed, so a run that could not be recorded is refused before it costs more than that one call. A retry
        # replays only some conversations, so it is not recorded as a whole run: its files are the record.
        preflight_started = time.perf_counter()
        preflight = self._start_preflight(em, config, to_replay) if not options["no_preflight"] and to_replay else None
        try:
            record_plan = (
                None
                if options["no_record"] or through_celery or options["retry_failed"]
                else self._record_plan(options)
            )
        except BaseException:
            if preflight is not None:
                preflight.cancel()
            raise
        self.recording = record_plan is not None
        started_at = timezone.now()
        if preflight is not None:
            self._check_preflight(preflight, preflight_started)
        try:
            if not to_replay:
                runs = []
            elif through_celery:
                from scoring.cli_runs import cli_provenance

                runs = self._through_celery(em, options, to_replay, cli_provenance(em, config, options, sys.argv[1:]))
                out.mkdir(parents=True, exist_ok=True)
                from attunebench.canonical import dumps_canonical

                for run in runs:
                    (out / document_filename(run)).write_text(dumps_canonical(run), encoding="utf-8")
            else:
                runs = self._in_process(em, config, to_replay, options, out)  # writes the scoreable ones itself
        except StoppedEarly as exc:
            kept_note = (
                "With --no-cache the answers received so far are not kept."
                if options["no_cache"]
                else "Answers received so far are cached: running again does not pay for them twice."
            )
            raise CommandError(
                f"{em.name}{f' at {em.api_base}' if em.api_base else ''}: {exc}\n"
                f"No run files were written. {kept_note} (--stop-early-after 0 retries every call instead of stopping.)"
            ) from None
        if record_plan is not None:
            self._record(record_plan, em, config, options, started_at, out)
        elif options["retry_failed"] and not options["no_record"]:
            self.stdout.write("A retry is not recorded in the database: its run files in --out are the record.")
        self._score(conversations, kept + runs, options["min_coverage"])

    def _start_preflight(self, em: Any, config: Any, conversations: list[Any]) -> Any:
        """Start the preflight, one real call per model (and judge), on the process loop; None when every model
        is offline. ``_check_preflight`` waits for it."""
        from attunebench.replay.aio import start_sync
        from attunebench.replay.preflight import preflight

        if em.is_offline and (config.judge is None or config.judge.is_offline):
            return None
        return start_sync(preflight(em, config.judge, conversations[0], mode=config.mode))

    def _check_preflight(self, running: Any, started: float) -> None:
        """The preflight's outcome (``started`` at that ``perf_counter``): fail in seconds, with what and where,
        before the replay starts."""
        results = running.result()
        for result in results:
            self.stderr.write(f"preflight {'ok' if result.ok else 'FAILED'}: {result.line()}")
        failed = [r for r in results if not r.ok]
        if failed:
            raise CommandError(
                f"preflight failed in {time.perf_counter() - started:.1f}s, nothing was replayed: "
                + "; ".join(r.line() for r in failed)
                + " (--no-preflight skips this check)"
            )

    def _split_for_retry(
        self, em: Any, config: Any, conversations: list[Any], out: Path
    ) -> tuple[list[Any], list[Any]]:
        """The run files of ``out`` to keep as they are, and the conversations to replay again: those whose file
        lists failed calls or misses answers, and those with no file."""
        from attunebench.canonical import CanonicalError, load_run

        existing: dict[str, Any] = {}
        for path in sorted(out.glob("*.json")) if out.is_dir() else []:
            try:
                run = load_run(path.read_bytes(), str(path))
            except CanonicalError as exc:
                self.stderr.write(f"skipped: {exc}")
                continue
            if run.em_model == em.name and run.mode == config.mode:
                existing[run.conversationId] = run
        if not existing:
            raise CommandError(
                f"--retry-failed: no run files of {em.name} ({config.mode}) in {out}; run without --retry-failed "
                "first (or give the --out of that run)"
            )
        kept, to_replay = [], []
        for conversation in conversations:
            found = existing.get(conversation.conversationId)
            if found is not None and not has_gaps(conversation, found):
                kept.append(found)
            else:
                to_replay.append(conversation)
        self.stdout.write(
            f"Retrying {len(to_replay)} conversation(s) with failed or missing calls; {len(kept)} complete run "
            f"file(s) in {out} are kept as they are. Calls answered before come from the call cache."
        )
        return kept, to_replay

    def _record_plan(self, options: dict[str, Any]) -> Any:
        from scoring.cli_runs import RecordError, check_recordable, database_ready

        try:
            database_ready(self.stdout.write)
            return check_recordable(self.sources, from_db=options["from_db"])
        except RecordError as exc:
            raise CommandError(str(exc)) from None

    def _record(self, plan: Any, em: Any, config: Any, options: dict[str, Any], started_at: Any, out: Path) -> None:
        """Record the replay as a finished run in the database (``scoring.cli_runs``) and say where it is."""
        from django.urls import reverse

        from scoring.cli_runs import RecordError, cli_provenance, do_record_cli_run

        try:
            run = do_record_cli_run(
                plan,
                em,
                config,
                self.replay_results,
                run_provenance=cli_provenance(em, config, {**options, "out_resolved": out}, sys.argv[1:]),
                concurrency=options["concurrency"],
                started_at=started_at,
                scored={conversation_id: pair.score for conversation_id, pair in self.scored.items()},
                call_values_made=self.call_values,
            )
        except RecordError as exc:
            raise CommandError(f"{exc} (the run files in {out} are written)") from None
        self.stdout.write(
            f"Recorded as run {run.pk} ({reverse('research:run', args=[run.pk])} on the site, "
            f"/api/runs/{run.pk}/ in the API; --no-record leaves runs out of the database)"
        )

    def _in_process(
        self, em: Any, config: Any, conversations: list[Any], options: dict[str, Any], out: Path
    ) -> list[Any]:
        import asyncio

        from attunebench.replay.aio import run_sync
        from attunebench.replay.failures import FailureWatch
        from attunebench.replay.llm import warm_up
        from attunebench.replay.run import make_replayer
        from attunebench.replay.scheduler import describe_limits

        cache = call_cache(options)
        replayer = make_replayer(
            em,
            config,
            dataset=conversations,
            concurrency=options["concurrency"],
            cache=cache,
            watch=FailureWatch(options["stop_early_after"]),
        )
        scheduler = replayer.scheduler
        specs = [em, config.judge]
        in_flight = smallest_ceiling(specs, options["concurrency"])
        rpm = smallest_rpm(specs)
        processes = process_count(
            options["processes"], in_flight if rpm is None else min(in_flight, rpm), len(conversations)
        )
        for provider, limits in sorted(scheduler.limits.items()):
            if provider != "offline":
                self.stdout.write(describe_limits(provider, limits, options["concurrency"], "--concurrency"))
        if processes > 1:
            parts = " + ".join(map(str, split_concurrency(in_flight, processes)))
            self.stdout.write(
                f"Replaying in {processes} processes, at most {parts} calls in flight each (every cap, per-minute "
                "limits too, split across them, so together they keep to it)."
            )
            results = self._in_processes(em, config, conversations, options, processes)
            return self._finish(results, out)
        load_for_replay(em, config)
        run_sync(warm_up([em, config.judge]))
        total = len(conversations)
        started = time.perf_counter()
        interactive = sys.stderr.isatty()

        def line() -> str:
            # The adaptive in-flight limit of each provider: below its ceiling while it reports overload.
            levels = "".join(
                f" | limit {level}/{ceiling}" + (f" {provider}" if len(scheduler.levels()) > 1 else "")
                for provider, (level, ceiling) in sorted(scheduler.levels().items())
                if provider != "offline"
            )
            return progress_line(
                replayer.conversations_done, total, replayer.totals, levels, started, replayer.watch.describe()
            )

        async def main() -> list[Any]:
            # A live line on a terminal; a line every 10 s in logs (the final line goes to stdout).
            work = asyncio.ensure_future(replayer.replay_many(conversations))
            last_logged = time.perf_counter()
            while not work.done():
                await asyncio.wait([work], timeout=0.5)
                if interactive:
                    self.stderr.write("\r" + line(), ending="")
                elif not work.done() and time.perf_counter() - last_logged >= 10:
                    self.stderr.write(line())
                    last_logged = time.perf_counter()
            return work.result()

        results = run_sync(main())
        if interactive:
            self.stderr.write("")
        self.stdout.write(line())
        return self._finish(results, out)

    def _in_processes(
        self, em: Any, config: Any, conversations: list[Any], options: dict[str, Any], processes: int
    ) -> list[Any]:
        """Replay the conversations in ``processes`` child processes that take them from one shared list.

        The list is the conversations longest chain first; a shared counter is
        the next one to take, and a child takes one whenever it has room for
        another (``Replayer.replay_claimed``), so no child sits idle with its
        part of the cap while another still has conversations waiting, and the
        run ends when the work does. Each conversation is taken exactly once:
        the counter moves under its lock.

        Children are forked, so they share the imported modules (litellm's slow
        import, when a model needs it, is paid once, here) and read their job
        from ``_SHARE_JOB`` rather than from pickled arguments. Each builds its
        own replayer over the whole dataset (baselines fit on it) with its part
        of the caps, and sends back (position, result) pairs; they are put back
        in the conversations' order, so scoring sees exactly what one process
        would have produced. Meanwhile each child writes its counts into a
        shared array, and this process shows their sum as the one-process path
        shows its own.
        """
        import multiprocessing
        from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        from django.db import connections

        from attunebench.replay.aio import Abandoned
        from attunebench.replay.protocol import longest_first

        load_for_replay(em, config)  # once, here: the children inherit it
        connections.close_all()  # no database connection shared with the children
        context = multiprocessing.get_context("fork")
        progress = context.Array("d", len(PROGRESS_FIELDS) * processes, lock=False)
        errors = context.Array("c", ERROR_BYTES * processes, lock=False)
        stop = context.Value("b", 0, lock=False)  # set when one share failed: the others stop sending
        taken = context.Value("q", 0)  # how many of the shared list have been taken (under its own lock)
        finished_queue = context.Queue()  # each conversation's result, sent back as it finishes
        global _SHARE_JOB
        _SHARE_JOB = (
            em,
            config,
            conversations,
            options,
            processes,
            progress,
            stop,
            errors,
            longest_first(conversations),
            taken,
            finished_queue,
        )
        received: dict[int, Any] = {}  # position -> result, as the children send them
        receiving = FinishedResults(
            finished_queue,
            processes,
            received,
            lambda position, result: self._prepare_end(result, conversations[position]),
        )
        started = time.perf_counter()
        interactive = sys.stderr.isatty()

        def line(results: list[Any] | None = None) -> str:
            """The children's counts summed; at the end, the exact totals of their ``results``."""
            counts = shared_progress(progress, processes)
            limit = f" | limit {int(counts['level'])}/{int(counts['ceiling'])}" if counts["ceiling"] else ""
            failures = watch_from_counts(counts, latest_error(progress, errors, processes)).describe()
            if results is not None:
                return progress_line(len(results), len(conversations), sum_stats(results), limit, started, failures)
            totals = SimpleNamespace(**{**counts, "cost_unknown": counts["cost_unknown"] > 0})
            return progress_line(int(counts["done"]), len(conversations), totals, limit, started, failures)

        try:
            with ProcessPoolExecutor(processes, mp_context=context) as pool:
                futures = [pool.submit(_replay_share, index) for index in range(processes)]
                receiving.start()
                last_logged, pending, prepared = time.perf_counter(), set(futures), False
                while pending:
                    _, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                    if any(f.exception() for f in futures if f.done()):
                        stop.value = 1  # the other shares cancel their calls at their next beat
                        break
                    if not prepared and shared_progress(progress, processes)["calls_made"]:
                        prepare_for_the_end()  # once the children are under way: this process waits anyway
                        prepared = True
                    if pending and interactive:
                        self.stderr.write("\r" + line(), ending="")
                    elif pending and time.perf_counter() - last_logged >= 10:
                        self.stderr.write(line())
                        last_logged = time.perf_counter()
                wait(futures)
                receiving.finish(failed=any(f.exception() for f in futures))
        finally:
            receiving.finish(failed=True)  # an interrupted run: stop receiving (nothing when already finished)
            _SHARE_JOB = None
            if interactive:
                self.stderr.write("")  # end the progress line
        failures = [error for f in futures if (error := f.exception()) is not None]
        if any(isinstance(e, BrokenProcessPool) for e in failures):
            kept = (
                "With --no-cache the calls answered so far are not kept."
                if options["no_cache"]
                else "The calls answered before it stopped are kept in the call cache, so running the same "
                "command again does not pay for them twice."
            )
            raise CommandError(
                "A replay process stopped unexpectedly (killed, or out of memory) and the others were stopped "
                f"with it; no run files were written. {kept}"
            )
        if failures:  # the share that failed, not the ones stopped because of it
            raise next((e for e in failures if not isinstance(e, Abandoned)), failures[0])
        placed = [position for future in futures for position in future.result()]
        if sorted(placed) != list(range(len(conversations))) or sorted(received) != sorted(placed):
            # Every conversation is replayed once, by one process: anything else would score a wrong set.
            raise CommandError(
                f"the replay processes returned {len(placed)} results for {len(conversations)} conversations "
                "(some twice or none); no run files were written"
            )
        receiving.raise_error()
        results = [received[position] for position in range(len(conversations))]
        self.stdout.write(line(results))
        return results

    def _prepare_end(self, result: Any, conversation: Any) -> None:
        """While the replay goes on, make a finished conversation's run file and score (``_finish``, ``_score``
        and recording then use them), so that little is left to do after the last answer. Called from the
        thread receiving the replay processes' results."""
        from attunebench.metrics.engine import score_pair
        from attunebench.replay.run import render_output

        if result.scoreable:
            self.rendered[result.conversation_id] = render_output(result)
            self.scored[result.conversation_id] = score_pair(conversation, result.output)
        if self.recording:  # its calls' rows, as the database takes them
            from scoring.transcripts import call_values

            self.call_values[result.conversation_id] = call_values(result.calls)

    def _finish(self, results: list[Any], out: Path) -> list[Any]:
        from attunebench.replay.run import write_outputs

        # As in the database path: a conversation the provider never answered says nothing
        # about the model, so it is neither written nor scored; running again retries it.
        self.replay_results = results  # every conversation's result, recorded in the database after this
        scoreable = [r for r in results if r.scoreable]
        paths = write_outputs(scoreable, out, self.rendered)
        failed = sum(len(r.failures) for r in scoreable)
        self.stdout.write(
            f"Wrote {len(paths)} run files to {out}" + (f" ({failed} failed calls listed in them)" if failed else "")
        )
        from attunebench.replay.failures import describe_groups, group_failures

        groups = group_failures((r.conversation_id, f.to_dict()) for r in results for f in r.failures)
        if groups:
            self.stdout.write(describe_groups(groups))
        unconnected = sum(r.stats.calls_unconnected for r in results)
        if unconnected:
            self.stdout.write(
                f"{unconnected} attempts never connected (nothing listened at the address): not counted as calls made."
            )
        unanswered = [r for r in results if not r.scoreable]
        if unanswered:
            first = unanswered[0].failures[0] if unanswered[0].failures else None
            self.stderr.write(
                self.style.ERROR(
                    f"{len(unanswered)} conversation(s) got no answer from the provider and were not written or scored "
                    f"({', '.join(r.conversation_id for r in unanswered[:5])}{', ...' if len(unanswered) > 5 else ''}"
                    f"{f'; first error: {first.error}' if first else ''}). Run the command again to retry them; "
                    "answers already received are cached."
                )
            )
        return [r.output for r in scoreable]

    def _through_celery(
        self, em: Any, options: dict[str, Any], conversations: list[Any], run_provenance: dict[str, Any]
    ) -> list[Any]:
        from attunebench import canonical as cf
        from scoring import replay_service, run_control
        from scoring.models import EvaluationRun, RunConversation

        run = replay_service.do_create_run(
            em.name,
            options["mode"],
            options["panas_strategy"],
            options["judge"],
            conversation_ids=[c.conversationId for c in conversations],
            origin=EvaluationRun.Origin.CLI,
            provenance=run_provenance,
        )
        run_control.start_run(run.pk)
        self.stderr.write(f"Run {run.pk} queued for Celery workers (start one with `attune worker`).")
        for line in replay_service.run_limits(run):
            self.stdout.write(line)
        while True:
            progress = replay_service.run_progress(run.pk)
            self.stderr.write(
                f"\rrun {run.pk} {progress['status']}: conversations {progress['conversations_done']}/"
                f"{progress['conversations_total']} ({progress['conversations_failed']} failed) | calls "
                f"{progress['calls_made']} made, {progress['calls_cached']} cached, "
                f"{progress['calls_recovered']} recovered after a crash, "
                f"{progress['calls_reused']} reused from an earlier attempt, "
                f"{progress['calls_failed']} failed | "
                f"cost ${progress['cost_usd']:.4f}",
                ending="",
            )
            if progress["status"] in (
                EvaluationRun.Status.DONE,
                EvaluationRun.Status.FAILED,
                EvaluationRun.Status.CANCELLED,
            ):
                break
            time.sleep(1.0)
        self.stderr.write("")
        outputs = RunConversation.objects.filter(run=run, status=RunConversation.Status.DONE).values_list(
            "output", flat=True
        )
        return [cf.parse_run(output) for output in outputs]

    def _score(self, conversations: list[Any], runs: list[Any], min_coverage: float) -> None:
        from attunebench.metrics.engine import score_runs
        from attunebench.metrics.report import format_leaderboard

        result = score_runs(conversations, runs, precomputed=self.scored)
        report = result.report()
        self.stdout.write(format_leaderboard(report))
        self.stdout.write(post_coverage_summary(report))
        answered, asked = answer_coverage(conversations, runs)
        coverage = answered / asked if asked else 1.0
        if coverage < min_coverage:
            raise CommandError(
                f"coverage {coverage:.2f} is below --min-coverage {min_coverage:.2f}: the model answered {answered} "
                f"of the {asked} turns and post-conversation answers the score should rest on; the rest are "
                "defaults. Run again with --retry-failed (same --out) to replay only what failed."
            )


def post_coverage_summary(report: ScoringReport) -> str:
    """One line per (model, mode): post-conversation coverage and how many holistic scores are imputed.

    Turn coverage alone can read 100% while every post-conversation call failed and
    the holistic part of the composite came from the scorer's defaults.
    """
    from attunebench.metrics.report import leaderboard_rows

    lines = ["Post-conversation coverage (holistic imputed = rests on defaults for a missing answer):"]
    for row in leaderboard_rows(report):
        shown = "not reported" if row.post_coverage is None else f"{100 * row.post_coverage:.0f}%"
        lines.append(
            f"  {row.em_model} {row.mode}: {shown}; "
            f"holistic imputed in {row.holistic_imputed} of {row.n_conversations} conversations"
        )
    return "\n".join(lines)


# -- several processes (``--processes``) ---------------------------------------

# The job of the forked children: (em, config, conversations, options, processes, progress, stop, errors, the
# positions of the conversations in the order they are taken, the shared count of those taken, the queue each
# finished conversation's result is sent back on).
_SHARE_JOB: tuple[Any, Any, list[Any], dict[str, Any], int, Any, Any, Any, list[int], Any, Any] | None = None
# What each child keeps current in its row of the shared progress array (summed over children).
PROGRESS_FIELDS = (
    "done",
    "calls_made",
    "calls_cached",
    "calls_failed",
    "cost_spent",
    "cost_unknown",
    "level",
    "ceiling",
    "calls_unconnected",
    "last_error_at",
    *(f"failed:{reason}" for reason in REASONS),
)
#: Bytes of each child's last error in the shared text array.
ERROR_BYTES = 256


class FinishedResults:
    """The thread that receives the replay processes' results as each conversation finishes.

    It files each result under its position and hands it to ``prepare`` (its run file and score are made
    then, while the others still run); ``finish`` waits until every process said it is done (or, after a
    failure, stops at once). An error in ``prepare`` is kept and raised by ``raise_error``, never swallowed:
    the thread goes on draining the queue meanwhile, so no process blocks on a full pipe.
    """

    def __init__(self, queue: Any, processes: int, received: dict[int, Any], prepare: Any) -> None:
        import threading

        self.queue, self.processes, self.received, self.prepare = queue, processes, received, prepare
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._receive, name="replay-results", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _receive(self) -> None:
        import queue

        done = 0
        while done < self.processes:
            try:
                _, position, result = self.queue.get(timeout=0.1)
            except queue.Empty:
                if self.stopping.is_set():
                    return
                continue
            if position is None:
                done += 1
                continue
            self.received[position] = result
            if self.error is None:
                try:
                    self.prepare(position, result)
                except Exception as exc:  # raised in the main thread by raise_error
                    self.error = exc

    def finish(self, failed: bool) -> None:
        """Wait for the last results; after a failure, only stop the thread."""
        if failed:
            self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error


def watch_from_counts(counts: dict[str, float], last_error: str) -> Any:
    """A ``FailureWatch`` holding the children's summed failure counts, to describe them as one process does."""
    from attunebench.replay.failures import FailureWatch

    watch = FailureWatch(stop_after=0)
    for reason in REASONS:
        if counts[f"failed:{reason}"]:
            watch.failed_calls[reason] = int(counts[f"failed:{reason}"])
    watch.unconnected = int(counts["calls_unconnected"])
    watch.last_error = last_error
    return watch


def prepare_for_the_end() -> None:
    """Import what writing, recording and scoring a run need (the scorer's matching, the URL configuration the
    run's address is read from), in the parent while its replay processes work: the parent only waits for them
    then, so the run's end does not pay for these imports after the last answer."""
    import importlib

    from django.urls import NoReverseMatch, reverse

    for module in ("scipy.optimize", "attunebench.metrics.engine", "attunebench.metrics.report"):
        importlib.import_module(module)
    with contextlib.suppress(NoReverseMatch):
        reverse("research:run", args=[1])  # loads and indexes the URL configuration, as recording does


def load_for_replay(em: Any, config: Any) -> bool:
    """Import litellm when a model of the run is called through it, then freeze the start-up heap; True if it
    froze it.

    Before the replay starts (and before ``--processes`` forks), so neither the
    import nor the collector's walks over what it loaded fall inside the run
    (``attunebench.replay.heap``). A model on the OpenAI SDK route never needs
    litellm (``needs_litellm``), so its run does not wait for litellm's import.
    Offline baselines load nothing heavy and make no calls to wait on: their
    process is left as it is.
    """
    from attunebench.replay.heap import freeze_startup_heap
    from attunebench.replay.llm import load_litellm, needs_litellm

    if em.is_offline and (config.judge is None or config.judge.is_offline):
        return False
    if needs_litellm(em) or needs_litellm(config.judge):
        load_litellm()
    freeze_startup_heap()
    return True


def progress_line(done: int, total: int, totals: Any, limit: str, started: float, failures: str = "") -> str:
    """The progress line of a replay: conversations, calls (made = requests that reached the provider), cost,
    the adaptive limit, time, and ``failures`` (by kind, with the last error: ``FailureWatch.describe``)."""
    cost = f"${totals.cost_spent:.4f}" + ("+?" if totals.cost_unknown else "")
    return (
        f"conversations {done}/{total} | calls {int(totals.calls_made)} made, {int(totals.calls_cached)} cached, "
        f"{int(totals.calls_failed)} failed | cost {cost}{limit} | {time.perf_counter() - started:.1f}s{failures}"
    )


def has_gaps(conversation: Any, run: Any) -> bool:
    """Whether a run file lacks something the model should have answered: a failed call, a turn, the post."""
    failed = (run.model_extra or {}).get("failed_calls") or []
    return bool(failed) or len(run.turns) < len(conversation.turns) or run.post_conversation is None


def answer_coverage(conversations: list[Any], runs: list[Any]) -> tuple[int, int]:
    """(answers the score rests on, answers asked): every ground-truth turn and one post-conversation answer per
    conversation; a conversation without a run file answered none."""
    by_id = {run.conversationId: run for run in runs}
    asked = answered = 0
    for conversation in conversations:
        numbers = {turn.turnNumber for turn in conversation.turns}
        asked += len(numbers) + 1
        run = by_id.get(conversation.conversationId)
        if run is not None:
            answered += len(numbers & {turn.turnNumber for turn in run.turns})
            answered += run.post_conversation is not None
    return answered, asked


def latest_error(progress: Any, errors: Any, processes: int) -> str:
    """The most recent last error among the children (each keeps its own in its slot of ``errors``)."""
    width, at = len(PROGRESS_FIELDS), PROGRESS_FIELDS.index("last_error_at")
    times = [progress[k * width + at] for k in range(processes)]
    newest = max(range(processes), key=lambda k: times[k])
    if not times[newest]:
        return ""
    raw = bytes(errors[newest * ERROR_BYTES : (newest + 1) * ERROR_BYTES])
    return raw.rstrip(b"\0").decode("utf-8", "ignore")


def shared_progress(progress: Any, processes: int) -> dict[str, float]:
    """Every child's row of the progress array, added up field by field."""
    width = len(PROGRESS_FIELDS)
    return {name: sum(progress[k * width + i] for k in range(processes)) for i, name in enumerate(PROGRESS_FIELDS)}


def process_count(requested: int | None, concurrency: int, conversations: int) -> int:
    """How many processes to replay in: as asked (default the cores this process may run on, which a
    container's CPU set or a task set narrows below the machine's CPU count), never more than the concurrency
    (each needs a slot) nor the conversations (each needs a share)."""
    wanted = requested if requested is not None else usable_cores()
    return max(1, min(wanted, concurrency, conversations))


def smallest_ceiling(specs: list[Any], concurrency: int) -> int:
    """The lowest in-flight ceiling of the run's models (registry cap or ``--concurrency``)."""
    from attunebench.replay.scheduler import in_flight_ceiling

    ceilings = [in_flight_ceiling(s.limits, concurrency) for s in specs if s is not None and not s.is_offline]
    return min([concurrency, *ceilings])


def smallest_rpm(specs: list[Any]) -> int | None:
    """The lowest per-minute limit of the run's models, None without one (each process needs one request a minute)."""
    rpms = [s.rpm for s in specs if s is not None and not s.is_offline and s.rpm]
    return min(rpms) if rpms else None


def spec_share(spec: Any, processes: int, index: int) -> Any:
    """``spec`` with its registry caps (in flight, per minute) cut to process ``index``'s share of them."""

    if spec is None or spec.is_offline:
        return spec
    changes = {
        name: split_concurrency(value, processes)[index]
        for name, value in (("max_in_flight", spec.max_in_flight), ("rpm", spec.rpm))
        if value is not None
    }
    return dataclasses.replace(spec, **changes) if changes else spec


def split_concurrency(concurrency: int, processes: int) -> list[int]:
    """The cap split across processes so the parts add up to it exactly (earlier ones take the remainder)."""
    base, extra = divmod(concurrency, processes)
    return [base + (1 if k < extra else 0) for k in range(processes)]


def sum_stats(results: list[Any]) -> Any:
    """Call accounting of several conversations' results, added up."""
    from attunebench.replay.protocol import ReplayStats

    totals = ReplayStats()
    for result in results:
        totals.add(result.stats)
    return totals


def open_conversations(concurrency: int, conversations: int, processes: int) -> int:
    """How many conversations a replay process keeps open at once: as many as one process keeps by itself
    (``Replayer.replay_many``: twice its part of the cap, enough to keep it full, and once the list is empty
    enough left to keep it full while they finish), but never more than an even share of all of them. The
    process that starts first would otherwise take the whole list, and the others' parts of the cap would
    wait with too few conversations to fill them."""
    return max(1, min(max(4, 2 * concurrency), -(-conversations // processes)))


def take_next(order: list[int], taken: Any, stop: Any) -> int | None:
    """The position of the next conversation of the shared list, counted as taken; None when all are taken or
    the run is stopping. Each position is handed out once, whichever process asks: the count moves under its
    lock (held for a read and a write, so the event loops asking never wait on each other for long)."""
    if stop.value:
        return None
    with taken.get_lock():
        next_up = taken.value
        if next_up >= len(order):
            return None
        taken.value = next_up + 1
    return order[next_up]


def _replay_share(index: int) -> list[int]:
    """In a forked child: replay conversations taken from the shared list (``take_next``) until none is left.

    Sends each (index, position in the conversations, result) on the results queue as the conversation
    finishes, then (index, None, None); returns the positions it replayed. While it runs, its
    counts and adaptive (level, ceiling) are written to its row of the shared
    progress array every quarter second, from this thread (never the loop's),
    and it stops (``Abandoned``) once the parent says another share failed.
    """

    from attunebench.replay.aio import run_sync, run_sync_beating
    from attunebench.replay.llm import warm_up
    from attunebench.replay.run import make_replayer

    assert _SHARE_JOB is not None, "no share job: _replay_share runs only in children of _in_processes"
    from attunebench.replay.failures import FailureWatch

    em, config, conversations, options, processes, progress, stop, errors, order, taken, finished = _SHARE_JOB
    cache = call_cache(options)
    concurrency = split_concurrency(options["concurrency"], processes)[index]
    # The registry's caps are for the whole run: each process keeps to its share of them.
    share_config = dataclasses.replace(config, judge=spec_share(config.judge, processes, index))
    replayer = make_replayer(
        spec_share(em, processes, index),
        share_config,
        dataset=conversations,
        concurrency=concurrency,
        cache=cache,
        watch=FailureWatch(options["stop_early_after"]),
    )
    last_error = [""]

    def report() -> bool:
        t = replayer.totals
        levels = [pair for provider, pair in replayer.scheduler.levels().items() if provider != "offline"]
        row = {
            "done": replayer.conversations_done,
            "calls_made": t.calls_made,
            "calls_cached": t.calls_cached,
            "calls_failed": t.calls_failed,
            "cost_spent": t.cost_spent,
            "cost_unknown": 1.0 if t.cost_unknown else 0.0,
            "level": sum(p[0] for p in levels),
            "ceiling": sum(p[1] for p in levels),
            "calls_unconnected": t.calls_unconnected,
            "last_error_at": progress[index * len(PROGRESS_FIELDS) + PROGRESS_FIELDS.index("last_error_at")],
            **{f"failed:{reason}": replayer.watch.failed_calls[reason] for reason in REASONS},
        }
        if replayer.watch.last_error != last_error[0]:
            last_error[0] = replayer.watch.last_error
            row["last_error_at"] = time.time()
            text = last_error[0].encode("utf-8")[: ERROR_BYTES - 1].ljust(ERROR_BYTES, b"\0")
            errors[index * ERROR_BYTES : (index + 1) * ERROR_BYTES] = text
        progress[index * len(PROGRESS_FIELDS) : (index + 1) * len(PROGRESS_FIELDS)] = [row[n] for n in PROGRESS_FIELDS]
        return not stop.value  # False cancels this share's replay: another share failed

    # Here, not before the fork: litellm's background logging is bound to the loop that makes the calls.
    run_sync(warm_up([em, config.judge]))
    report()
    replay = replayer.replay_claimed(
        conversations,
        lambda: take_next(order, taken, stop),
        open_conversations(concurrency, len(order), processes),
        # A queue's put hands the result to its feeder thread: the event loop does not wait on the pipe.
        on_done=lambda position, result: finished.put((index, position, result)),
    )
    results = run_sync_beating(replay, 0.25, report)
    report()
    finished.put((index, None, None))
    return [position for position, _ in results]
