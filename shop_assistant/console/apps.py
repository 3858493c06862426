from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "shop_assistant.console"
    label = "console"
    default_auto_field = "django.db.models.BigAutoField"
