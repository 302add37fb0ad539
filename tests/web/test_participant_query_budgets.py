"""Queries per participant request stay few and do not grow with the conversation: submits stay cheap.

At a hundred participants online, every query of an annotation submit is
paid a hundred times over on a two-core server shared with Postgres; a
page that writes one row per question, or reads every earlier turn,
shows up as latency for everyone. The budgets are upper bounds with a
little room (the two settings differ by the queued rewrite); a change that
needs more must raise them here, on purpose.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.web.test_participant_flow import Walker, every_answer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _quick(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0


def counted(walker: Walker, method: str, path: str, data: dict | None = None) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as queries:
        response = walker.get(path) if method == "GET" else walker.post(path, data)
    assert response.status_code in (200, 302), (path, response.status_code)
    return len(queries), response


def turn_counts(walker: Walker, number: int) -> dict[str, int]:
    counts = {}
    assert walker.send(f"Message {number}: I feel worried.", number).status_code == 200
    assert walker.reply(number)[-1]["type"] == "done"
    url = walker.url(f"turn/{number}/")
    counts["answers page"], page = counted(walker, "GET", url)
    html = walker.body(page)
    ids = list(dict.fromkeys(re.findall(r'name="observed_(B\d+)"', html)))
    shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    data = {"step": "answers", "shown": shown, "no_change": "on", **every_answer(ids, "yes", "no")}
    counts["answers submit"], _ = counted(walker, "POST", url, data)
    counts["rewrite page"], _ = counted(walker, "GET", url)
    data = {"step": "rewrite", "human_edited": f"My ideal reply {number}", "questions": ["general"]}
    counts["rewrite submit"], _ = counted(walker, "POST", url, data)
    counts["compare page"], page = counted(walker, "GET", url)
    names = set(re.findall(r'name="(winner_\d+)"', walker.body(page)))
    counts["compare submit"], _ = counted(walker, "POST", url, {"step": "compare", **dict.fromkeys(names, "B")})
    counts["chat page"], _ = counted(walker, "GET", walker.url("chat/"))
    return counts


# Upper bounds with a little room (without Redis the suggested rewrite is made inside the request, with
# it the request only queues it): what they catch is a query per question or per earlier turn.
BUDGET = {
    # every request starts with one statement: participant, consent, profile, study, conversation, last turn
    "answers page": 4,  # the turn's answers are read once (prefetched); no mood tags read before any are saved
    "answers submit": 19,  # 36 questions answered: 2 statements for all of them, not one UPDATE each
    "rewrite page": 4,  # the rewrite row is read once (kept on the turn), however often the page asks
    "rewrite submit": 10,  # the rewrite row read for the page is kept, not read again after saving
    "compare page": 6,
    # every winner in one UPDATE, not one per comparison; the open ones are the page's; the step after the
    # turn is read here (one statement) so the browser goes straight there, not through the study link
    "compare submit": 10,
    "chat page": 4,  # the next turn's number comes from the turns shown
}


def test_annotation_requests_have_a_fixed_small_query_count(client, participant):
    walker = Walker(client, participant)
    walker.to_chat()
    turn_counts(walker, 1)  # the first turn also places the attention check
    second, third, fourth = (turn_counts(walker, n) for n in (2, 3, 4))
    assert second == third == fourth  # nothing grows with the number of turns before
    over = {name: (count, BUDGET[name]) for name, count in third.items() if count > BUDGET[name]}
    assert not over, f"queries over budget (count, budget): {over}"
