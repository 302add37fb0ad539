"""Events of scoring that the layers above it act on.

Scoring sits below research, so it announces instead of calling: research keeps the dashboard's
analyses computed ahead of the next page load. Receivers register in their app's ``ready()``.
"""

from __future__ import annotations

from django.dispatch import Signal

#: Sent once a run's new scores have committed (``do_score_evaluation_run``), with ``run_id``.
run_scored = Signal()
