"""A JSON parser that refuses deeply nested bodies with a 400 before Python's parser recurses into them.

No request of the API nests beyond a few levels; a body of a hundred thousand nested arrays would otherwise
end in a RecursionError (a 500 and a logged traceback) instead of the JSON 4xx every other bad input gets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from io import BytesIO
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 64

# A string, or an unterminated one to the end of the body: every match succeeds where it starts, so the scan
# stays linear whatever the body (a closing quote alone would make each quote rescan to the end).
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(body: bytes) -> int:
    """How deeply ``body``'s arrays and objects nest (brackets inside strings do not count)."""
    brackets = _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


class DepthLimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        body = stream.read() if stream is not None else b""
        depth = json_depth(body)
        if depth > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested {depth} levels deep; at most {MAX_JSON_DEPTH} are accepted.")
        return super().parse(BytesIO(body), media_type, parser_context)
