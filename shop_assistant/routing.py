"""Websocket routes of the site: the shopper's chat and the staff console, each behind its own Origin check
(see ``shop_assistant.runtime.origins``: a store's widget origins open the chat, never the console).

Imported by the ASGI app only (not by management commands or the Celery worker), so this is "started once with
the app": the model loads on a background thread while the server starts accepting, the node's listener (pre-warm on
every node) starts once it is loaded, and messages spooled while the database was down are replayed once it is
back.
"""

from __future__ import annotations

from channels.routing import URLRouter
from django.conf import settings

from shop_assistant.chat.log import spool
from shop_assistant.runtime import engine_service as engine
from shop_assistant.chat.routing import websocket_urlpatterns as chat_urlpatterns
from shop_assistant.console.routing import websocket_urlpatterns as console_urlpatterns
from shop_assistant.studio import prewarm

# Each route checks its Origin before anything else; only the console reads the session (chat/console routing).
websocket_application = URLRouter(chat_urlpatterns + console_urlpatterns)

if settings.ENGINE_AUTOSTART:
    engine.start_in_background()
if settings.ENGINE_AUTOSTART and settings.NODE_LISTENER:
    # This process as a node: once the model is loaded it pre-warms the published prompts, then whatever a
    # publish on any node announces (shop_assistant/runtime/nodes.py).
    prewarm.start_node()
spool.start_replayer()
