from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _repair_offline_baselines(**kwargs: Any) -> None:
    """After every migrate: the offline baselines are back in the registry if someone deleted them.

    Done here, an explicit step, rather than when the launcher page is shown (a GET writes nothing).
    """
    from research.runs.launcher import ensure_offline_baselines

    ensure_offline_baselines()


class ResearchConfig(AppConfig):
    name = "research"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_repair_offline_baselines, sender=self, dispatch_uid="attune.research.baselines")
        # The API schema's drf-spectacular extension registers where the schema is served
        # (research.api.views), not here: importing drf-spectacular pulls most of DRF and its optional
        # dependencies, which every command (attune eval among them) would pay for at start-up.
        from research.results.precompute import schedule_warm_dashboard
        from scoring.signals import run_scored

        run_scored.connect(schedule_warm_dashboard, dispatch_uid="attune.research.warm-dashboard")
