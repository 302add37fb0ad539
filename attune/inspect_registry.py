"""inspect_ai's entry point into Attune (the ``inspect`` extra): ``inspect eval attune/attunebench``.

inspect names a registered task after the top-level package its function is defined in, so the task is
declared here, in ``attune``, and built by the benchmark core (``attunebench.inspect_task``).
"""

from __future__ import annotations

from inspect_ai import Task, task

from attunebench.inspect_task import attunebench_task


@task
def attunebench(
    conversations: str,
    mode: str = "default",
    panas_strategy: str = "absolute",
    judge: str | None = None,
    parse_attempts: int = 5,
    runs_dir: str | None = None,
) -> Task:
    """AttuneBench over the conversation files at ``conversations`` (a file or a folder).

    ``mode``: default, verbose, omniscient or verbose_omniscient; ``panas_strategy``: absolute, delta or blind_delta;
    ``judge``: an inspect model name that rates the drafts (none by default); ``parse_attempts``: tries per call
    when answers are unusable; ``runs_dir``: a folder for the canonical run files (``attune score`` reads them).
    AttuneBench is a research and diagnostic instrument, not a certificate of safety or suitability
    (the task's ``description`` metadata carries the full statement).
    """
    return attunebench_task(conversations, mode, panas_strategy, judge, parse_attempts, runs_dir)
