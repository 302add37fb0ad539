"""The web server's default sizes: processes follow the cores, and their pools never outgrow Postgres's default."""

from __future__ import annotations

import pytest

from attune_site import serving


@pytest.mark.parametrize(("cores", "workers"), [(1, 2), (2, 4), (3, 6), (4, 8), (16, 8)])
def test_two_processes_per_core_with_redis(monkeypatch, cores, workers):
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.delenv("ATTUNE_WEB_WORKERS", raising=False)
    monkeypatch.setattr(serving, "usable_cores", lambda: cores)
    assert serving.web_workers() == workers


def test_one_process_without_redis_and_the_operator_s_value_wins(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("ATTUNE_WEB_WORKERS", raising=False)
    assert serving.web_workers() == 1
    monkeypatch.setenv("ATTUNE_WEB_WORKERS", "3")
    assert serving.web_workers() == 3


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 5, 6, 7, 8, 16, 64])
def test_the_default_pools_stay_within_postgres_s_default_connections(workers):
    size = serving.web_pool_size(workers)
    assert 5 <= size <= 20
    # Every default process count (2 to 8) shares at most the web's 48 connections.
    if 2 <= workers <= 8:
        assert workers * size <= serving.WEB_CONNECTIONS


def test_a_fifth_of_the_default_threads_serve_pages(monkeypatch):
    monkeypatch.delenv("ATTUNE_WEB_THREADS", raising=False)
    threads = serving.web_threads()
    assert threads == 200
    assert serving.stream_slots(threads) == 160
    assert serving.reserved_threads(threads) == 40
