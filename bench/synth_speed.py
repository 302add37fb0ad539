"""How fast synthetic conversations are generated: scale tests and the replay benchmarks build thousands.

Generates 200 conversations of 10 turns (2,000 turns) a few times and prints the best time and turns per
second. Prints figures; asserts nothing (a test checks what is generated, not how fast).

    PYTHONPATH=. python bench/synth_speed.py [conversations] [repeats]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attunebench.synth import synth_conversations


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        conversations = synth_conversations(count, seed=3, min_turns=10, max_turns=10)
        times.append(time.perf_counter() - started)
    turns = sum(len(c.turns) for c in conversations)
    best = min(times)
    print(f"{count} conversations, {turns} turns: best of {repeats} {best:.3f} s ({turns / best:,.0f} turns/s)")
    print(f"synth_turns={turns} synth_best_s={best:.3f} synth_turns_per_s={turns / best:.0f}")


if __name__ == "__main__":
    main()
