from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Datasets: import and export of canonical files, frozen dataset versions and their export jobs.

    It sits above ``collection`` and ``annotation`` (an export needs both) and
    below ``scoring`` (a run replays a dataset version).
    """

    name = "datasets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from collection.signals import participant_withdrawn
        from datasets.withdrawal import withdraw_exports_after_withdrawal

        participant_withdrawn.connect(
            withdraw_exports_after_withdrawal, dispatch_uid="attune.datasets.withdraw-exports"
        )
