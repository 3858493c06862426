"""ASGI entry point: Django for HTTP, Channels for the chat websocket.

The inference engine is started once per process (``shop_assistant.startup``, called by ``shop_assistant.serve``;
else lazily on first use, see shop_assistant.runtime.engine_service) and shared by every connection. Importing this
module starts nothing.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
# Django must be set up before the routing imports models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from shop_assistant.routing import websocket_application  # noqa: E402
from shop_assistant.runtime.proxy import TrustedProxyMiddleware  # noqa: E402

# Outermost: the client's address is settled (X-Forwarded-For from a trusted proxy only) before anything reads it.
application = TrustedProxyMiddleware(
    ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_application})
)
