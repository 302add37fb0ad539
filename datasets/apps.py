from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Datasets: import and export of canonical files, frozen dataset versions and their export jobs.

    It sits above ``collection`` and ``annotation`` (an export needs both) and
    below ``scoring`` (a run replays a dataset version).
    """

    name = "datasets"
    default_auto_field = "django.db.models.BigAutoField"
