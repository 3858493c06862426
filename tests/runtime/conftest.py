"""The runtime's metrics are read with the real engine answering: the chat's fixtures, shared."""

from tests.chat.conftest import asgi_app, chat_engine, chat_settings, demo_store, ws  # noqa: F401
