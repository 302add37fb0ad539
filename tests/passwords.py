"""The password hasher the tests make accounts with: production's algorithm at a test's iteration count."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2-SHA256 as in production, at 1,000 iterations rather than Django's million.

    At a million, each account a fixture makes and each login a test posts costs over half a CPU-second, the
    suite's largest single set-up cost; the algorithm, the encoded form and the checks stay production's.
    """

    iterations = 1_000
