"""The fake provider's hold: requests wait until enough are in flight at once, so a test sees a client's
whole concurrency however a loaded machine spreads its sends (devtools.fake_llm_server)."""

from __future__ import annotations

import threading

from attunebench.replay import prompts as P
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, http_json
from tests.core.replay_calls import draft_context
from tests.polling import wait_for


def test_held_requests_wait_until_enough_are_in_flight_and_from_then_on_none_waits():
    draft = {"model": "fake-em", "messages": P.build_messages(draft_context())}
    chat = {"model": "fake-em", "messages": [{"role": "user", "content": "no task line: not a held type"}]}
    with FakeLLMServer(FakeConfig(hold_until_in_flight=3, hold_call_types=[P.DRAFT])) as server:
        url = f"{server.url}/chat/completions"
        answers: list[dict] = []
        held = [threading.Thread(target=lambda: answers.append(http_json(url, draft))) for _ in range(2)]
        for thread in held:
            thread.start()
        wait_for(lambda: server.stats()["in_flight"] == 2, 10, "two held requests", server.stats, every=0.01)

        assert http_json(url, chat)["choices"]  # another type goes through while the two wait
        assert not answers and server.stats()["in_flight"] == 2

        third = http_json(url, draft)  # the third at once lets all three go
        for thread in held:
            thread.join(10)
        assert len(answers) == 2 and third["choices"]
        assert server.stats()["peak_in_flight"] == 3 and server.stats()["by_call_type"][P.DRAFT] == 3

        assert http_json(url, draft)["choices"]  # reached once: a lone request no longer waits

        server.reset()  # a reset holds the next ones again
        waiting = threading.Thread(target=lambda: answers.append(http_json(url, draft)))
        waiting.start()
        wait_for(lambda: server.stats()["in_flight"] == 1, 10, "one held request", server.stats, every=0.01)
        assert len(answers) == 2
        server.configure(hold_until_in_flight=1)  # one at once is enough now: the next lets both go
        http_json(url, draft)
        waiting.join(10)
        assert len(answers) == 3
