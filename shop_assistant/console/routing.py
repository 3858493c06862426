"""The console's websocket route. Only this site's own pages may open it (``origins.own_origin``: scheme, host
and port), never the stores' widget origins: the socket acts with the agent's session cookie."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from django.urls import path

from shop_assistant.runtime.origins import OriginGate

from .consumers import ConsoleConsumer

websocket_urlpatterns: list = [
    # The origin first: a foreign page's handshake is refused before its cookie is even looked up.
    path("ws/console/", OriginGate(AuthMiddlewareStack(ConsoleConsumer.as_asgi()))),
]
