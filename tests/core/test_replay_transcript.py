"""Call records of the pure replay core: one per request sent, exactly as sent."""

from __future__ import annotations

import asyncio

from attunebench.replay import prompts as P
from attunebench.replay.baselines import RandomBaseline
from attunebench.replay.llm import EMSpec
from attunebench.replay.protocol import ReplayConfig, Replayer
from attunebench.replay.scheduler import PermanentCallError
from devtools.replay_fixtures import RecordingBackend, ScriptedBackend, marked_conversation

EM = EMSpec(name="test/em", litellm_model="test/em")


def test_every_request_is_recorded_with_the_messages_the_backend_got():
    conversation = marked_conversation(turns=2)
    backend = RecordingBackend(RandomBaseline(seed=2))
    result = asyncio.run(Replayer(EM, backend, ReplayConfig()).replay(conversation))
    assert len(result.calls) == result.stats.calls_made == len(backend.calls)
    assert [c.sequence for c in result.calls] == list(range(len(result.calls)))
    assert sorted(map(str, (c.messages for c in result.calls))) == sorted(str(r.messages) for r in backend.calls)
    assert all(c.parsed is not None and c.raw_reply and c.transport_attempts == 1 for c in result.calls)
    assert result.calls[0].call_type == P.DRAFT and result.calls[0].turn_number == 1
    assert result.calls[1].call_type == P.ANALYSIS
    assert any(c.call_type == P.POST and c.turn_number is None for c in result.calls)


def test_unusable_replies_and_refused_calls_leave_records_saying_why():
    conversation = marked_conversation(turns=1)
    scripted = ScriptedBackend(["not json"] * 3, RandomBaseline(seed=1))
    result = asyncio.run(Replayer(EM, scripted, ReplayConfig(parse_attempts=3)).replay(conversation))
    drafts = [c for c in result.calls if c.call_type == P.DRAFT]
    assert [c.attempt for c in drafts] == [1, 2, 3]
    assert all(c.raw_reply == "not json" and c.parse_error and c.parsed is None for c in drafts)
    assert drafts[1].messages == scripted.seen[1]

    class Refuses(RandomBaseline):
        async def complete(self, spec, messages, ctx):
            if ctx.call_type == P.POST:
                raise PermanentCallError("provider rejected the request")
            return await super().complete(spec, messages, ctx)

    refused = asyncio.run(Replayer(EM, Refuses(seed=1), ReplayConfig()).replay(conversation))
    (post,) = [c for c in refused.calls if c.call_type == P.POST]
    assert post.raw_reply is None and post.latency_s is None
    assert post.error == "permanent error: provider rejected the request"
    assert post.messages and post.transport_attempts == 1
