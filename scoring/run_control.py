"""Starting, resuming and cancelling evaluation runs: what the launcher, the CLI and the demo call.

It sits above both the replay service (which prepares and replays) and the
Celery tasks (which carry the work to workers), so neither imports the other
through a back door.
"""

from __future__ import annotations

from django.utils import timezone

from scoring.models import EvaluationRun, RunConversation
from scoring.replay_service import ACTIVE_STATUSES, do_prepare_run
from scoring.tasks import dispatch_run


def start_run(run_id: int) -> None:
    """Prepare a queued run and hand it to Celery (eager, in-process, without REDIS_URL)."""
    pending = do_prepare_run(run_id)
    dispatch_run(run_id, pending)


def resume_run(run_id: int) -> None:
    """Continue a cancelled or failed run: finished conversations are kept, cached calls are free."""
    RunConversation.objects.filter(run_id=run_id, status=RunConversation.Status.FAILED).update(
        status=RunConversation.Status.PENDING
    )
    run = EvaluationRun.objects.get(pk=run_id)
    failed = RunConversation.objects.filter(run_id=run_id).exclude(status=RunConversation.Status.DONE).count()
    EvaluationRun.objects.filter(pk=run_id).update(conversations_failed=max(0, run.conversations_failed - failed))
    start_run(run_id)


def cancel_run(run_id: int) -> bool:
    """Stop a run: conversations not yet started are skipped by the workers."""
    changed = EvaluationRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
        status=EvaluationRun.Status.CANCELLED, finished_at=timezone.now()
    )
    return bool(changed)
