from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from collection.signals import participant_withdrawn
        from scoring.withdrawal import rescore_after_withdrawal

        participant_withdrawn.connect(rescore_after_withdrawal, dispatch_uid="attune.scoring.rescore-withdrawn")
