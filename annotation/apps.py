from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotation.tasks import queue_rewrite_after_reply
        from collection.signals import reply_stored

        reply_stored.connect(queue_rewrite_after_reply, dispatch_uid="attune.annotation.prepare-rewrite")
