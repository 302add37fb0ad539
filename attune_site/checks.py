"""``attune check --deploy``: where the two keys come from and whether they are the deployment's."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Info, Tags, Warning, register
from django.db import DatabaseError

from attune_site.identity import compare_keys, fingerprint, identity_table_exists, key_source, process_key


@register(Tags.security, deploy=True)
def deployment_keys(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Reports both keys: their source, their fingerprint, and whether they match the recorded ones."""
    messages: list[CheckMessage] = []
    try:
        comparisons = compare_keys(record=False) if identity_table_exists() else []
    except DatabaseError as exc:
        return [
            Warning(
                f"Could not compare ATTUNE_SECRET_KEY and ATTUNE_PSEUDONYM_KEY with the deployment's: the "
                f"database did not answer ({exc}).",
                id="attune.W110",
            )
        ]
    recorded = {c.variable: c for c in comparisons}
    for number, variable in enumerate(("ATTUNE_SECRET_KEY", "ATTUNE_PSEUDONYM_KEY"), start=1):
        comparison = recorded.get(variable)
        if comparison is not None and not comparison.matches:
            messages.append(Error(comparison.mismatch(), id=f"attune.E11{number}"))
            continue
        source = key_source(variable)
        if not source.startswith("the environment"):
            messages.append(
                Warning(
                    f"{variable} comes from {source}: a second host would make its own. Set {variable} to the "
                    "same random value on every host.",
                    id=f"attune.W11{number}",
                )
            )
        state = (
            f"matches the deployment's (recorded {comparison.recorded.recorded_at:%Y-%m-%d})"
            if comparison is not None and comparison.recorded is not None
            else "not recorded yet (the first web process or worker records it)"
        )
        messages.append(
            Info(
                f"{variable}: from {source}; fingerprint {fingerprint(process_key(variable))[:12]}, {state}.",
                id=f"attune.I11{number}",
            )
        )
    return messages
