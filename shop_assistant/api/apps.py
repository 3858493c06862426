from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "shop_assistant.api"
    label = "api"
    verbose_name = "OpenAI-compatible API"
