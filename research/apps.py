from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "research"
    default_auto_field = "django.db.models.BigAutoField"
