"""The evaluation asks through the chat's pipeline: the chat's engine and demo store fixtures, shared."""

from tests.chat.conftest import chat_engine, chat_settings, demo_store  # noqa: F401
