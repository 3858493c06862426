from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "shop_assistant.chat"
    label = "chat"
    default_auto_field = "django.db.models.BigAutoField"
