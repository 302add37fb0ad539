"""`attune eval --processes N`: the cap split across processes, each replaying a share; same files and scores as one."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from attunebench.canonical import dumps_canonical
from attunebench.replay.llm import EMSpec
from attunebench.replay.protocol import planned_calls
from attunebench.synth import document_filename, synth_conversations
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring.management.commands.eval import (
    open_conversations,
    process_count,
    smallest_ceiling,
    smallest_rpm,
    spec_share,
    split_concurrency,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_cap_is_split_so_the_parts_add_up_to_it():
    assert split_concurrency(32, 2) == [16, 16]
    assert split_concurrency(7, 3) == [3, 2, 2]  # 7 = 3 + 2 + 2
    assert split_concurrency(2, 2) == [1, 1]


def test_a_process_keeps_twice_its_cap_open_but_never_more_than_an_even_share():
    assert open_conversations(16, 80, 2) == 32  # 80 conversations, cap 32 over two: 16 more wait in the list
    assert open_conversations(32, 80, 2) == 40  # cap 64 over two: the first to start cannot take all 80
    assert open_conversations(1, 80, 2) == 4
    assert open_conversations(8, 3, 4) == 1


def test_never_more_processes_than_slots_or_conversations():
    assert process_count(4, 32, 40) == 4
    assert process_count(8, 3, 40) == 3  # each process needs at least one slot
    assert process_count(8, 32, 2) == 2  # and at least one conversation
    assert process_count(None, 32, 40) == max(1, min(len(os.sched_getaffinity(0)), 32, 40))  # the usable cores


def eval_env(data: Path) -> dict[str, str]:
    """The environment of an `attune` subprocess: embedded settings in its own data directory."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return env | {"ATTUNE_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def conversations_folder(tmp_path: Path, count: int, seed: int, turns: int) -> Path:
    """``count`` synthetic conversations of ``turns`` turns as canonical files."""
    folder = tmp_path / "conversations"
    folder.mkdir()
    for document in synth_conversations(count, seed=seed, min_turns=turns, max_turns=turns):
        (folder / document_filename(document)).write_text(dumps_canonical(document), encoding="utf-8")
    return folder


def _eval(api_base: str, folder: Path, out: Path, data: Path, processes: int) -> subprocess.CompletedProcess[str]:
    env = eval_env(data)
    command = [
        sys.executable,
        "-m",
        "attune_site.cli",
        "eval",
        "--no-preflight",
        "--model",
        "openai/fake-em",
        "--api-base",
        api_base,
    ]
    command += ["--conversations", str(folder), "--concurrency", "6", "--no-cache", "--temperature", "0"]
    command += ["--processes", str(processes), "--out", str(out)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_several_processes_write_the_same_run_files_and_scores_as_one(tmp_path):
    folder = tmp_path / "conversations"
    folder.mkdir()
    conversations = synth_conversations(5, seed=7, min_turns=2, max_turns=3)
    for document in conversations:
        (folder / document_filename(document)).write_text(dumps_canonical(document), encoding="utf-8")
    with FakeLLMServer(FakeConfig()) as server:
        one = _eval(server.url, folder, tmp_path / "one", tmp_path / "data1", processes=1)
        three = _eval(server.url, folder, tmp_path / "three", tmp_path / "data3", processes=3)
    assert one.returncode == 0, one.stderr
    assert three.returncode == 0, three.stderr
    assert "Replaying in" not in one.stdout
    assert "Replaying in 3 processes, at most 2 + 2 + 2 calls in flight each" in three.stdout

    def untimed(path: Path) -> dict[str, object]:
        run = json.loads(path.read_bytes())
        run.pop("duration_seconds"), run.pop("run_timestamp")  # when and how long: the fields that may differ
        return run

    files_one = {p.name: untimed(p) for p in (tmp_path / "one").glob("*.json")}
    files_three = {p.name: untimed(p) for p in (tmp_path / "three").glob("*.json")}
    assert len(files_one) == 5
    assert files_three == files_one  # the same answers, stats and failures, file by file

    def scores(stdout: str) -> str:
        return (
            stdout[stdout.index("Wrote ") :]
            .replace(str(tmp_path / "three"), "OUT")
            .replace(str(tmp_path / "one"), "OUT")
        )

    assert scores(three.stdout) == scores(one.stdout)  # the same leaderboard and coverage, to the byte
    # The same calls made, in total, as one process made.
    made = [line for line in (one.stdout + three.stdout).splitlines() if line.startswith("conversations 5/5")]
    assert len(made) == 2 and made[0].split("| cost")[0] == made[1].split("| cost")[0]

    # Recorded alike: three processes score each conversation and make its call rows as it finishes, one
    # process does both at the end; the stored scores and calls are the same, value for value.
    def stored(data: Path) -> tuple[list[tuple[object, ...]], ...]:
        with sqlite3.connect(data / "attune.sqlite3") as db:
            return tuple(
                sorted(db.execute(query))
                for query in (
                    "SELECT c.conversation_id, s.composite_score, s.coverage, s.post_coverage, s.metrics "
                    "FROM scoring_conversationscore s JOIN collection_conversation c ON c.id = s.conversation_id",
                    "SELECT composite_score, metrics FROM scoring_runscore",
                    "SELECT c.conversation_id, t.sequence, t.call_type, t.turn_number, t.role, t.model, t.attempt, "
                    "t.messages, t.raw_reply, t.parsed, t.parse_error, t.error, t.prompt_tokens, "
                    "t.completion_tokens, t.cost_usd, t.transport_attempts, t.cached FROM scoring_calltranscript t "
                    "JOIN scoring_runconversation r ON r.id = t.run_conversation_id "
                    "JOIN collection_conversation c ON c.id = r.conversation_id",
                )
            )

    scores_one, run_one, calls_one = stored(tmp_path / "data1")
    assert len(scores_one) == 5 and len(run_one) == 1 and len(calls_one) == int(made[0].split(" made")[0].split()[-1])
    assert stored(tmp_path / "data3") == (scores_one, run_one, calls_one)


def test_registry_caps_are_shared_out_so_the_processes_together_keep_to_them():
    em = EMSpec(name="acme/em", litellm_model="openai/em", api_base="http://127.0.0.1:9/v1", max_in_flight=5, rpm=7)
    judge = EMSpec(name="acme/judge", litellm_model="openai/judge", max_in_flight=3)
    assert smallest_ceiling([em, judge], 32) == 3  # the judge's cap is the tightest limit
    assert smallest_ceiling([em, None], 4) == 4  # --concurrency below every registry cap
    assert smallest_ceiling([EMSpec(name="x", max_in_flight=50, rpm=2)], 32) == 32  # per-minute limits apart:
    assert smallest_rpm([EMSpec(name="x", max_in_flight=50, rpm=2), em, None]) == 2  # each process needs one
    assert smallest_rpm([adhoc := EMSpec(name="openai/x")]) is None
    shares = [spec_share(em, 2, k) for k in range(2)]
    assert [s.max_in_flight for s in shares] == [3, 2]  # 3 + 2 = the registry's 5
    assert [s.rpm for s in shares] == [4, 3]  # 4 + 3 = the registry's 7 per minute
    assert shares[0].name == em.name and shares[0].params == em.params
    assert spec_share(adhoc, 2, 1) is adhoc  # no registry caps: only --concurrency is split
    assert spec_share(None, 2, 0) is None


def test_a_registered_models_cap_holds_across_processes(tmp_path):
    """Through the command line: a registry cap of 3 stays 3 at the provider with --processes 2."""
    folder = conversations_folder(tmp_path, 8, seed=5, turns=2)
    env = eval_env(tmp_path / "data")

    def attune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "attune_site.cli", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    # The first requests are held until three are at the server at once: the two processes' shares (2 + 1)
    # then overlap however the machine schedules them, and shares of 1 + 1 could never get there.
    with FakeLLMServer(FakeConfig(latency_ms=100.0, hold_until_in_flight=3)) as server:
        assert (done := attune("migrate", "--noinput")).returncode == 0, done.stderr
        register = (
            "from scoring.models import EvaluatedModel; "
            f"EvaluatedModel.objects.create(name='acme/em', litellm_model='openai/em', api_base='{server.url}', "
            "max_concurrency=3)"
        )
        assert (done := attune("shell", "-c", register)).returncode == 0, done.stderr
        done = attune(
            "eval",
            "--no-preflight",  # the preflight's probe call would be counted with the run's
            "--model",
            "acme/em",
            "--conversations",
            str(folder),
            "--concurrency",
            "32",
            "--no-cache",
            "--processes",
            "2",
            "--out",
            str(tmp_path / "out"),
        )
        assert done.returncode == 0, done.stderr
        stats = server.stats()
    assert "at most 3 in flight (the registry's max_concurrency 3, below --concurrency 32)" in done.stdout
    assert "Replaying in 2 processes, at most 2 + 1 calls in flight each" in done.stdout
    # Never 2 x 3, and the shares add up to the cap (it is not simply cut to 1 per process).
    assert stats["peak_in_flight"] == 3
    assert len(list((tmp_path / "out").glob("*.json"))) == 8


def test_several_processes_show_live_progress_with_the_adaptive_limit(tmp_path):
    """On a terminal the children's counts are shown summed as the run goes, as one process shows its own."""
    import shlex
    import shutil

    script = shutil.which("script")  # util-linux: runs the command on a pseudo-terminal
    assert script, "util-linux's script is needed to give the command a terminal"
    folder = conversations_folder(tmp_path, 6, seed=3, turns=3)
    env = eval_env(tmp_path / "data")
    # 300 ms per answer and a chain of 7 calls per conversation: the replay lasts over two seconds,
    # several of the half-second progress refreshes, however fast the machine is.
    with FakeLLMServer(FakeConfig(latency_ms=300.0)) as server:
        command = [sys.executable, "-m", "attune_site.cli", "eval", "--no-preflight", "--model", "openai/fake-em"]
        command += ["--api-base", server.url, "--conversations", str(folder), "--concurrency", "4", "--no-cache"]
        command += ["--processes", "2", "--out", str(tmp_path / "out")]
        done = subprocess.run(
            [script, "-qec", shlex.join(command), "/dev/null"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        requests = server.stats()["requests"]
    assert done.returncode == 0, done.stdout[-3000:]
    lines = [part.strip() for part in done.stdout.replace("\r", "\n").splitlines()]
    assert not any("\x1b[" in line for line in lines)  # plain text: progress is not styled as an error
    progress = [line for line in lines if line.startswith("conversations ")]
    assert len(progress) >= 3  # refreshed while running, then the final line
    # A share shows its level once it has called (a slow child's may not have yet): never above the cap,
    # and at the end both shares' levels, summed: 2 + 2.
    limits = [re.search(r"\| limit (\d+)/(\d+) \|", line) for line in progress]
    assert all(int(m[1]) <= int(m[2]) <= 4 for m in limits if m)
    assert "| limit 4/4 |" in progress[-1]
    made = [int(line.split("calls ")[1].split(" made")[0]) for line in progress]
    assert made == sorted(made)  # counts only grow
    assert progress[-1].startswith(f"conversations 6/6 | calls {requests} made")  # the end agrees with the provider


def _children(pid: int) -> list[int]:
    """The processes ``pid`` forked itself (same command line), from /proc: its replay shares."""
    found = []
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(FileNotFoundError):
                if Path(f"/proc/{child}/cmdline").read_bytes() == own:
                    found.append(int(child))
    return found


def test_a_share_killed_mid_run_stops_the_run_with_a_clear_error_and_no_partial_files(tmp_path):
    """kill -9 of one replay process (the OOM killer, say): the command fails at once, saying what happened and
    what is kept; the other share stops too, and no run files are written as if the run were complete."""
    folder = conversations_folder(tmp_path, 6, seed=5, turns=3)
    out = tmp_path / "out"
    # Half a second per answer, a chain of 7 calls per conversation: the run lasts seconds after the first
    # request, which is when a share is killed.
    with FakeLLMServer(FakeConfig(latency_ms=500.0)) as server:
        command = [sys.executable, "-m", "attune_site.cli", "eval", "--no-preflight", "--model", "openai/fake-em"]
        command += ["--api-base", server.url, "--conversations", str(folder), "--concurrency", "4"]
        command += ["--cache-dir", str(tmp_path / "cache"), "--processes", "2", "--out", str(out)]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=eval_env(tmp_path / "data"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while server.stats()["requests"] == 0 or len(_children(process.pid)) < 2:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the replay never started"
                time.sleep(0.05)
            os.kill(_children(process.pid)[0], signal.SIGKILL)
            _, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        answered = server.stats()["requests"]
    assert process.returncode != 0
    assert "A replay process stopped unexpectedly (killed, or out of memory)" in stderr, stderr[-2000:]
    assert "kept in the call cache" in stderr
    assert "Traceback" not in stderr
    assert not out.exists() or not list(out.glob("*.json"))
    planned = sum(planned_calls(c, judge=False) for c in synth_conversations(6, seed=5, min_turns=3, max_turns=3))
    assert answered < planned  # stopped: the calls a whole run makes were never all sent


def test_the_shared_list_hands_every_conversation_to_exactly_one_process_longest_first():
    """Forked processes taking from one list at once, as the replay processes do: each position is taken once,
    none is lost, and the list starts with the longest chains."""
    import multiprocessing

    from attunebench.replay.protocol import critical_path_calls, longest_first
    from scoring.management.commands.eval import take_next

    conversations = synth_conversations(40, seed=11, min_turns=1, max_turns=9)
    order = longest_first(conversations)
    chains = [critical_path_calls(conversations[i]) for i in order]
    assert chains == sorted(chains, reverse=True) and sorted(order) == list(range(40))
    context = multiprocessing.get_context("fork")
    taken, stop = context.Value("q", 0), context.Value("b", 0, lock=False)
    received = context.Queue()

    def take_all() -> None:
        mine = []
        while (position := take_next(order, taken, stop)) is not None:
            mine.append(position)
        received.put(mine)

    workers = [context.Process(target=take_all) for _ in range(4)]
    for worker in workers:
        worker.start()
    parts = [received.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(p for part in parts for p in part) == list(range(40))  # every one, exactly once
    assert all(part == [p for p in order if p in part] for part in parts)  # each took them in the list's order
    stop.value = 1
    taken.value = 0
    assert take_next(order, taken, stop) is None  # a stopping run hands out nothing more


def test_replay_claimed_replays_each_handed_out_conversation_once():
    from attunebench.replay.aio import run_sync
    from attunebench.replay.llm import spec_from_name
    from attunebench.replay.protocol import ReplayConfig
    from attunebench.replay.run import make_replayer

    conversations = synth_conversations(7, seed=2, min_turns=1, max_turns=4)
    replayer = make_replayer(spec_from_name("baseline:random"), ReplayConfig(), dataset=conversations)
    queue = [6, 0, 3, 5, 1, 2, 4]
    passed_on: list[tuple[int, object]] = []
    pairs = run_sync(
        replayer.replay_claimed(
            conversations,
            lambda: queue.pop(0) if queue else None,
            3,
            on_done=lambda position, result: passed_on.append((position, result)),
        )
    )
    assert sorted(position for position, _ in pairs) == list(range(7))
    assert all(result.conversation_id == conversations[p].conversationId for p, result in pairs)
    # Each passed on once, the very result returned.
    assert sorted(passed_on, key=lambda pair: pair[0]) == sorted(pairs, key=lambda pair: pair[0])


def test_processes_sharing_the_list_replay_uneven_conversations_each_once_within_the_cap(tmp_path):
    """Through the command line, conversations of very different lengths over two processes: every one is
    replayed once (the provider sees exactly the calls one replay of each makes), each gets its run file, and
    the provider never sees more in flight than --concurrency."""
    folder = tmp_path / "conversations"
    folder.mkdir()
    conversations = synth_conversations(9, seed=21, min_turns=1, max_turns=6)
    for document in conversations:
        (folder / document_filename(document)).write_text(dumps_canonical(document), encoding="utf-8")
    with FakeLLMServer(FakeConfig(latency_ms=20.0)) as server:
        done = _eval(server.url, folder, tmp_path / "out", tmp_path / "data", processes=2)
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    assert "Replaying in 2 processes, at most 3 + 3 calls in flight each" in done.stdout
    assert stats["requests"] == sum(planned_calls(c, judge=False) for c in conversations)
    assert stats["peak_in_flight"] <= 6
    written = {json.loads(p.read_bytes())["conversationId"] for p in (tmp_path / "out").glob("*.json")}
    assert written == {c.conversationId for c in conversations}
    assert "conversations 9/9" in done.stdout
