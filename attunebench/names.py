"""What a name shown in lists may hold: the one rule for dataset versions, snapshots, models and the API.

A name needs a visible character and holds no control characters (C0, DEL, C1) and none of the invisible
formatting characters that change how the text around them is shown: bidirectional embeddings, overrides
and isolates (a right-to-left override shows "txt.exe" as "exe.txt"), and zero-width characters (two names
that look alike but differ).
"""

from __future__ import annotations

import re
import unicodedata

CONTROL = "\x00-\x1f\x7f-\x9f"
INVISIBLE_FORMATTING = (
    "\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufe00-\ufe0f\ufeff"
)

# The pattern the API schema states, so clients see what is accepted.
NAME_PATTERN = (
    rf"^[^{CONTROL}{INVISIBLE_FORMATTING}]*[^{CONTROL}{INVISIBLE_FORMATTING}\s][^{CONTROL}{INVISIBLE_FORMATTING}]*$"
)
NAME_RULE = "must contain a visible character and no control characters or invisible formatting characters."

_CONTROL = re.compile(f"[{CONTROL}]")
_INVISIBLE = re.compile(f"[{INVISIBLE_FORMATTING}]")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be shown as a name, in a sentence; None when it can."""
    if not name.strip():
        return "The name is empty; give it a visible character."
    if _CONTROL.search(name):
        return "The name holds a control character; use visible characters only."
    for position, character in enumerate(name, 1):
        if _INVISIBLE.match(character) or unicodedata.category(character) in ("Cf", "Zl", "Zp"):
            return (
                f"The name holds an invisible formatting character (U+{ord(character):04X}, at position "
                f"{position}), such as a right-to-left override or a zero-width space, which can make it "
                "display as another name; remove it."
            )
    return None
