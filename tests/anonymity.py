"""Looking for model names in what a participant received, without tripping over random tokens."""

from __future__ import annotations

import re

# A random token (CSRF value, session cookie, participant link, nonce) is long and mixes upper case, lower case and
# digits. One holds "gpt" or "acme" by chance about once in a few hundred pages, so tokens are cut out first.
# A name glued into such a run (a slug like "GPT-4o-by-OpenAI-2024") would be cut too: the secrets the tests
# look for are short names, which pages show in words.
_RANDOM_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"
    r"(?![A-Za-z0-9_-])"
)


def names_found(text: str, secrets: list[str]) -> list[str]:
    """The secrets that occur in text, ignoring case, once random tokens are removed."""
    searched = _RANDOM_TOKEN.sub("", text).lower()
    return [secret for secret in secrets if secret.lower() in searched]
