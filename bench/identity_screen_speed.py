"""How much the identity screen costs a streamed reply.

Streams replies of typical and long length through ``StreamScreen`` in small
chunks, the way a provider sends them, and prints the screening time per reply
and per chunk, and how many characters the participant waits for at most
(the hold-back). Run: ``python bench/identity_screen_speed.py [--smoke]``.
"""

from __future__ import annotations

import argparse
import time

from figures import figures_line

from attunebench.identity import IdentityScanner, StreamScreen, configured_names

SENTENCE = (
    "It sounds like this week has asked a great deal of you, and it makes sense that you feel worn out. "
    "What part of it feels heaviest right now? "
)


def screen_once(scanner: IdentityScanner, text: str, chunk: int) -> tuple[float, int]:
    screen = StreamScreen(scanner)
    started = time.perf_counter()
    pieces = 0
    for start in range(0, len(text), chunk):
        assert screen.feed(text[start : start + chunk]) is not None
        pieces += 1
    assert screen.finish() is not None
    return time.perf_counter() - started, pieces


def main() -> None:
    parser = argparse.ArgumentParser(description="what the identity screen costs a streamed reply")
    parser.add_argument("--smoke", action="store_true", help="two passes each: the path, not the timing")
    passes = 2 if parser.parse_args().smoke else 20
    figures: dict[str, float] = {"hold_chars": StreamScreen.HOLD}
    scanner = IdentityScanner(configured_names("acme-frontier-9000", "acme", "openai/acme-frontier-9000"))
    print(f"hold-back: {StreamScreen.HOLD} characters (about 15 words) behind the provider stream")
    for key, label, repeats in (("typical", "typical reply (~150 words)", 6), ("long", "long reply (~600 words)", 24)):
        text = SENTENCE * repeats
        runs = [screen_once(scanner, text, chunk=4) for _ in range(passes)]
        best = min(seconds for seconds, _ in runs)
        pieces = runs[0][1]
        print(
            f"{label}: {len(text)} chars in {pieces} chunks: {best * 1000:.1f} ms per reply, "
            f"{best / pieces * 1e6:.0f} µs per chunk"
        )
        figures[f"{key}_ms_per_reply"] = best * 1000
        figures[f"{key}_us_per_chunk"] = best / pieces * 1e6
    print(figures_line("identity_screen_speed", **figures))


if __name__ == "__main__":
    main()
