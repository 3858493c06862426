"""The chat's websocket route, behind the chat's Origin rule (``origins.origin_allowed``): the site itself, a
site-wide widget origin, or one of the widget origins of the store the socket opens: the resumed conversation's
(``?resume=``), else the one named by ``?store=`` (one per line).
Anything else, and a connection without an Origin, is refused with 403 before the websocket opens.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.urls import path

from shop_assistant.runtime.origins import OriginGate, allowed_origins, origin_allowed

from .log import conversations
from .models import WidgetSettings
from .protocol.consumers import ChatConsumer

__all__ = ["StrictOriginValidator", "allowed_origins", "origin_allowed", "websocket_urlpatterns"]


def _store_origins(slug: str | None, resume_token: str | None = None) -> list[str]:
    """The widget origins of the store the socket will chat with, chosen as the session chooses it
    (``session._open_conversation``): the resumed conversation's own store, else the one ``slug`` names (the
    first store without one). A token alone must not be judged by the first store's list."""
    conversation = conversations.resume_conversation(resume_token, slug) if resume_token else None
    store = conversation.store if conversation is not None else conversations.default_store(slug)
    return WidgetSettings.of(store).allowed_origins.split() if store is not None else []


async def chat_store_origins(scope: dict[str, Any]) -> list[str]:
    """The widget origins of the store the handshake opens (``?resume=``'s conversation, or ``?store=``)."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    slug = (query.get("store") or [None])[-1]
    token = (query.get("resume") or [None])[-1]
    return await database_sync_to_async(_store_origins)(slug, token)


def StrictOriginValidator(application: Any) -> OriginGate:  # noqa: N802 - reads as the middleware it makes
    """The chat's gate: refuse the websocket (403) unless ``origin_allowed`` for the store asked for."""
    return OriginGate(application, chat_store_origins)


websocket_urlpatterns: list = [
    path("ws/chat/", StrictOriginValidator(ChatConsumer.as_asgi())),
]
