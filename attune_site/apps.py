from django.apps import AppConfig


class AttuneSiteConfig(AppConfig):
    name = "attune_site"
    verbose_name = "Attune site"

    def ready(self) -> None:
        from attune_site import checks  # noqa: F401  (registers the deployment checks)
