"""The console's websocket route. Only this site's own pages may open it (ALLOWED_HOSTS), not the stores' sites
that may embed the widget: the socket acts with the agent's session cookie."""

from __future__ import annotations

from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from .consumers import ConsoleConsumer

websocket_urlpatterns: list = [
    path("ws/console/", AllowedHostsOriginValidator(ConsoleConsumer.as_asgi())),
]
