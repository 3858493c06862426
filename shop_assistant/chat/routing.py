"""Websocket routes, behind an Origin check.

The widget runs on stores' own sites, so besides this site's hosts (ALLOWED_HOSTS) the origins in
settings.WIDGET_ALLOWED_ORIGINS may connect (patterns as channels' OriginValidator reads them:
``https://shop.example.com``, ``https://.example.com`` for subdomains, or ``*``). A frame without an Origin
header is refused, as channels does, unless ``*`` is allowed.
"""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.urls import path

from shop_assistant.console.routing import websocket_urlpatterns as console_websocket_urlpatterns

from . import engine
from .consumers import ChatConsumer


def allowed_origins() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return hosts + list(getattr(settings, "WIDGET_ALLOWED_ORIGINS", []))


websocket_urlpatterns: list = [
    path("ws/chat/", ChatConsumer.as_asgi()),
    *console_websocket_urlpatterns,
]

websocket_application = OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)), allowed_origins())

# This module is imported by the ASGI app only (not by management commands or the Celery worker), so this is
# "started once with the app": the model loads on a background thread while the server starts accepting.
if settings.ENGINE_AUTOSTART:
    engine.start_in_background()
