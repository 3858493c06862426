from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "shop_assistant.chat"
    label = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's autodiscovery looks for ``chat.tasks``; the log's task lives in chat/log/tasks.py, so register it
        # here (a worker sets Django up before it takes messages).
        from .log import tasks  # noqa: F401
