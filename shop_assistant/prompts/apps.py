from django.apps import AppConfig


class PromptsConfig(AppConfig):
    name = "shop_assistant.prompts"
    label = "prompts"
    default_auto_field = "django.db.models.BigAutoField"
