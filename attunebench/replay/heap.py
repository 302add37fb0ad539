"""Keeping a replay process's start-up objects out of the garbage collector's full passes.

A process that replays has imported litellm (and, in a worker, Django): a
few hundred thousand long-lived objects (375,000 after litellm's import) that
are never garbage. CPython's full (generation 2) collection walks all of them
each time it runs: 0.17-0.19 s of CPU here, 0.28-0.30 s in a replay's busy
children, with the process's event loop stopped meanwhile. In
``attune eval --processes 2`` both children, forked from the same parent,
reached that collection at the same moment of the run, so for 0.3 s no call
was sent or answered anywhere (seen with ``gc.callbacks`` in the children).

``gc.freeze()`` moves every object alive now into a generation the collector
never visits. The Python documentation recommends exactly this before a
``fork()`` without ``exec()`` (the children's collections then neither walk nor
write to the parent's pages); it is as useful in a process that does not fork
but keeps its start-up heap for its whole life, as a worker does. Objects made
afterwards are collected as usual, and frozen ones are still freed when their
last reference goes; only a reference cycle frozen now is never collected, a
small price for a library that stays loaded for good.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Freeze every object alive now (call once start-up is done, before any fork); return how many are frozen."""
    gc.freeze()
    return gc.get_freeze_count()
