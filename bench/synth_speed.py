"""How fast synthetic conversations are generated: scale tests and the replay benchmarks build thousands.

Generates 200 conversations of 10 turns (2,000 turns) a few times and prints the best time and turns per
second. Prints figures; asserts nothing (a test checks what is generated, not how fast).

    PYTHONPATH=. python bench/synth_speed.py [--conversations N] [--repeats K] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import figures_line

from attunebench.synth import synth_conversations


def main() -> None:
    parser = argparse.ArgumentParser(description="synthetic conversation generation speed")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="10 conversations once: the path, not the timing")
    args = parser.parse_args()
    count, repeats = (10, 1) if args.smoke else (args.conversations, args.repeats)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        conversations = synth_conversations(count, seed=3, min_turns=10, max_turns=10)
        times.append(time.perf_counter() - started)
    turns = sum(len(c.turns) for c in conversations)
    best = min(times)
    print(f"{count} conversations, {turns} turns: best of {repeats} {best:.3f} s ({turns / best:,.0f} turns/s)")
    print(figures_line("synth_speed", turns=turns, best_s=best, turns_per_s=turns / best))


if __name__ == "__main__":
    main()
