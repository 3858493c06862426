from django.apps import AppConfig


class OrdersConfig(AppConfig):
    """The store's orders as the chat may tell a verified shopper about them, and the return, exchange and
    cancellation requests the chat starts for agents to decide. The assistant never changes an order itself."""

    name = "shop_assistant.orders"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The tasks are sent by name (``background.queue``): registered in every process, web and worker alike.
        from . import tasks  # noqa: F401
