from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "shop_assistant.ops"
    label = "ops"
    verbose_name = "Operations: health and metrics"
