from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "shop_assistant.console"
    label = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from shop_assistant.chat.log import closing

        from . import services

        # Who resolved a conversation, in its activity list: the chat closes it (for the shopper too).
        closing.conversation_closed.connect(services.log_close, dispatch_uid="console.log_close")
