"""Long-lived process state: one object per process, reset in a forked child, and bounded."""

from __future__ import annotations

import os

import pytest

from attunebench.synth import synth_conversations
from collection import chat_model
from datasets.exchange import import_documents
from scoring import replay_service


@pytest.fixture(autouse=True)
def fresh_state():
    replay_service.reset_process_state()
    yield
    replay_service.reset_process_state()


def in_forked_child(check) -> bool:
    """Run ``check()`` in a forked child (as Celery's prefork pool does) and return its answer."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe and leave at once, touching nothing else
        try:
            os.write(write, b"1" if check() else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    return answer == b"1"


def test_a_forked_child_starts_with_fresh_replay_state():
    parent_cache = replay_service.build_cache()
    parent_lock = replay_service._state.lock
    parent_lock.acquire()  # held at the moment of the fork, as another thread might hold it
    try:
        fresh = in_forked_child(
            lambda: (
                replay_service._state.cache is None
                and not replay_service._state.prior_tallies
                and replay_service._state.lock.acquire(timeout=1)
            )
        )
    finally:
        parent_lock.release()
    assert fresh
    assert replay_service.build_cache() is parent_cache  # the parent keeps its own


def test_a_forked_child_makes_its_own_chat_loop():
    chat_model._background_loop()
    assert chat_model._loop is not None
    assert in_forked_child(lambda: chat_model._loop is None)


def test_the_memory_layer_of_the_worker_cache_is_bounded():
    memory = replay_service.build_cache().layers[0]
    assert memory.maxsize == replay_service.MEMORY_CACHE_ENTRIES == 10_000


@pytest.mark.django_db
def test_prior_tallies_are_kept_for_the_most_recent_runs_only():
    docs = synth_conversations(2, seed=5, min_turns=2, max_turns=2)
    ids = import_documents([(d.conversationId, d) for d in docs]).imported
    runs = [replay_service.do_create_run("baseline:prior", "default", conversation_ids=ids) for _ in range(3)]
    first = replay_service._prior_tally_for(runs[0])
    assert sorted(first.own) == sorted(ids)
    assert replay_service._prior_tally_for(runs[0]) is first  # held, not loaded again
    replay_service._prior_tally_for(runs[1])
    replay_service._prior_tally_for(runs[0])  # runs[0] is now the most recently used
    replay_service._prior_tally_for(runs[2])  # a third run: runs[1], the least recently used, goes
    assert list(replay_service._state.prior_tallies) == [runs[0].pk, runs[2].pk]
    assert replay_service.PRIOR_TALLIES_KEPT == 2
