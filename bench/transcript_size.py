"""How much a run's call transcripts hold: calls and stored bytes per conversation.

Replays the sample conversations with an offline baseline (and a judge) through the
pure core and sizes the call records as they would be stored (messages as JSON,
raw reply, parsed answer). Prints figures; asserts nothing.

    PYTHONPATH=. python bench/transcript_size.py [model] [judge]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import figures_line

from attunebench.canonical import load_conversation
from attunebench.replay.llm import spec_from_name
from attunebench.replay.protocol import ReplayConfig
from attunebench.replay.run import make_replayer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description="calls and stored bytes per conversation of a run's transcripts")
    parser.add_argument("model", nargs="?", default="baseline:lexicon")
    parser.add_argument("judge", nargs="?", default="baseline:random")
    parser.add_argument("--smoke", action="store_true", help="the first 3 sample conversations")
    args = parser.parse_args()
    model, judge = args.model, args.judge
    paths = sorted((ROOT / "sample_data").glob("*.json"))[: 3 if args.smoke else None]
    conversations = [load_conversation(p.read_bytes(), str(p)) for p in paths]
    config = ReplayConfig(judge=spec_from_name(judge))
    replayer = make_replayer(spec_from_name(model), config, dataset=conversations)
    results = asyncio.run(replayer.replay_many(conversations))
    per_conversation = []
    for result in results:
        size = sum(
            len(json.dumps(c.messages, ensure_ascii=False).encode())
            + len((c.raw_reply or "").encode())
            + len(json.dumps(c.parsed, ensure_ascii=False).encode())
            for c in result.calls
        )
        per_conversation.append((len(result.calls), size))
    calls = [c for c, _ in per_conversation]
    sizes = [s for _, s in per_conversation]
    print(f"{model} with judge {judge}: {len(results)} conversations")
    print(f"calls per conversation: min {min(calls)}, mean {sum(calls) / len(calls):.1f}, max {max(calls)}")
    print(
        f"stored text per conversation: min {min(sizes) / 1024:.1f} KiB, "
        f"mean {sum(sizes) / len(sizes) / 1024:.1f} KiB, max {max(sizes) / 1024:.1f} KiB; "
        f"per call mean {sum(sizes) / sum(calls) / 1024:.1f} KiB"
    )
    print(f"whole run: {sum(calls)} rows, {sum(sizes) / 1024 / 1024:.2f} MiB")
    print(
        figures_line(
            "transcript_size",
            conversations=len(results),
            calls_mean=sum(calls) / len(calls),
            kib_per_conversation=sum(sizes) / len(sizes) / 1024,
            kib_per_call=sum(sizes) / sum(calls) / 1024,
        )
    )


if __name__ == "__main__":
    main()
