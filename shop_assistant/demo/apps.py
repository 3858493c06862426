from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo store (``load_demo_store``): its catalog, documents, prompt and staff logins."""

    name = "shop_assistant.demo"
